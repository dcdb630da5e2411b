/**
 * Runs the tests, two processes at a time: `unit` (the unit suite), `e2e` (everything else: the http and services
 * suites, one process each, and every other file alone) or `all` (default). suites.ts says which file runs where.
 * Further arguments go to node's test runner (e.g. --test-reporter=tap).
 *
 *   node --import tsx test/run.ts [unit|e2e|all] [node test options]
 */
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { aloneFiles, kTestRoot } from './suites.ts'

const [mode = 'all', ...rest] = process.argv.slice(2)
if (mode !== 'unit' && mode !== 'e2e' && mode !== 'all') {
  process.stderr.write('usage: node --import tsx test/run.ts [unit|e2e|all] [node test options]\n')
  process.exit(2)
}
const files: string[] = []
if (mode !== 'unit') files.push(...aloneFiles())
// The suites (15-40 s each in one process) start after the slowest files, beside the rest.
const suites = [...(mode === 'e2e' ? [] : ['unit.suite.ts']), ...(mode === 'unit' ? [] : ['services.suite.ts', 'http.suite.ts'])]
files.splice(Math.min(files.length, 3), 0, ...suites)
const args = ['--import', 'tsx', '--test', '--test-concurrency=2', ...rest, ...files.map((f) => join(kTestRoot, f))]
const run = spawnSync(process.execPath, args, { stdio: 'inherit' })
process.exit(run.status ?? 1)
