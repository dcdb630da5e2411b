/**
 * Every unit test file (suites.ts) in one process: `node --import tsx --test test/unit.suite.ts`. Each file still
 * runs alone too (`node --import tsx --test test/engine/score.test.ts`).
 */
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { kTestRoot, kUnitFiles } from './suites.ts'

for (const file of kUnitFiles) await import(pathToFileURL(join(kTestRoot, file)).href)
