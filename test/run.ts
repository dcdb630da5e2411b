/**
 * Runs the tests: `unit` (the unit suite), `e2e` (everything else: the http and services suites, one process each,
 * and every other file alone) or `all` (default). suites.ts says which file runs where, and in which order: the
 * slowest first, so that the lanes end together. Files run through node:test's run(), which keeps that order (the
 * command line's runner sorts files by name).
 *
 *   node --import tsx test/run.ts [unit|e2e|all] [options]
 *
 * Options: --concurrency=N (files at a time; default: see kConcurrency), --durations (seconds per file at the end,
 * on stderr), --test-name-pattern=RE, --test-reporter=NAME|PATH with --test-reporter-destination=stdout|stderr|PATH
 * as node's (default: spec on a terminal, tap otherwise), and --coverage=N: measure the coverage of src/ and workers/
 * (node's own, every test process and thread, mapped back to the TypeScript sources) and fail the run when lines
 * covered fall under N percent (`npm run test:coverage` sets N: what was measured, never lowered).
 */
import { createWriteStream, readdirSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { join, resolve } from 'node:path'
import { PassThrough, type Readable, type Writable } from 'node:stream'
import { run } from 'node:test'
import * as reporters from 'node:test/reporters'
import { pathToFileURL } from 'node:url'
import { nodeVersionProblem } from '../bin/node-version.js'
import { bundleFiles } from '../workers/bundle.js'
import { runOrder, kTestRoot } from './suites.ts'

/**
 * Files at a time by default: one more than the cores. Many files spend much of their time waiting (timeouts they
 * test, child processes, a store's busy timeout), and a third file keeps the cores busy meanwhile.
 */
const kConcurrency = availableParallelism() + 1

function usage (message: string): never {
  process.stderr.write(`${message}\nusage: node --import tsx test/run.ts [unit|e2e|all] [--concurrency=N] [--durations] ` +
    '[--test-name-pattern=RE] [--test-reporter=R --test-reporter-destination=D]...\n')
  process.exit(2)
}

// On an older Node every file that opens a SQLite store would crash with a segmentation fault: say why once instead.
const tooOld = nodeVersionProblem(process.versions.node)
if (tooOld !== null) {
  process.stderr.write(`${tooOld}\n`)
  process.exit(1)
}

const args = process.argv.slice(2)
const mode = args[0] !== undefined && !args[0].startsWith('-') ? args.shift() as string : 'all'
if (mode !== 'unit' && mode !== 'e2e' && mode !== 'all') usage(`unknown mode ${mode}`)
let concurrency = kConcurrency
let durations = false
let coverage: number | null = null
const patterns: string[] = []
const reporterNames: string[] = []
const destinations: string[] = []
for (let i = 0; i < args.length; i++) {
  const arg = args[i] as string
  const eq = arg.indexOf('=')
  const [name, inline] = eq < 0 ? [arg, undefined] : [arg.slice(0, eq), arg.slice(eq + 1)]
  const value = (): string => {
    const v = inline ?? args[++i]
    if (v === undefined) usage(`${name} needs a value`)
    return v
  }
  if (name === '--durations') durations = true
  else if (name === '--coverage') coverage = Number(value())
  else if (name === '--concurrency') concurrency = Number(value())
  else if (name === '--test-name-pattern') patterns.push(value())
  else if (name === '--test-reporter') reporterNames.push(value())
  else if (name === '--test-reporter-destination') destinations.push(value())
  else usage(`unknown option ${arg}`)
}
if (!Number.isInteger(concurrency) || concurrency < 1) usage('--concurrency must be a positive integer')
if (coverage !== null && !(coverage >= 0 && coverage <= 100)) usage('--coverage must be a percentage of lines')
if (reporterNames.length === 0) reporterNames.push(process.stdout.isTTY === true ? 'spec' : 'tap')
if (destinations.length === 0) destinations.push('stdout')
if (reporterNames.length !== destinations.length) usage('give one --test-reporter-destination per --test-reporter')

type Reporter = ((source: AsyncIterable<unknown>) => AsyncGenerator<unknown>) | NodeJS.ReadWriteStream

/**
 * A reporter as node's runner takes one: a built-in name or a module path. A constructor (a stream class, and the
 * built-in spec and lcov, functions that return a new stream) is called with new; an async generator is used as is.
 */
async function reporterOf (name: string): Promise<Reporter> {
  const builtin = (reporters as Record<string, unknown>)[name]
  const loaded = builtin ?? (await import(name.startsWith('.') || name.startsWith('/') ? pathToFileURL(resolve(name)).href : name) as { default: unknown }).default
  const Ctor = loaded as { prototype?: object } & (new () => NodeJS.ReadWriteStream)
  if (Ctor.prototype !== undefined && Object.getOwnPropertyDescriptor(Ctor.prototype, 'constructor') !== undefined) return new Ctor()
  return loaded as Reporter
}

function destinationOf (name: string): Writable {
  if (name === 'stdout') return process.stdout
  if (name === 'stderr') return process.stderr
  return createWriteStream(name)
}

/** Feeds the run's events through a reporter into a destination. */
function report (events: Readable, reporter: Reporter, destination: Writable): void {
  const source = events.pipe(new PassThrough({ objectMode: true }))
  const out = typeof reporter === 'function' ? source.compose(reporter as never) : source.pipe(reporter)
  out.pipe(destination, { end: destination !== process.stdout && destination !== process.stderr })
}

// The command line's and the threads' bundles are made (or found current) here, once, before several files at a
// time would each make the same ones.
const workers = readdirSync(join(kTestRoot, '..', 'workers')).filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
bundleFiles(['main', ...workers.map((f) => f.slice(0, -'.ts'.length))])

const files = runOrder(mode).map((f) => join(kTestRoot, f))
/**
 * A test still running after this long fails (the file's other tests go on). A file whose tests have ended but whose
 * process does not exit (a leaked handle: a thread, a socket, a timer) is caught by the run's own bound below: the
 * run then says so and exits 1 instead of holding CI open until an outside timeout kills everything. (node:test's
 * forceExit would end such a process, but it also ends a suite process between two of its files' imports.)
 */
const kTestTimeoutMs = 15 * 60_000
/** The whole run's bound: above a full run on a busy 2-core machine (about 30 minutes at load 16). */
const kRunTimeoutMs = 45 * 60_000

const events = run({
  files,
  concurrency,
  timeout: kTestTimeoutMs,
  ...(patterns.length > 0 ? { testNamePatterns: patterns } : {}),
  ...(coverage === null ? {} : { coverage: true, coverageIncludeGlobs: ['src/**', 'workers/**'], lineCoverage: coverage })
})
for (const [i, name] of reporterNames.entries()) report(events, await reporterOf(name), destinationOf(destinations[i] as string))
if (durations) report(events, (await import('./tools/file-durations.ts')).default as Reporter, process.stderr)
events.on('test:fail', (data: { todo?: unknown }) => {
  if (data.todo === undefined || data.todo === false) process.exitCode = 1
})

setTimeout(() => {
  process.stderr.write(`test run: still running after ${kRunTimeoutMs / 60_000} minutes: a test hangs or a file's process does not exit\n`)
  process.exit(1)
}, kRunTimeoutMs).unref()
