/**
 * Lifecycle stress: on the Node.js that runs it, starts and stops the service and runs the CLI many times over one
 * data directory, and counts how each process ended. An abort (SIGABRT, exit 134) is what a native module's
 * finalizer running at teardown does; the service must end every way with no abort and with every SQLite database
 * closed by its own code (each process runs with test/fixtures/sqlite-open-log.cjs preloaded, in every thread).
 *
 *   npm run stress:lifecycle -- [--runs 50] [--pool 2]
 *
 * Each run: `serve` (real process) answers a single call and a bulk, reloads its intel on SIGHUP, and is stopped
 * with SIGTERM (expected: exit 0); then `keys create`, `keys list`, `intel check` and `score` run (expected: exit 0).
 * The first start compiles the intel snapshot; the others load it warm. Prints one row per kind: runs, exit 0,
 * other exit codes, aborts, other signals, databases left open, and the median and slowest wall time. Exits 1 when
 * any process ended otherwise than expected.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { request } from 'undici'
import { kSqliteOpenLog, sqliteLeftOpen } from '../test/helper.ts'
import { runCli, spawnServe, ServeStartError, type Exit } from '../test/fixtures/serve-process.ts'

const { values } = parseArgs({ options: { runs: { type: 'string', default: '50' }, pool: { type: 'string', default: '2' } }, strict: true })
const kRuns = Number(values.runs)
if (!Number.isSafeInteger(kRuns) || kRuns < 1) throw new Error('--runs must be a positive integer')

const work = mkdtempSync(join(tmpdir(), 'iocv-lifecycle-'))
const env = { IOC_DATA_DIR: join(work, 'data'), IOC_POOL_SIZE: String(values.pool), IOC_LOG_LEVEL: 'info' }

interface Outcome { exit: Exit | null, ms: number, leftOpen: number, note: string | null }
const outcomes = new Map<string, Outcome[]>()

/** Runs one process with its own open/close log and records how it ended. */
async function record (kind: string, run: (log: string) => Promise<{ exit: Exit | null, note: string | null }>): Promise<void> {
  const log = join(work, `${kind.replace(/\W/g, '-')}-${(outcomes.get(kind)?.length ?? 0) + 1}.log`)
  const t0 = performance.now()
  let result: { exit: Exit | null, note: string | null }
  try {
    result = await run(log)
  } catch (err) {
    result = { exit: err instanceof ServeStartError ? err.exit : null, note: (err as Error).message.slice(0, 2000) }
  }
  const outcome = { ...result, ms: performance.now() - t0, leftOpen: sqliteLeftOpen(log).left.length }
  outcomes.set(kind, [...outcomes.get(kind) ?? [], outcome])
  const expected = outcome.exit?.code === 0 && outcome.leftOpen === 0 && outcome.note === null
  if (!expected) process.stderr.write(`${kind}: ${JSON.stringify(outcome)}\n`)
}

async function cli (args: string[], log: string): Promise<{ exit: Exit, stdout: string, stderr: string }> {
  const r = await runCli(args, { env: { ...env, SQLITE_OPEN_LOG: log }, nodeArgs: ['--require', kSqliteOpenLog] })
  return { exit: { code: r.code, signal: r.signal }, stdout: r.stdout, stderr: r.stderr }
}

let key: string | null = null

/** One serve process: a single call, a bulk, a reload (SIGHUP), then SIGTERM. */
async function serveOnce (log: string): Promise<{ exit: Exit, note: string | null }> {
  const s = await spawnServe({ env: { ...env, IOC_BOOTSTRAP_KEY: '1', SQLITE_OPEN_LOG: log }, nodeArgs: ['--require', kSqliteOpenLog] })
  try {
    key ??= s.key
    if (key === null) throw new Error('no key: the first start printed none')
    const headers = { 'content-type': 'application/json', 'x-api-key': key }
    const single = await request(`${s.base}/api/v2/ioc/verdict`, { method: 'POST', headers, body: JSON.stringify({ indicator: { value: '198.51.100.23' } }) })
    await single.body.dump()
    const indicators = Array.from({ length: 1000 }, (_, i) => ({ value: `stress-${i}.example` }))
    const bulk = await request(`${s.base}/api/v2/ioc/verdict/bulk`, { method: 'POST', headers, body: JSON.stringify({ indicators }) })
    await bulk.body.dump()
    if (single.statusCode !== 200 || bulk.statusCode !== 200) throw new Error(`answers ${single.statusCode} and ${bulk.statusCode}`)
    s.proc.kill('SIGHUP')
    while (!/intel snapshot reloaded \(SIGHUP\)|intel reload failed/.test(s.stdout())) {
      if (s.proc.exitCode !== null || s.proc.signalCode !== null) break
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    const reloaded = s.stdout().includes('intel snapshot reloaded (SIGHUP)')
    const exit = await s.stop('SIGTERM')
    return { exit, note: reloaded ? null : 'no reload logged' }
  } finally {
    await s.stop('SIGKILL')
  }
}

async function cliOnce (args: string[], log: string): Promise<{ exit: Exit, note: string | null }> {
  const r = await cli(args, log)
  return { exit: r.exit, note: r.exit.code === 0 ? null : r.stderr.slice(-2000) }
}

const pkg = (name: string): string => (createRequire(import.meta.url)(`${name}/package.json`) as { version: string }).version
process.stderr.write(`lifecycle stress: node ${process.version}, better-sqlite3 ${pkg('better-sqlite3')}, ${kRuns} runs, pool ${values.pool}, in ${work}\n`)
const started = performance.now()
try {
  for (let i = 0; i < kRuns; i++) {
    await record('serve + reload + SIGTERM', serveOnce)
    await record('keys create', async (log) => await cliOnce(['keys', 'create', '--tenant', 'stress', '--permissions', 'verdict'], log))
    await record('keys list', async (log) => await cliOnce(['keys', 'list'], log))
    await record('intel check', async (log) => await cliOnce(['intel', 'check'], log))
    await record('score', async (log) => await cliOnce(['score', '198.51.100.23', 'stress.example'], log))
    if ((i + 1) % 10 === 0) process.stderr.write(`  ${i + 1}/${kRuns} runs, ${Math.round((performance.now() - started) / 1000)} s\n`)
  }
} finally {
  rmSync(work, { recursive: true, force: true })
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN
const rows = [...outcomes].map(([kind, list]) => {
  const codes = list.filter((o) => o.exit?.signal === null && o.exit.code !== 0 && o.exit.code !== 134).map((o) => o.exit?.code)
  return {
    kind,
    runs: list.length,
    exit0: list.filter((o) => o.exit?.code === 0).length,
    otherExit: codes.length,
    aborts: list.filter((o) => o.exit?.signal === 'SIGABRT' || o.exit?.code === 134).length,
    otherSignals: list.filter((o) => o.exit?.signal !== null && o.exit?.signal !== undefined && o.exit.signal !== 'SIGABRT').length,
    noExit: list.filter((o) => o.exit === null).length,
    leftOpen: list.reduce((n, o) => n + o.leftOpen, 0),
    notes: list.filter((o) => o.note !== null).length,
    medianMs: Math.round(median(list.map((o) => o.ms))),
    maxMs: Math.round(Math.max(...list.map((o) => o.ms)))
  }
})
console.log(`node ${process.version}, better-sqlite3 ${pkg('better-sqlite3')}, ${kRuns} runs in ${Math.round((performance.now() - started) / 1000)} s`)
console.table(rows)
const clean = rows.every((r) => r.exit0 === r.runs && r.leftOpen === 0 && r.notes === 0)
console.log(clean ? 'every process ended as expected: no abort, no signal, no database left open' : 'some processes ended otherwise than expected (details above)')
process.exitCode = clean ? 0 : 1
