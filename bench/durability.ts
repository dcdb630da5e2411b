/**
 * Durability bench (the previous capacity bench, kept for its --durability comparison; bench/capacity.ts is the bench a
 * deployment is sized with): drives a listening service (a child process per mode, on 127.0.0.1) with 10,000-indicator
 * bulks at rising concurrency and with single calls, for the scoring pool and for inline mode in the same run,
 * and prints indicators/s and p50/p95/p99 latency, with the median of the answers' meta.took_ms (the server's time
 * from admission to merge: the scoring phase). Cold cache: every bulk carries indicators never sent before.
 * Each row also gives the CPU time the server process (all its threads: HTTP, scoring workers, history writer,
 * garbage collection) and this client spent per indicator while it ran: with the cores a fleet has, that sizes it.
 *
 *   node --import tsx bench/durability.ts [--bulks 24] [--concurrency 1,2,4] [--singles 2000] [--pool 2] [--cache-size N] [--rounds 3]
 *     [--isolated 8] [--warmup N] [--durability sync,async[,baseline] [--baseline-root DIR]]
 *
 * --durability compares history durability modes instead of pool and inline: one pool server per listed mode
 * (IOC_HISTORY_DURABILITY), taking turns as the pool and inline servers do; `baseline` runs the service found in
 * --baseline-root (another version's checkout, e.g. `git archive` of an earlier commit with node_modules linked), with
 * its defaults. Its summary gives each mode's best bulk indicators/s and single-call p50/p99, written to
 * bench/results/capacity-durability.json.
 *
 * Each server first answers warm-up bulks until its cache shards are full and V8's compiler has settled (kWarmup).
 * Both servers run at once and the two modes take turns on idle servers, level by level, for --rounds rounds; the
 * summary gives medians over rounds, and the pool/inline ratio per round (both measured minutes apart at most).
 * --cache-size sets IOC_CACHE_SIZE (verdicts per shard) for both servers; the default is the service's own.
 * --isolated N sends N more bulks per mode one at a time, each only once both servers are idle (the history of the
 * bulk before written): the latency of one bulk on an idle server, next to the back-to-back rows where each bulk
 * shares the cores with the history write of the one before.
 *
 * After each bulk row the bench polls the health route until the server's history backlog is empty: the row's
 * historyDrainMs, and sustainedIndicatorsPerSec = indicators / (seconds + drain), which counts the history write that
 * a short run leaves behind. Size a fleet on the sustained figure: past IOC_HISTORY_MAX_BACKLOG, an overload that the
 * history writer cannot follow gets 503 OVERLOADED.
 *
 * Results are printed and written to bench/results/capacity.json.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { Agent, request, type Dispatcher } from 'undici'
import { defaults } from '../src/config.ts'
import { mixedCorpus } from './corpus.ts'
import { median } from './stats.ts'

const kRoot = join(import.meta.dirname, '..')
const kIntelCache = join(tmpdir(), 'ioc-verdict-bench-intel')

const { values } = parseArgs({
  options: {
    bulks: { type: 'string', default: '24' },
    concurrency: { type: 'string', default: '1,2,4' },
    singles: { type: 'string', default: '2000' },
    pool: { type: 'string', default: String(availableParallelism()) },
    size: { type: 'string', default: '10000' },
    'cache-size': { type: 'string' },
    rounds: { type: 'string', default: '3' },
    isolated: { type: 'string', default: '8' },
    warmup: { type: 'string' },
    durability: { type: 'string' },
    'baseline-root': { type: 'string' }
  }
})
/** One server configuration the bench compares. */
interface Mode { name: string, poolSize: number, env: Record<string, string>, root: string }
const kDurability = values.durability?.split(',').map((d) => d.trim()).filter(Boolean)
const kBulks = Number(values.bulks)
const kLevels = values.concurrency.split(',').map(Number)
const kSingles = Number(values.singles)
const kSize = Number(values.size)
const kRounds = Number(values.rounds)
const kIsolated = Number(values.isolated)
/**
 * Warm-up bulks per mode (--warmup overrides): JIT and thread start, every cache shard full (N shards x the cache
 * size) and evicting, and V8's optimizing compiler settled: the state of a service after its first minutes. Until a
 * cache is full each new verdict grows the shard's index, and V8 keeps compiling paths that only a full cache or a
 * rare input takes (eviction, the ring wrapping, an item that deoptimizes a hot function), once per isolate: the
 * pool's two scoring threads each compile the same code, on the cores they score on. Measured on a pool of 2 (30
 * bulks at concurrency 2, `--trace-opt` and per-thread CPU, 2026-11-24): after 23 warm-up bulks the compiler still
 * took 203 ms over the next 30, and the V8 helper threads 9 ms per bulk; after 150, 10.6 ms and 4.3 ms per bulk.
 * So at least 1,500,000 indicators (150 bulks of 10,000; 10-15 s per mode). Both modes get the same number;
 * measured bulks still miss the cache.
 */
const kWarmup = values.warmup !== undefined
  ? Number(values.warmup)
  : Math.max(3 + Math.ceil(Number(values.pool) * Number(values['cache-size'] ?? defaults().cacheSize) / kSize), Math.ceil(1_500_000 / kSize))

interface Server { proc: ChildProcess, base: string, key: string, dir: string }

/** Starts `ioc-verdict serve` in a child process and waits for its banner (URL and bootstrap key on stderr). */
async function startServer (mode: Mode): Promise<Server> {
  const dir = mkdtempSync(join(tmpdir(), 'ioc-verdict-bench-'))
  const proc = spawn(process.execPath, ['--import', 'tsx', join(mode.root, 'src', 'main.ts'), 'serve'], {
    cwd: mode.root,
    env: {
      PATH: process.env.PATH,
      ...mode.env,
      IOC_DATA_DIR: dir,
      IOC_PORT: '0',
      IOC_POOL_SIZE: String(mode.poolSize),
      IOC_LOG_LEVEL: 'warn',
      IOC_INTEL_CACHE_DIR: kIntelCache,
      IOC_MAX_INFLIGHT: '1000000',
      ...(values['cache-size'] === undefined ? {} : { IOC_CACHE_SIZE: values['cache-size'] })
    },
    stdio: ['ignore', 'ignore', 'pipe']
  })
  let err = ''
  return await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${err}`)), 120_000)
    proc.stderr?.on('data', (d: Buffer) => {
      err += d.toString()
      const url = /listening on (http:\/\/\S+)/.exec(err)?.[1]
      const key = /^\s+(iocv_\S+)$/m.exec(err)?.[1]
      if (url !== undefined && key !== undefined) {
        clearTimeout(timer)
        resolve({ proc, base: url, key, dir })
      }
    })
    proc.once('exit', (code) => reject(new Error(`server exited with ${code}:\n${err}`)))
  })
}

async function stopServer (s: Server): Promise<void> {
  const exited = new Promise((resolve) => s.proc.once('exit', resolve))
  s.proc.kill('SIGTERM')
  await exited
  rmSync(s.dir, { recursive: true, force: true })
}

function pct (sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] as number
}

interface Row {
  mode: string
  kind: string
  concurrency: number
  requests: number
  indicators: number
  seconds: number
  indicatorsPerSec: number
  p50: number
  p95: number
  p99: number
  /** Median meta.took_ms (bulk only): server time from admission to merge; the rest of p50 is HTTP, parsing and sending. */
  tookP50: number | null
  /** CPU time the server process (every thread: HTTP, scoring, history, GC) and this client spent per indicator. */
  serverCpuUsPerIndicator: number | null
  clientCpuUsPerIndicator: number
  errors: number
  errorStatuses: string
  /** Bulk rows: ms from the last answer until the server's history backlog was empty (health `checks.history.pending`). */
  historyDrainMs?: number
  /** Bulk rows: indicators answered and written to history per second (the drain counted): what a fleet sustains. */
  sustainedIndicatorsPerSec?: number
}

/** User + system CPU ms of a process, all threads (Linux /proc; null elsewhere). */
function processCpuMs (pid: number | undefined): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[11]) + Number(fields[12])) * 1000 / kClockTicks
  } catch {
    return null
  }
}
/** USER_HZ: 100 on every Linux architecture Node supports. */
const kClockTicks = 100

/** Bytes of an answer's start the bench keeps: a JSON bulk answer's meta, or a whole error body. */
const kHeadBytes = 4096

/**
 * Reads an answer to its end, keeping only its first kHeadBytes and counting the rest against content-length.
 * The client shares the server's cores, so it does not gather megabytes of results it never reads: collecting each
 * 6 MB answer into one ArrayBuffer cost the client 11-25 ms of CPU per bulk on the 2-core machine, against 9-11 ms
 * for reading it through.
 */
async function readAnswer (res: Dispatcher.ResponseData): Promise<{ head: Buffer, complete: boolean }> {
  const chunks: Buffer[] = []
  let kept = 0
  let bytes = 0
  await new Promise<void>((resolve, reject) => {
    res.body.on('data', (chunk: Buffer) => {
      bytes += chunk.length
      if (kept < kHeadBytes) {
        chunks.push(chunk)
        kept += chunk.length
      }
    })
    res.body.once('end', resolve)
    res.body.once('error', reject)
  })
  const length = Number(res.headers['content-length'] ?? NaN)
  return { head: Buffer.concat(chunks).subarray(0, kHeadBytes), complete: Number.isNaN(length) || bytes === length }
}

/**
 * Sends `bodies` over `concurrency` connections and measures them. `before`, when given, is awaited before each request
 * (its time is left out of `seconds`; the server's CPU during it, such as the last request's history write, is not).
 */
async function drive (s: Server, dispatcher: Agent, bodies: Buffer[], concurrency: number, path: string, perRequest: number, mode: string, kind: string, before?: () => Promise<void>): Promise<Row> {
  const lat: number[] = []
  /** meta.took_ms of each bulk answer: the server's time from admission to the merge, scoring included. */
  const took: number[] = []
  let next = 0
  let errors = 0
  const statuses = new Map<string, number>()
  const server0 = processCpuMs(s.proc.pid)
  const client0 = process.cpuUsage()
  const t0 = performance.now()
  let waited = 0
  await Promise.all(Array.from({ length: concurrency }, async () => {
    for (;;) {
      const i = next++
      if (i >= bodies.length) return
      if (before !== undefined) {
        const w = performance.now()
        await before()
        waited += performance.now() - w
      }
      const start = performance.now()
      const res = await request(`${s.base}${path}`, {
        method: 'POST',
        dispatcher,
        headers: { 'content-type': 'application/json', 'x-api-key': s.key },
        body: bodies[i] as Buffer
      })
      const { head, complete } = await readAnswer(res)
      // meta leads a JSON bulk answer: read took_ms from the head without decoding megabytes of results.
      const tookMs = /"took_ms":(\d+)/.exec(head.toString('latin1'))?.[1]
      if (tookMs !== undefined) took.push(Number(tookMs))
      if (res.statusCode !== 200 || !complete) {
        errors++
        const code = complete ? /"code":"([A-Z_]+)"/.exec(head.toString())?.[1] ?? '' : 'INCOMPLETE'
        statuses.set(`${res.statusCode} ${code}`, (statuses.get(`${res.statusCode} ${code}`) ?? 0) + 1)
      }
      lat.push(performance.now() - start)
    }
  }))
  const seconds = (performance.now() - t0 - waited) / 1000
  const server1 = processCpuMs(s.proc.pid)
  const client = process.cpuUsage(client0)
  lat.sort((a, b) => a - b)
  took.sort((a, b) => a - b)
  const round = (x: number): number => Math.round(x * 10) / 10
  return {
    mode,
    kind,
    concurrency,
    requests: bodies.length,
    indicators: bodies.length * perRequest,
    seconds: round(seconds),
    indicatorsPerSec: Math.round(bodies.length * perRequest / seconds),
    p50: round(pct(lat, 0.5)),
    p95: round(pct(lat, 0.95)),
    p99: round(pct(lat, 0.99)),
    tookP50: took.length === 0 ? null : pct(took, 0.5),
    serverCpuUsPerIndicator: server0 === null || server1 === null ? null : round((server1 - server0) * 1000 / (bodies.length * perRequest)),
    clientCpuUsPerIndicator: round((client.user + client.system) / (bodies.length * perRequest)),
    errors,
    errorStatuses: [...statuses].map(([k, n]) => `${k} x${n}`).join(', ')
  }
}

let seed = 1
function bulkBodies (n: number): Buffer[] {
  return Array.from({ length: n }, () => Buffer.from(JSON.stringify({ indicators: mixedCorpus(kSize, seed++), signal_details: 'none' })))
}
function singleBodies (n: number): Buffer[] {
  return mixedCorpus(n, seed++).map((ind) => Buffer.from(JSON.stringify({ indicator: ind })))
}

/** Ms until the server's history backlog is empty (polled on the health route), at most 120 s. */
async function drained (server: Server): Promise<number> {
  const t0 = performance.now()
  while (performance.now() - t0 < 120_000) {
    const res = await request(`${server.base}/api/v2/ioc/health`)
    const health = await res.body.json() as { checks?: { history?: { pending?: number } } }
    if (health.checks?.history?.pending === 0) break
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  return performance.now() - t0
}

/** Waits until the server is idle (its history writer has drained): under 5% of a core for 300 ms, at most 60 s. */
async function quiet (server: Server): Promise<void> {
  const until = Date.now() + 60_000
  for (;;) {
    const a = processCpuMs(server.proc.pid)
    await new Promise((resolve) => setTimeout(resolve, 300))
    const b = processCpuMs(server.proc.pid)
    if (a === null || b === null || b - a < 15 || Date.now() > until) return
  }
}

// Both servers run side by side and the modes take turns, level by level and round by round (the order flips each
// round), each run starting on idle servers: on a shared machine speed drifts over minutes, and running all of one
// mode and then all of the other would compare two different machines. The ratio is taken per round, then the median.
const modeList: Mode[] = kDurability === undefined
  ? [{ name: 'pool', poolSize: Number(values.pool), env: {}, root: kRoot }, { name: 'inline', poolSize: 0, env: {}, root: kRoot }]
  : kDurability.map((d) => {
    if (d !== 'baseline') return { name: d, poolSize: Number(values.pool), env: { IOC_HISTORY_DURABILITY: d }, root: kRoot }
    if (values['baseline-root'] === undefined) throw new Error('--durability baseline needs --baseline-root')
    return { name: d, poolSize: Number(values.pool), env: {}, root: values['baseline-root'] }
  })
const modes: Array<[string, number]> = modeList.map((m) => [m.name, m.poolSize])
const servers = new Map<string, { server: Server, dispatcher: Agent }>()
const rows: Array<Row & { round: number }> = []
try {
  for (const m of modeList) {
    process.stderr.write(`starting ${m.name} server (pool size ${m.poolSize})...\n`)
    servers.set(m.name, { server: await startServer(m), dispatcher: new Agent({ connections: 64, pipelining: 1 }) })
  }
  for (const [mode] of modes) {
    const { server, dispatcher } = servers.get(mode) as { server: Server, dispatcher: Agent }
    // Warm-up (kWarmup), with its own indicators (not reused later).
    await drive(server, dispatcher, bulkBodies(kWarmup), 2, '/api/v2/ioc/verdict/bulk', kSize, mode, 'warmup')
  }
  for (let round = 1; round <= kRounds; round++) {
    for (const c of kLevels) {
      const order = round % 2 === 1 ? modes : [...modes].reverse()
      for (const [mode] of order) {
        const { server, dispatcher } = servers.get(mode) as { server: Server, dispatcher: Agent }
        const bodies = bulkBodies(kBulks)
        for (const other of servers.values()) await quiet(other.server)
        const row = { round, ...await drive(server, dispatcher, bodies, c, '/api/v2/ioc/verdict/bulk', kSize, mode, 'bulk') }
        row.historyDrainMs = Math.round(await drained(server))
        row.sustainedIndicatorsPerSec = Math.round(row.indicators / (row.indicators / row.indicatorsPerSec + row.historyDrainMs / 1000))
        rows.push(row)
        process.stderr.write(`${JSON.stringify(row)}\n`)
      }
    }
  }
  for (const [mode] of modes) {
    if (kIsolated <= 0) break
    const { server, dispatcher } = servers.get(mode) as { server: Server, dispatcher: Agent }
    const idle = async (): Promise<void> => { for (const other of servers.values()) await quiet(other.server) }
    const row = { round: 1, ...await drive(server, dispatcher, bulkBodies(kIsolated), 1, '/api/v2/ioc/verdict/bulk', kSize, mode, 'isolated', idle) }
    rows.push(row)
    process.stderr.write(`${JSON.stringify(row)}\n`)
  }
  for (const [mode] of modes) {
    const { server, dispatcher } = servers.get(mode) as { server: Server, dispatcher: Agent }
    const bodies = singleBodies(kSingles)
    for (const other of servers.values()) await quiet(other.server)
    const row = { round: 1, ...await drive(server, dispatcher, bodies, 16, '/api/v2/ioc/verdict', 1, mode, 'single') }
    rows.push(row)
    process.stderr.write(`${JSON.stringify(row)}\n`)
  }
} finally {
  for (const { server, dispatcher } of servers.values()) {
    await dispatcher.close()
    await stopServer(server)
  }
}

console.table(rows)
if (kDurability !== undefined) {
  const rounds = Array.from({ length: kRounds }, (_, i) => i + 1)
  const best = (mode: string, round: number, pick: (r: Row) => number): number =>
    Math.max(...rows.filter((r) => r.mode === mode && r.kind === 'bulk' && r.round === round).map(pick))
  const single = (mode: string): Row | undefined => rows.find((r) => r.mode === mode && r.kind === 'single')
  const summary = {
    date: new Date().toISOString(),
    cpus: availableParallelism(),
    bulkSize: kSize,
    rounds: kRounds,
    modes: Object.fromEntries(modeList.map((m) => [m.name, {
      bestBulkIndicatorsPerSec: median(rounds.map((r) => best(m.name, r, (x) => x.indicatorsPerSec))),
      bestSustainedIndicatorsPerSec: median(rounds.map((r) => best(m.name, r, (x) => x.sustainedIndicatorsPerSec ?? NaN))),
      singleP50ms: single(m.name)?.p50 ?? null,
      singleP99ms: single(m.name)?.p99 ?? null,
      singleRequestsPerSec: single(m.name)?.indicatorsPerSec ?? null
    }]))
  }
  console.log(JSON.stringify(summary, null, 2))
  mkdirSync(join(kRoot, 'bench', 'results'), { recursive: true })
  writeFileSync(join(kRoot, 'bench', 'results', 'capacity-durability.json'), JSON.stringify({ summary, rows }, null, 2) + '\n')
  process.exit(0)
}
const bulkRows = (mode: string, round: number): Row[] => rows.filter((r) => r.mode === mode && r.kind === 'bulk' && r.round === round)
const bestOf = (mode: string, round: number): number => Math.max(...bulkRows(mode, round).map((r) => r.indicatorsPerSec))
const rounds = Array.from({ length: kRounds }, (_, i) => i + 1)
const ratios = rounds.map((r) => Math.round(bestOf('pool', r) / bestOf('inline', r) * 100) / 100)
const bestSustained = (mode: string, round: number): number => Math.max(...bulkRows(mode, round).map((r) => r.sustainedIndicatorsPerSec ?? NaN))
const sustainedRatios = rounds.map((r) => Math.round(bestSustained('pool', r) / bestSustained('inline', r) * 100) / 100)
const atC1 = (mode: string, pick: (r: Row) => number | null): number => median(rounds.map((r) => pick(bulkRows(mode, r).find((x) => x.concurrency === kLevels[0]) as Row) ?? NaN))
const p50c1 = (mode: string): number => atC1(mode, (r) => r.p50)
const summary = {
  date: new Date().toISOString(),
  cpus: availableParallelism(),
  bulkSize: kSize,
  rounds: kRounds,
  poolBestIndicatorsPerSec: median(rounds.map((r) => bestOf('pool', r))),
  inlineBestIndicatorsPerSec: median(rounds.map((r) => bestOf('inline', r))),
  poolOverInlinePerRound: ratios,
  poolOverInline: median(ratios),
  poolBestSustainedIndicatorsPerSec: median(rounds.map((r) => bestSustained('pool', r))),
  inlineBestSustainedIndicatorsPerSec: median(rounds.map((r) => bestSustained('inline', r))),
  poolOverInlineSustainedPerRound: sustainedRatios,
  poolBulkP50msAtConcurrency1: p50c1('pool'),
  inlineBulkP50msAtConcurrency1: p50c1('inline'),
  poolBulkTookP50msAtConcurrency1: atC1('pool', (r) => r.tookP50),
  inlineBulkTookP50msAtConcurrency1: atC1('inline', (r) => r.tookP50),
  poolIsolatedBulkP50ms: rows.find((r) => r.mode === 'pool' && r.kind === 'isolated')?.p50 ?? null,
  poolIsolatedBulkTookP50ms: rows.find((r) => r.mode === 'pool' && r.kind === 'isolated')?.tookP50 ?? null,
  inlineIsolatedBulkP50ms: rows.find((r) => r.mode === 'inline' && r.kind === 'isolated')?.p50 ?? null
}
console.log(summary)
mkdirSync(join(kRoot, 'bench', 'results'), { recursive: true })
writeFileSync(join(kRoot, 'bench', 'results', 'capacity.json'), JSON.stringify({ summary, rows }, null, 2) + '\n')
