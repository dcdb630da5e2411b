/**
 * Runs the tests: `unit`, `e2e` or `all` (default), two processes at a time (the unit suite is one of them).
 * Further arguments go to node's test runner (e.g. --test-reporter=tap).
 *
 *   node --import tsx test/run.ts [unit|e2e|all] [node test options]
 */
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { e2eFiles, kTestRoot } from './suites.ts'

const [mode = 'all', ...rest] = process.argv.slice(2)
if (mode !== 'unit' && mode !== 'e2e' && mode !== 'all') {
  process.stderr.write('usage: node --import tsx test/run.ts [unit|e2e|all] [node test options]\n')
  process.exit(2)
}
const files: string[] = []
if (mode !== 'unit') files.push(...e2eFiles())
// The unit suite (about 20 s in one process) goes after the slowest end-to-end files, beside the rest.
if (mode !== 'e2e') files.splice(Math.min(files.length, 4), 0, 'unit.suite.ts')
const args = ['--import', 'tsx', '--test', '--test-concurrency=2', ...rest, ...files.map((f) => join(kTestRoot, f))]
const run = spawnSync(process.execPath, args, { stdio: 'inherit' })
process.exit(run.status ?? 1)
