/**
 * Capacity bench: what one instance of the service sustains, and how many instances a given rate needs.
 *
 *   npm run bench:capacity -- [--url URL [--url URL2 ...] --key KEY] [--bulk 10000] [--mix ip=40,domain=30,ip_block=10,file_hash_sha256=15,asn=5]
 *     [--repeat 0.8] [--signal-details none|top|all] [--format json|msgpack] [--single] [--concurrency 1,2,4,8]
 *     [--duration 5] [--target-rate F] [--out DIR] [--warmup 10] [--knee-gain 0.1] [--knee-p99 3] [--pool N] [--profile DIR]
 *
 * With --url the bench measures a running deployment and starts nothing; with several, it drives every instance at
 * once (each at the level's concurrency) and sizes on their sum, the fleet (history drained on every instance).
 * Without it, it starts the service on
 * 127.0.0.1 (a child process with a temp data dir and the embedded defaults), and in the same run the service in
 * inline mode (IOC_POOL_SIZE=0), a floor server (node:http that parses the same bodies and answers the service's own
 * answer bytes) and Fastify's hello-world, and prints each figure also as a ratio to them.
 *
 * The sweep runs --duration seconds per concurrency level and stops at the knee: the first level whose throughput
 * rises by less than --knee-gain over the best so far, or whose p99 passes --knee-p99 times the first level's. The
 * level before it sizes the fleet. Request bodies are built before each level (the client's CPU share is printed);
 * a level ends early when its bodies run out (fresh indicators are never sent twice), marked in the table.
 * After each bulk level the bench waits for the service's history backlog to drain (health route) and reports the
 * sustained rate (indicators / (seconds + drain)), which counts the history write a short run leaves behind.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { pack, unpack } from 'msgpackr'
import { Agent, request } from 'undici'
import { kMixTypes, weightedCorpus, type CorpusItem, type MixType } from './corpus.ts'
import { esc } from './flame.ts'

const kRoot = join(import.meta.dirname, '..')
const kIntelCache = join(tmpdir(), 'ioc-verdict-bench-intel')
const kBulkPath = '/api/v2/ioc/verdict/bulk'
const kSinglePath = '/api/v2/ioc/verdict'

class UsageError extends Error {}
/** A run that cannot go on for a reason the operator can fix (exit status 1, `error: ...`, no stack trace). */
class BenchError extends Error {}
/** Error codes of a server that cannot be reached (Node's sockets and DNS, undici) or not verified (TLS). */
const kUnreachable = /^(ECONNREFUSED|ECONNRESET|ENOTFOUND|EHOSTUNREACH|ENETUNREACH|ETIMEDOUT|EAI_AGAIN|UND_ERR_|ERR_TLS_|ERR_SSL_)|CERT/
/** TLS verification failures: the deployment's certificate is not trusted by this process. */
const kCertificate = /CERT/

/** An answer's status with the error code of its body, if any: `401 INVALID_API_KEY`. */
function statusText (status: number, bodyHead: string): string {
  return `${status} ${/"code":"([A-Z_]+)"/.exec(bodyHead)?.[1] ?? ''}`.trim()
}

/** What to tell of answers refused for the key (401, 403 in `statuses`). */
function keyHint (statuses: string): string {
  return /\b(401|403)\b/.test(statuses) ? ' (check --key: it needs the verdict and verdict_bulk permissions)' : ''
}

interface Options {
  /** Instances to measure (none: the bench starts its own). */
  urls: string[]
  key: string | null
  bulk: number
  mix: Partial<Record<MixType, number>>
  repeat: number
  signalDetails: 'none' | 'top' | 'all'
  format: 'json' | 'msgpack'
  single: boolean
  concurrency: number[]
  duration: number
  targetRate: number | null
  out: string
  warmup: number
  kneeGain: number
  kneeP99: number
  pool: number | null
  /** Directory for `node --cpu-prof` profiles of the service this bench starts (every thread), or null. */
  profile: string | null
}

function num (name: string, raw: string, min: number, max: number, integer = false): number {
  const n = Number(raw)
  if (raw.trim() === '' || !Number.isFinite(n) || n < min || n > max || (integer && !Number.isInteger(n))) {
    throw new UsageError(`--${name} must be ${integer ? 'an integer' : 'a number'} in [${min}, ${max}], got "${raw}"`)
  }
  return n
}

function parseOptions (argv: string[]): Options {
  let parsed
  try {
    parsed = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        url: { type: 'string', multiple: true },
        key: { type: 'string' },
        bulk: { type: 'string', default: '10000' },
        mix: { type: 'string', default: 'ip=45,domain=30,ip_block=8,file_hash_sha256=12,asn=5' },
        repeat: { type: 'string', default: '0.8' },
        'signal-details': { type: 'string', default: 'none' },
        format: { type: 'string', default: 'json' },
        single: { type: 'boolean', default: false },
        concurrency: { type: 'string', default: '1,2,4,8' },
        duration: { type: 'string', default: '5' },
        'target-rate': { type: 'string' },
        out: { type: 'string', default: join(kRoot, 'bench', 'results') },
        warmup: { type: 'string', default: '10' },
        'knee-gain': { type: 'string', default: '0.1' },
        'knee-p99': { type: 'string', default: '3' },
        pool: { type: 'string' },
        profile: { type: 'string' },
        help: { type: 'boolean', default: false }
      }
    })
  } catch (err) {
    throw new UsageError((err as Error).message)
  }
  const v = parsed.values
  if (v.help === true) throw new UsageError('help')
  const urls = v.url ?? []
  if (urls.length > 0) {
    for (const url of urls) {
      let u: URL
      try { u = new URL(url) } catch { throw new UsageError(`--url is not a URL: "${url}"`) }
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new UsageError('--url must be http:// or https://')
    }
    if (new Set(urls.map((u) => u.replace(/\/+$/, ''))).size !== urls.length) throw new UsageError('--url names the same instance twice')
    if (v.key === undefined || v.key === '') throw new UsageError('--url needs --key (an API key with verdict and verdict_bulk)')
  } else if (v.key !== undefined) {
    throw new UsageError('--key is only used with --url')
  }
  const mix: Partial<Record<MixType, number>> = {}
  for (const part of v.mix.split(',')) {
    const [type, weight, extra] = part.split('=')
    if (extra !== undefined || weight === undefined || !(kMixTypes as readonly string[]).includes(type ?? '')) {
      throw new UsageError(`--mix takes type=weight pairs with types ${kMixTypes.join(', ')}; got "${part}"`)
    }
    if (Object.hasOwn(mix, type as string)) throw new UsageError(`--mix names ${type as string} twice`)
    mix[type as MixType] = num('mix', weight, 0, 1e6)
  }
  if (Object.values(mix).every((w) => w === 0)) throw new UsageError('--mix needs a positive weight')
  const sd = v['signal-details']
  if (sd !== 'none' && sd !== 'top' && sd !== 'all') throw new UsageError(`--signal-details must be none, top or all, got "${sd}"`)
  if (v.profile !== undefined && urls.length > 0) throw new UsageError('--profile profiles a service the bench starts; it cannot be used with --url')
  if (v.format !== 'json' && v.format !== 'msgpack') throw new UsageError(`--format must be json or msgpack, got "${v.format}"`)
  const levels = v.concurrency.split(',').map((c) => num('concurrency', c, 1, 4096, true))
  for (let i = 1; i < levels.length; i++) {
    if ((levels[i] as number) <= (levels[i - 1] as number)) throw new UsageError('--concurrency levels must rise, e.g. 1,2,4,8')
  }
  return {
    urls: urls.map((u) => u.replace(/\/+$/, '')),
    key: v.key ?? null,
    bulk: num('bulk', v.bulk, 1, 1_000_000, true),
    mix,
    repeat: num('repeat', v.repeat, 0, 1),
    signalDetails: sd,
    format: v.format,
    single: v.single === true,
    concurrency: levels,
    duration: num('duration', v.duration, 0.1, 3600),
    targetRate: v['target-rate'] === undefined ? null : num('target-rate', v['target-rate'], 1, 1e12),
    out: resolve(v.out),
    warmup: num('warmup', v.warmup, 0, 100_000, true),
    kneeGain: num('knee-gain', v['knee-gain'], 0, 10),
    kneeP99: num('knee-p99', v['knee-p99'], 1, 1000),
    pool: v.pool === undefined ? null : num('pool', v.pool, 0, 256, true),
    profile: v.profile === undefined ? null : resolve(v.profile)
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Targets: the deployment under test, or servers this bench starts.

interface Target { name: string, base: string, key: string, proc: ChildProcess | null, dir: string | null }

/** Node options that run a TypeScript script. */
const kTsx = ['--import', 'tsx']

/** Starts `node [nodeArgs] args...` (`nodeArgs` holds `--import tsx` for a TypeScript script). */
async function startProcess (name: string, args: string[], env: Record<string, string>, dir: string | null, nodeArgs: string[] = kTsx): Promise<Target> {
  const proc = spawn(process.execPath, [...nodeArgs, ...args], { env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'ignore', 'pipe'] })
  let err = ''
  return await new Promise((resolve, reject) => {
    const timer = setTimeout(() => { proc.kill('SIGKILL'); reject(new Error(`${name} did not start:\n${err}`)) }, 180_000)
    proc.stderr?.on('data', (d: Buffer) => {
      err += d.toString()
      const url = /listening on (http:\/\/\S+)/.exec(err)?.[1]
      const key = /^\s+(iocv_\S+)$/m.exec(err)?.[1]
      if (url !== undefined && (key !== undefined || dir === null)) {
        clearTimeout(timer)
        resolve({ name, base: url, key: key ?? '', proc, dir })
      }
    })
    proc.once('exit', (code) => { clearTimeout(timer); reject(new Error(`${name} exited with ${code}:\n${err}`)) })
  })
}

/**
 * Starts the service as `npm start` runs it: bin/ioc-verdict.js, which loads the bundled JavaScript of src/main.ts
 * (no TypeScript loader in the process), so the bench measures what a deployment runs.
 */
async function startService (name: string, poolSize: number | null, profileDir: string | null = null): Promise<Target> {
  const dir = mkdtempSync(join(tmpdir(), 'ioc-verdict-bench-'))
  return await startProcess(name, [join(kRoot, 'bin', 'ioc-verdict.js'), 'serve'], {
    IOC_DATA_DIR: dir,
    IOC_PORT: '0',
    IOC_HOST: '127.0.0.1',
    IOC_LOG_LEVEL: 'warn',
    IOC_INTEL_CACHE_DIR: kIntelCache,
    IOC_MAX_INFLIGHT: '1000000',
    ...(poolSize === null ? {} : { IOC_POOL_SIZE: String(poolSize) })
  }, dir, profileDir === null ? [] : ['--cpu-prof', '--cpu-prof-dir', profileDir])
}

async function stopTarget (t: Target): Promise<void> {
  if (t.proc === null || t.proc.exitCode !== null) return
  const exited = new Promise((resolve) => t.proc?.once('exit', resolve))
  t.proc.kill('SIGTERM')
  const timer = setTimeout(() => t.proc?.kill('SIGKILL'), 15_000)
  await exited
  clearTimeout(timer)
  if (t.dir !== null) rmSync(t.dir, { recursive: true, force: true })
}

/** User + system CPU ms of a process, all threads (Linux /proc; null elsewhere or for a deployment not started here). */
function processCpuMs (t: Target): number | null {
  if (t.proc?.pid === undefined) return null
  try {
    const stat = readFileSync(`/proc/${t.proc.pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[11]) + Number(fields[12])) * 10 // USER_HZ is 100 on Linux
  } catch {
    return null
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Request bodies, built before each level.

interface Spec {
  label: string
  target: Target
  kind: 'bulk' | 'single' | 'hello'
  format: 'json' | 'msgpack'
  repeat: number
  signalDetails: 'none' | 'top' | 'all'
  /** Fresh indicators may be reused (the floor has no cache). */
  cycle: boolean
}

let seed = 1
const contentType = (f: 'json' | 'msgpack'): string => f === 'json' ? 'application/json' : 'application/msgpack'
const encode = (f: 'json' | 'msgpack', body: unknown): Buffer => f === 'json' ? Buffer.from(JSON.stringify(body)) : pack(body)

class Bodies {
  /** Indicators the cache has seen (sent during warm-up); the --repeat share of each request comes from them. */
  seen: CorpusItem[] = []
  private cursor = 0
  constructor (readonly opts: Options) {}

  initSeen (n: number): void { this.seen = weightedCorpus(n, 1_000_003, this.opts.mix) }

  private items (n: number, repeat: number): CorpusItem[] {
    const k = Math.round(n * repeat)
    const out: CorpusItem[] = []
    for (let i = 0; i < k && this.seen.length > 0; i++) out.push(this.seen[this.cursor++ % this.seen.length] as CorpusItem)
    return out.concat(weightedCorpus(n - out.length, seed++, this.opts.mix))
  }

  build (spec: Spec, count: number): Buffer[] {
    if (spec.kind === 'hello') return [Buffer.alloc(0)]
    if (spec.kind === 'single') {
      return this.items(count, spec.repeat).map((indicator) => encode(spec.format, { indicator, signal_details: spec.signalDetails }))
    }
    return Array.from({ length: count }, () => encode(spec.format, { indicators: this.items(this.opts.bulk, spec.repeat), signal_details: spec.signalDetails }))
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Driving one level.

interface Row {
  label: string
  target: string
  kind: string
  format: string
  repeat: number
  signalDetails: string
  concurrency: number
  /** Requests answered (200, whole body); refused or failed ones are in `errors` and count toward no rate. */
  requests: number
  indicators: number
  seconds: number
  requestsPerSec: number
  indicatorsPerSec: number
  p50: number
  p95: number
  p99: number
  /** CPU the server process (all threads) spent per indicator, µs; null for a deployment this bench did not start. */
  serverCpuUsPerIndicator: number | null
  /**
   * Garbage collection time of the service's main thread per indicator, µs (its /metrics, iocv_nodejs_gc_duration_seconds);
   * null for a target without them (floor, hello-world).
   */
  mainGcUsPerIndicator: number | null
  /** The bench client's own CPU while the level ran, % of one core. */
  clientCpuPercent: number
  errors: number
  errorStatuses: string
  /** The level ran out of pre-built bodies before --duration (fresh indicators are never sent twice). */
  shortened: boolean
  historyDrainMs: number | null
  sustainedIndicatorsPerSec: number | null
}

const round1 = (x: number): number => Math.round(x * 10) / 10
const pct = (sorted: number[], p: number): number => sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] as number

const progress = {
  tty: process.stderr.isTTY === true,
  text: '',
  show (s: string): void {
    this.text = s
    if (this.tty) process.stderr.write(`\r\x1b[K${s}`)
  },
  clear (): void { if (this.tty && this.text !== '') process.stderr.write('\r\x1b[K'); this.text = '' }
}

/** Drives one target at one level; `latencies`, when given, receives every answered request's latency (ms). */
async function drive (spec: Spec, bodies: Buffer[], concurrency: number, durationS: number, perRequest: number, dispatcher: Agent, latencies?: number[]): Promise<Row> {
  const { target } = spec
  const path = spec.kind === 'bulk' ? kBulkPath : spec.kind === 'single' ? kSinglePath : '/'
  const headers: Record<string, string> = spec.kind === 'hello'
    ? {}
    : { 'content-type': contentType(spec.format), accept: contentType(spec.format), 'x-api-key': target.key }
  const lat: number[] = []
  let next = 0
  let errors = 0
  let shortened = false
  const statuses = new Map<string, number>()
  const gc0 = await mainGcSeconds(target, dispatcher)
  const server0 = processCpuMs(target)
  const client0 = process.cpuUsage()
  const t0 = performance.now()
  const until = t0 + durationS * 1000
  const timer = setInterval(() => {
    const s = (performance.now() - t0) / 1000
    progress.show(`${spec.label} c=${concurrency}: ${s.toFixed(1)}/${durationS}s, ${lat.length} answered, ${Math.round(lat.length * perRequest / s)} indicators/s${errors > 0 ? `, ${errors} errors` : ''}`)
  }, 250)
  try {
    await Promise.all(Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        let i = next++
        if (i >= bodies.length) {
          if (!spec.cycle) { shortened = true; return }
          i %= bodies.length
        }
        const start = performance.now()
        const res = await request(`${target.base}${path}`, {
          method: spec.kind === 'hello' ? 'GET' : 'POST',
          dispatcher,
          headers,
          body: spec.kind === 'hello' ? null : bodies[i] as Buffer
        })
        let bytes = 0
        let head = ''
        for await (const chunk of res.body) {
          if (res.statusCode !== 200 && head.length < 2048) head += (chunk as Buffer).toString()
          bytes += (chunk as Buffer).length
        }
        const length = Number(res.headers['content-length'] ?? NaN)
        // Only answers count toward the rates and latencies: a quick refusal (503 OVERLOADED) is not throughput.
        if (res.statusCode === 200 && (Number.isNaN(length) || bytes === length)) {
          lat.push(performance.now() - start)
        } else {
          errors++
          const code = statusText(res.statusCode, head)
          statuses.set(code, (statuses.get(code) ?? 0) + 1)
        }
      }
    }))
  } finally {
    clearInterval(timer)
  }
  const seconds = (performance.now() - t0) / 1000
  const server1 = processCpuMs(target)
  const client = process.cpuUsage(client0)
  const gc1 = gc0 === null ? null : await mainGcSeconds(target, dispatcher)
  lat.sort((a, b) => a - b)
  latencies?.push(...lat)
  const done = lat.length
  return {
    label: spec.label,
    target: target.name,
    kind: spec.kind,
    format: spec.kind === 'hello' ? 'json' : spec.format,
    repeat: spec.repeat,
    signalDetails: spec.kind === 'hello' ? '' : spec.signalDetails,
    concurrency,
    requests: done,
    indicators: done * perRequest,
    seconds: Math.round(seconds * 100) / 100,
    requestsPerSec: round1(done / seconds),
    indicatorsPerSec: Math.round(done * perRequest / seconds),
    p50: round1(pct(lat, 0.5)),
    p95: round1(pct(lat, 0.95)),
    p99: round1(pct(lat, 0.99)),
    serverCpuUsPerIndicator: server0 === null || server1 === null || done === 0 ? null : round1((server1 - server0) * 1000 / (done * perRequest)),
    mainGcUsPerIndicator: gc0 === null || gc1 === null || done === 0 ? null : round1((gc1 - gc0) * 1e6 / (done * perRequest)),
    clientCpuPercent: round1((client.user + client.system) / 10 / (seconds * 1000)),
    errors,
    errorStatuses: [...statuses].map(([k, n]) => `${k} x${n}`).join(', '),
    shortened,
    historyDrainMs: null,
    sustainedIndicatorsPerSec: null
  }
}

/**
 * Seconds the service's main thread has spent collecting garbage (every kind), from its /metrics; null when the target
 * has none (floor, hello-world) or they cannot be read. A young generation that promotes what should die young shows
 * here first: each promoted byte is copied and later marked.
 */
async function mainGcSeconds (t: Target, dispatcher: Agent): Promise<number | null> {
  try {
    const res = await request(`${t.base}/metrics`, { dispatcher })
    const text = await res.body.text()
    if (res.statusCode !== 200) return null
    let sum = 0
    let seen = false
    for (const m of text.matchAll(/^iocv_nodejs_gc_duration_seconds_sum\{[^}]*\} ([0-9.eE+-]+)$/gm)) {
      sum += Number(m[1])
      seen = true
    }
    return seen ? sum : null
  } catch {
    return null
  }
}

/** Ms until the service's history backlog is empty (health `checks.history.pending`), at most 120 s; null without one. */
async function drained (t: Target, dispatcher: Agent): Promise<number | null> {
  const t0 = performance.now()
  while (performance.now() - t0 < 120_000) {
    const res = await request(`${t.base}/api/v2/ioc/health`, { dispatcher })
    const health = await res.body.json().catch(() => null) as { checks?: { history?: { pending?: number } } } | null
    const pending = health?.checks?.history?.pending
    if (pending === undefined) return null
    if (pending === 0) break
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  return Math.round(performance.now() - t0)
}

// ---------------------------------------------------------------------------------------------------------------
// The table.

/** A latency, or '-' for a level that answered nothing (no latency to tell). */
const ms = (x: number): string => Number.isFinite(x) ? String(x) : '-'

const kColumns: Array<[string, (r: Row) => string, number]> = [
  ['run', (r) => r.label, 22],
  ['target', (r) => r.target, 8],
  ['c', (r) => String(r.concurrency), 4],
  ['req', (r) => String(r.requests), 7],
  ['ind/s', (r) => String(r.indicatorsPerSec), 9],
  ['req/s', (r) => String(r.requestsPerSec), 9],
  ['p50 ms', (r) => ms(r.p50), 8],
  ['p99 ms', (r) => ms(r.p99), 8],
  ['srv µs/ind', (r) => r.serverCpuUsPerIndicator === null ? '-' : String(r.serverCpuUsPerIndicator), 10],
  ['gc µs/ind', (r) => r.mainGcUsPerIndicator === null ? '-' : String(r.mainGcUsPerIndicator), 9],
  ['client cpu', (r) => `${r.clientCpuPercent}%`, 10],
  ['drain ms', (r) => r.historyDrainMs === null ? '-' : String(r.historyDrainMs), 8],
  ['sustained', (r) => r.sustainedIndicatorsPerSec === null ? '-' : String(r.sustainedIndicatorsPerSec), 9],
  ['err', (r) => r.errors === 0 ? (r.shortened ? 'short' : '0') : `${r.errors} ${r.errorStatuses}`, 5]
]
const tableHeader = (): string => kColumns.map(([h, , w]) => h.padStart(w)).join(' ')
const tableLine = (r: Row): string => kColumns.map(([, f, w], i) => i === 0 ? f(r).padEnd(w) : f(r).padStart(w)).join(' ')

// ---------------------------------------------------------------------------------------------------------------
// Knee, sizing, ratios.

function knee (sweep: Row[], gain: number, p99Factor: number): Row | null {
  const usable = sweep.filter((r) => r.requests > 0 && r.errors === 0)
  let chosen = usable[0] ?? null
  if (chosen === null) return null
  const p99Limit = chosen.p99 * p99Factor
  for (const r of usable.slice(1)) {
    if (r.indicatorsPerSec < chosen.indicatorsPerSec * (1 + gain) || r.p99 > p99Limit) break
    chosen = r
  }
  return chosen
}

/** Why the sweep gave no sizing, and what to do about it. */
function noSizing (sweep: Row[]): string {
  const failed = sweep.filter((r) => r.errors > 0).map((r) => `c=${r.concurrency}: ${r.errorStatuses}`)
  let s = `no sizing: no level of the sweep completed without errors${failed.length > 0 ? ` (${failed.join('; ')})` : ''}`
  if (failed.some((f) => f.includes('503 OVERLOADED'))) {
    const first = sweep[0]
    const recorded = first?.sustainedIndicatorsPerSec ?? 0
    s += '; 503 OVERLOADED is the deployment refusing load it cannot take (its history writer behind, or its in-flight bound)'
    if (first !== undefined && recorded > 0) s += `: at c=${first.concurrency} it answered and recorded ${recorded} indicators/s (history drained)`
    s += '; see docs/OPERATIONS.md, "Capacity tuning"'
  }
  return s
}

interface Ratio { name: string, value: number | null, target: string, met: boolean | null, detail: string }

/** A client at this share of one core or more may itself be what limits a level's rate. */
const kClientBoundPercent = 90

function clientBoundNote (levels: string[]): string {
  return `client-bound (the bench's own client at >= ${kClientBoundPercent}% of a core; the rate may be the client's limit, ` +
    `and a ratio against such a level is an upper bound; run more clients or clients on other hosts): ${levels.join(', ')}`
}

function ratio (name: string, a: number | undefined, b: number | undefined, target: string, met: (x: number) => boolean | null, detail: string): Ratio {
  const value = a === undefined || b === undefined || b === 0 || !Number.isFinite(a) || !Number.isFinite(b) ? null : Math.round(a / b * 100) / 100
  return { name, value, target, met: value === null ? null : met(value), detail }
}

// ---------------------------------------------------------------------------------------------------------------
// The HTML report.

const kColors = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b', '#17becf', '#7f7f7f']

function chart (title: string, yLabel: string, all: Array<{ name: string, points: Array<[number, number]> }>): string {
  // A level that answered nothing has no latency: it is left out of the lines (the table says why).
  const series = all.map((s) => ({ name: s.name, points: s.points.filter(([, y]) => Number.isFinite(y)) })).filter((s) => s.points.length > 0)
  const W = 640
  const H = 300
  const L = 70
  const R = 170
  const T = 30
  const B = 45
  const xs = [...new Set(series.flatMap((s) => s.points.map(([x]) => x)))].sort((a, b) => a - b)
  const yMax = Math.max(1, ...series.flatMap((s) => s.points.map(([, y]) => y))) * 1.1
  const px = (x: number): number => xs.length <= 1 ? L + (W - L - R) / 2 : L + xs.indexOf(x) * (W - L - R) / (xs.length - 1)
  const py = (y: number): number => T + (H - T - B) * (1 - y / yMax)
  const parts = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(title)}">`,
    `<text x="${W / 2}" y="18" text-anchor="middle" font-size="14" font-weight="bold">${esc(title)}</text>`,
    `<line x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}" stroke="#333"/><line x1="${L}" y1="${T}" x2="${L}" y2="${H - B}" stroke="#333"/>`]
  for (let i = 0; i <= 4; i++) {
    const y = yMax * i / 4
    parts.push(`<line x1="${L}" y1="${py(y)}" x2="${W - R}" y2="${py(y)}" stroke="#ddd"/><text x="${L - 6}" y="${py(y) + 4}" text-anchor="end" font-size="11">${Math.round(y)}</text>`)
  }
  for (const x of xs) parts.push(`<text x="${px(x)}" y="${H - B + 16}" text-anchor="middle" font-size="11">${x}</text>`)
  parts.push(`<text x="${(L + W - R) / 2}" y="${H - 8}" text-anchor="middle" font-size="12">concurrency (requests in flight)</text>`,
    `<text x="14" y="${(T + H - B) / 2}" text-anchor="middle" font-size="12" transform="rotate(-90 14 ${(T + H - B) / 2})">${esc(yLabel)}</text>`)
  series.forEach((s, i) => {
    const color = kColors[i % kColors.length] as string
    const pts = s.points.map(([x, y]) => `${px(x)},${py(y)}`).join(' ')
    parts.push(`<polyline fill="none" stroke="${color}" stroke-width="2" points="${pts}"/>`)
    for (const [x, y] of s.points) parts.push(`<circle cx="${px(x)}" cy="${py(y)}" r="3" fill="${color}"><title>${esc(`${s.name}, c=${x}: ${y}`)}</title></circle>`)
    parts.push(`<rect x="${W - R + 10}" y="${T + i * 18}" width="12" height="3" fill="${color}"/><text x="${W - R + 27}" y="${T + i * 18 + 5}" font-size="11">${esc(s.name)}</text>`)
  })
  parts.push('</svg>')
  return parts.join('\n')
}

function html (report: Report): string {
  const groups = new Map<string, Row[]>()
  for (const r of report.rows) groups.set(r.label, [...(groups.get(r.label) ?? []), r])
  const multi = [...groups].filter(([, rows]) => rows.length > 0)
  const series = (pick: (r: Row) => number, kinds: string[]): Array<{ name: string, points: Array<[number, number]> }> =>
    multi.filter(([, rows]) => kinds.includes(rows[0]?.kind ?? '')).map(([name, rows]) => ({ name, points: rows.map((r) => [r.concurrency, pick(r)] as [number, number]) }))
  const cols = kColumns.map(([h]) => `<th>${esc(h)}</th>`).join('')
  const body = report.rows.map((r) => `<tr>${kColumns.map(([, f]) => `<td>${esc(f(r))}</td>`).join('')}</tr>`).join('\n')
  const ratios = report.ratios.map((x) => `<tr><td>${esc(x.name)}</td><td>${x.value ?? '-'}</td><td>${esc(x.target)}</td><td>${x.met === null ? '-' : x.met ? 'met' : 'missed'}</td><td>${esc(x.detail)}</td></tr>`).join('\n')
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>ioc-verdict capacity</title>
<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}td:first-child{text-align:left}.sizing{font-size:18px;padding:1em;background:#eef5ff;border-left:4px solid #1f77b4}</style>
</head><body>
<h1>ioc-verdict capacity</h1>
<p>${esc(report.date)} · ${report.cpus} CPUs · target ${esc(report.deployment)} · command <code>${esc(report.command)}</code></p>
<p class="sizing">${esc(report.sentence)}</p>
${report.client_bound.length > 0 ? `<p>${esc(clientBoundNote(report.client_bound))}</p>` : ''}
${chart('Throughput', report.options.single ? 'indicators/s (= requests/s)' : 'indicators/s', series((r) => r.indicatorsPerSec, ['bulk', 'single']))}
${chart('Bulk latency p99', 'p99 ms', series((r) => r.p99, ['bulk']))}
${series((r) => r.p99, ['single', 'hello']).length > 0 ? chart('Single-call latency p99', 'p99 ms', series((r) => r.p99, ['single', 'hello'])) : ''}
${report.ratios.length > 0 ? `<h2>Ratios (same run)</h2><table><tr><th>figure</th><th>ratio</th><th>target</th><th></th><th>from</th></tr>\n${ratios}</table>` : ''}
<h2>Every row</h2>
<table><tr>${cols}</tr>
${body}</table>
<p>Sizing: the sweep's knee, the last level before throughput rose by less than ${report.options.kneeGain * 100}% or p99 passed ${report.options.kneeP99}x the first level's.
srv µs/ind: CPU of the server process, all threads, per indicator. gc µs/ind: garbage collection time of the service's main thread per indicator (its /metrics). sustained: indicators / (seconds + history drain).</p>
</body></html>
`
}

// ---------------------------------------------------------------------------------------------------------------
// The run.

interface Report {
  date: string
  cpus: number
  command: string
  deployment: string
  /** Instances measured together: the sizing is their sum. */
  instances: number
  options: Options
  rows: Row[]
  ratios: Ratio[]
  sizing: { indicators_per_sec: number, p99_ms: number, concurrency: number } | null
  sentence: string
  /** Levels at which the client used kClientBoundPercent or more of a core: their rate may be the client's limit. */
  client_bound: string[]
}

async function main (opts: Options): Promise<void> {
  const targets: Target[] = []
  const rows: Row[] = []
  const bodies = new Bodies(opts)
  const maxC = Math.max(32, ...opts.concurrency)
  const dispatcher = new Agent({ connections: maxC, pipelining: 1, keepAliveTimeout: 60_000 })
  /** Requests/s seen last per label, to size the next level's bodies. */
  const rate = new Map<string, number>()
  const perRequest = (s: Spec): number => s.kind === 'bulk' ? opts.bulk : 1

  const level = async (spec: Spec, c: number): Promise<Row> => {
    const hint = rate.get(`${spec.target.name} ${spec.kind}`) ?? (spec.kind === 'bulk' ? 200_000 / opts.bulk : 5000)
    const count = spec.cycle ? Math.max(8, c * 2) : Math.ceil(hint * 1.6 * Math.max(1, c / 2) * opts.duration) + c * 2
    if (!progress.tty) process.stderr.write(`running ${spec.label} c=${c} (${opts.duration}s)\n`)
    progress.show(`${spec.label} c=${c}: building ${count} request bodies...`)
    const built = bodies.build(spec, Math.min(count, spec.kind === 'bulk' ? Math.ceil(3_000_000 / opts.bulk) + c * 2 : 1_000_000))
    const row = await drive(spec, built, c, opts.duration, perRequest(spec), dispatcher)
    if (spec.kind === 'bulk' && spec.target.name !== 'floor') {
      progress.show(`${spec.label} c=${c}: waiting for the history backlog to drain...`)
      row.historyDrainMs = await drained(spec.target, dispatcher)
      if (row.historyDrainMs !== null && row.indicatorsPerSec > 0) {
        row.sustainedIndicatorsPerSec = Math.round(row.indicators / (row.seconds + row.historyDrainMs / 1000))
      }
    }
    rate.set(`${spec.target.name} ${spec.kind}`, Math.max(row.requestsPerSec, 1))
    progress.clear()
    console.log(tableLine(row))
    rows.push(row)
    return row
  }
  const sweep = async (spec: Spec, levels: number[], stopAtKnee: boolean): Promise<Row[]> => {
    const out: Row[] = []
    for (const c of levels) {
      out.push(await level(spec, c))
      if (stopAtKnee && out.length >= 2 && knee(out, opts.kneeGain, opts.kneeP99) !== out[out.length - 1]) break
    }
    return out
  }
  /**
   * One level on every instance at once, each at concurrency c: a row per instance, then the fleet's row (rates
   * added, latencies of all answers, the history drained on every instance; sustained = indicators / (seconds + the
   * longest drain)), which is returned.
   */
  const fleetLevel = async (specs: Spec[], c: number): Promise<Row> => {
    const built = specs.map((spec) => {
      const hint = rate.get(`${spec.target.name} ${spec.kind}`) ?? (spec.kind === 'bulk' ? 200_000 / opts.bulk : 5000)
      const count = Math.ceil(hint * 1.6 * Math.max(1, c / 2) * opts.duration) + c * 2
      return bodies.build(spec, Math.min(count, spec.kind === 'bulk' ? Math.ceil(3_000_000 / opts.bulk) + c * 2 : 1_000_000))
    })
    if (!progress.tty) process.stderr.write(`running ${specs.length} instances c=${c} each (${opts.duration}s)\n`)
    const latencies: number[] = []
    const client0 = process.cpuUsage()
    const instances = await Promise.all(specs.map(async (spec, i) => await drive(spec, built[i] as Buffer[], c, opts.duration, perRequest(spec), dispatcher, latencies)))
    const client = process.cpuUsage(client0)
    progress.show(`${specs.length} instances c=${c}: waiting for every history backlog to drain...`)
    const drains = await Promise.all(specs.map(async (spec) => spec.kind === 'bulk' ? await drained(spec.target, dispatcher) : null))
    instances.forEach((row, i) => {
      row.historyDrainMs = drains[i] ?? null
      if (row.historyDrainMs !== null && row.indicatorsPerSec > 0) row.sustainedIndicatorsPerSec = Math.round(row.indicators / (row.seconds + row.historyDrainMs / 1000))
      rate.set(`${row.target} ${row.kind}`, Math.max(row.requestsPerSec, 1))
    })
    latencies.sort((a, b) => a - b)
    const seconds = Math.max(...instances.map((r) => r.seconds))
    const sum = (pick: (r: Row) => number): number => instances.reduce((a, r) => a + pick(r), 0)
    const drain = drains.some((d) => d === null) ? null : Math.max(...drains.map((d) => d ?? 0))
    const indicators = sum((r) => r.indicators)
    const first = specs[0] as Spec
    const fleet: Row = {
      ...(instances[0] as Row),
      label: `fleet of ${specs.length} ${first.kind} ${first.format}`,
      target: 'fleet',
      requests: sum((r) => r.requests),
      indicators,
      seconds,
      requestsPerSec: round1(sum((r) => r.requests) / seconds),
      indicatorsPerSec: Math.round(indicators / seconds),
      p50: round1(pct(latencies, 0.5)),
      p95: round1(pct(latencies, 0.95)),
      p99: round1(pct(latencies, 0.99)),
      serverCpuUsPerIndicator: null,
      mainGcUsPerIndicator: null,
      clientCpuPercent: round1((client.user + client.system) / 10 / (seconds * 1000)),
      errors: sum((r) => r.errors),
      errorStatuses: instances.filter((r) => r.errors > 0).map((r) => `${r.target}: ${r.errorStatuses}`).join('; '),
      shortened: instances.some((r) => r.shortened),
      historyDrainMs: drain,
      sustainedIndicatorsPerSec: drain === null || indicators === 0 ? null : Math.round(indicators / (seconds + drain / 1000))
    }
    progress.clear()
    for (const row of [...instances, fleet]) {
      console.log(tableLine(row))
      rows.push(row)
    }
    return fleet
  }
  /**
   * Checks that the target answers like ioc-verdict before anything is measured: a bulk of a few indicators in the
   * run's format must come back with one result per indicator, each a verdict or an item error, and a single call with
   * a risk score. A proxy's error page or another service answering 200 would otherwise be sized as a fast deployment.
   */
  const checkAnswers = async (t: Target): Promise<void> => {
    const f = opts.format
    const indicators = bodies.seen.slice(0, 3)
    const call = async (path: string, body: unknown): Promise<unknown> => {
      const res = await request(`${t.base}${path}`, { method: 'POST', dispatcher, headers: { 'content-type': contentType(f), accept: contentType(f), 'x-api-key': t.key }, body: encode(f, body) })
      const bytes = Buffer.from(await res.body.arrayBuffer())
      if (res.statusCode !== 200) {
        const status = statusText(res.statusCode, bytes.subarray(0, 2048).toString())
        throw new BenchError(`${t.name} answered ${path} with ${status}${keyHint(status)}`)
      }
      const type = String(res.headers['content-type'] ?? '')
      if (!type.startsWith(contentType(f))) throw new BenchError(`${t.name} answered ${path} with content-type "${type}", not ${contentType(f)}: is it ioc-verdict?`)
      try {
        return f === 'json' ? JSON.parse(bytes.toString()) : unpack(bytes)
      } catch {
        throw new BenchError(`${t.name} answered ${path} with a body that is not ${f}: is it ioc-verdict?`)
      }
    }
    const bulk = await call(kBulkPath, { indicators, signal_details: 'none' }) as { results?: Array<{ risk?: { score?: unknown }, errors?: unknown }> }
    const results = bulk?.results
    if (!Array.isArray(results) || results.length !== indicators.length || !results.every((r) => typeof r?.risk?.score === 'number' || Array.isArray(r?.errors))) {
      throw new BenchError(`${t.name} answered a bulk of ${indicators.length} indicators without ${indicators.length} results: is it ioc-verdict?`)
    }
    const single = await call(kSinglePath, { indicator: { value: '198.51.100.23' } }) as { risk?: { score?: unknown } }
    if (typeof single?.risk?.score !== 'number') throw new BenchError(`${t.name} answered a single verdict without a risk score: is it ioc-verdict?`)
  }
  const warm = async (t: Target): Promise<void> => {
    await checkAnswers(t)
    if (opts.warmup === 0) return
    progress.show(`${t.name}: warm-up (${opts.warmup} bulks and the indicators the cache has seen)...`)
    if (!progress.tty) process.stderr.write(`warm-up ${t.name}\n`)
    const seenBodies: Buffer[] = []
    for (let i = 0; i < bodies.seen.length; i += opts.bulk) {
      seenBodies.push(encode('json', { indicators: bodies.seen.slice(i, i + opts.bulk), signal_details: 'none' }))
    }
    const spec: Spec = { label: 'warm-up', target: t, kind: 'bulk', format: 'json', repeat: 0, signalDetails: 'none', cycle: false }
    const warmBodies = [...seenBodies, ...bodies.build(spec, opts.warmup)]
    const r = await drive(spec, warmBodies, 2, 3600, opts.bulk, dispatcher)
    if (r.errors > 0) throw new BenchError(`${t.name} answered warm-up bulks with errors: ${r.errorStatuses}${keyHint(r.errorStatuses)}`)
    rate.set(`${t.name} bulk`, Math.max(r.requestsPerSec, 1))
    await drained(t, dispatcher)
    // Every seen indicator once as a single call as well: single calls are answered from the main thread's own cache,
    // which bulks scored on a pool's threads do not fill, so a single level would otherwise time first assessments.
    const singles = bodies.build({ ...spec, kind: 'single', repeat: 1 }, Math.max(2000, bodies.seen.length))
    const s = await drive({ ...spec, kind: 'single' }, singles, 8, 3600, 1, dispatcher)
    rate.set(`${t.name} single`, Math.max(s.requestsPerSec, 1))
    progress.clear()
  }
  /** Sends one cold JSON bulk to the service and stores its answer bytes in the floor server. */
  const teachFloor = async (service: Target, floor: Target): Promise<void> => {
    const spec: Spec = { label: 'floor', target: service, kind: 'bulk', format: 'json', repeat: 0, signalDetails: 'none', cycle: false }
    const res = await request(`${service.base}${kBulkPath}`, { method: 'POST', dispatcher, headers: { 'content-type': 'application/json', 'x-api-key': service.key }, body: bodies.build(spec, 1)[0] as Buffer })
    const answer = Buffer.from(await res.body.arrayBuffer())
    if (res.statusCode !== 200) throw new Error(`the service answered ${res.statusCode} to a bulk: ${answer.toString().slice(0, 300)}`)
    const put = await request(`${floor.base}/__answer`, { method: 'PUT', dispatcher, headers: { 'content-type': 'application/json', 'x-path': kBulkPath }, body: answer })
    await put.body.dump()
  }

  const main = opts.single ? 'single' : 'bulk'
  const mainLabel = (t: string): string => `${t} ${main} ${opts.format}${opts.repeat === 1 ? ' warm' : opts.repeat === 0 ? ' cold' : ` r=${opts.repeat}`}`
  let sweepRows: Row[] = []
  const ratios: Ratio[] = []
  try {
    bodies.initSeen(Math.max(opts.bulk, 2000))
    console.log(tableHeader())
    if (opts.urls.length > 0) {
      const fleet = opts.urls.length > 1
      for (const [i, base] of opts.urls.entries()) targets.push({ name: fleet ? `instance${i + 1}` : 'service', base, key: opts.key as string, proc: null, dir: null })
      for (const t of targets) await warm(t)
      const specs = targets.map((t): Spec => ({ label: mainLabel(t.name), target: t, kind: main, format: opts.format, repeat: opts.repeat, signalDetails: opts.signalDetails, cycle: false }))
      if (fleet) {
        for (const c of opts.concurrency) {
          sweepRows.push(await fleetLevel(specs, c))
          if (sweepRows.length >= 2 && knee(sweepRows, opts.kneeGain, opts.kneeP99) !== sweepRows[sweepRows.length - 1]) break
        }
      } else {
        sweepRows = await sweep(specs[0] as Spec, opts.concurrency, true)
      }
    } else {
      progress.show('starting the service (pool), the service (inline), the floor server and hello-world...')
      if (!progress.tty) process.stderr.write('starting servers\n')
      const started = await Promise.allSettled([
        startService('pool', opts.pool, opts.profile), startService('inline', 0),
        startProcess('floor', [join(kRoot, 'bench', 'baseline-servers.ts'), 'floor'], {}, null),
        startProcess('hello', [join(kRoot, 'bench', 'baseline-servers.ts'), 'hello'], {}, null)
      ])
      for (const s of started) if (s.status === 'fulfilled') targets.push(s.value)
      const failed = started.find((s) => s.status === 'rejected')
      if (failed !== undefined) throw (failed as PromiseRejectedResult).reason
      progress.clear()
      const [pool, inline, floor, hello] = targets as [Target, Target, Target, Target]
      await warm(pool)
      await warm(inline)
      await teachFloor(pool, floor)
      const base = { format: 'json' as const, signalDetails: 'none' as const, cycle: false }
      sweepRows = await sweep({ label: mainLabel('pool'), target: pool, kind: main, format: opts.format, repeat: opts.repeat, signalDetails: opts.signalDetails, cycle: false }, opts.concurrency, true)
      const pair = opts.concurrency.slice(0, 2)
      const cold = await sweep({ ...base, label: 'pool bulk json cold', target: pool, kind: 'bulk', repeat: 0 }, pair, false)
      const warmRows = await sweep({ ...base, label: 'pool bulk json warm', target: pool, kind: 'bulk', repeat: 1 }, pair, false)
      const inlineCold = await sweep({ ...base, label: 'inline bulk json cold', target: inline, kind: 'bulk', repeat: 0 }, pair, false)
      const floorRows = await sweep({ ...base, label: 'floor bulk json', target: floor, kind: 'bulk', repeat: 0, cycle: true }, pair, false)
      const cTop = pair[pair.length - 1] as number
      const packed = await level({ ...base, label: 'pool bulk msgpack cold', target: pool, kind: 'bulk', format: 'msgpack', repeat: 0 }, cTop)
      const sc = 32
      const single = await level({ ...base, label: 'pool single warm', target: pool, kind: 'single', repeat: 1 }, sc)
      const singleInline = await level({ ...base, label: 'inline single warm', target: inline, kind: 'single', repeat: 1 }, sc)
      const helloRow = await level({ ...base, label: 'fastify hello-world', target: hello, kind: 'hello', repeat: 0, cycle: true }, sc)
      const best = (rs: Row[]): Row | undefined => [...rs].sort((a, b) => b.indicatorsPerSec - a.indicatorsPerSec)[0]
      const at = (rs: Row[], c: number): Row | undefined => rs.find((r) => r.concurrency === c)
      const c1 = pair[0] as number
      const srv = (r: Row | undefined): number | undefined => r?.serverCpuUsPerIndicator ?? undefined
      const atMost = (name: string, us: number | undefined, max: number, per: string): Ratio =>
        ({ name, value: us ?? null, target: `<= ${max} us`, met: us === undefined ? null : us <= max, detail: `server CPU, all threads, per ${per}` })
      // The targets are those of docs/PERFORMANCE.md ("The hot path").
      ratios.push(
        ratio(`cold bulk vs floor (best of c=${pair.join(',')})`, best(cold)?.indicatorsPerSec, best(floorRows)?.indicatorsPerSec, '>= 0.3', (x) => x >= 0.3,
          `${best(cold)?.indicatorsPerSec} vs ${best(floorRows)?.indicatorsPerSec} indicators/s; cold p50 at c=${c1}: ${at(cold, c1)?.p50} ms (target <= 60), floor ${at(floorRows, c1)?.p50} ms`),
        atMost(`cold bulk server CPU at c=${cTop}`, srv(at(cold, cTop)), 3.4, 'indicator'),
        ratio(`cold bulk p50 vs floor p50 at c=${c1}`, at(cold, c1)?.p50, at(floorRows, c1)?.p50, 'p50 <= 60 ms', () => (at(cold, c1)?.p50 ?? Infinity) <= 60, `${at(cold, c1)?.p50} ms vs ${at(floorRows, c1)?.p50} ms`),
        ratio(`warm bulk vs floor (best of c=${pair.join(',')})`, best(warmRows)?.indicatorsPerSec, best(floorRows)?.indicatorsPerSec, '>= 0.5', (x) => x >= 0.5,
          `${best(warmRows)?.indicatorsPerSec} vs ${best(floorRows)?.indicatorsPerSec} indicators/s`),
        atMost(`warm bulk server CPU at c=${cTop}`, srv(at(warmRows, cTop)), 1.8, 'indicator'),
        ratio(`single vs hello-world requests/s (c=${sc})`, single.requestsPerSec, helloRow.requestsPerSec, '>= 0.35', (x) => x >= 0.35, `${single.requestsPerSec} vs ${helloRow.requestsPerSec} requests/s`),
        ratio(`single p99 vs hello-world p99 (c=${sc})`, single.p99, helloRow.p99, '<= 3', (x) => x <= 3, `${single.p99} ms vs ${helloRow.p99} ms`),
        atMost(`single server CPU (c=${sc})`, srv(single), 60, 'call'),
        ratio(`pool vs inline singles (c=${sc})`, single.requestsPerSec, singleInline.requestsPerSec, '>= 1', (x) => x >= 1, `${single.requestsPerSec} vs ${singleInline.requestsPerSec} requests/s`),
        ratio(`msgpack vs JSON cold bulk (c=${cTop})`, packed.indicatorsPerSec, at(cold, cTop)?.indicatorsPerSec, '> 1', (x) => x > 1, `${packed.indicatorsPerSec} vs ${at(cold, cTop)?.indicatorsPerSec} indicators/s`),
        ratio(`pool vs inline cold bulk (best of c=${pair.join(',')})`, best(cold)?.indicatorsPerSec, best(inlineCold)?.indicatorsPerSec, '>= 1.5', (x) => x >= 1.5, `${best(cold)?.indicatorsPerSec} vs ${best(inlineCold)?.indicatorsPerSec} indicators/s`),
        ratio('pool vs inline cold bulk, sustained (history drained)', best(cold)?.sustainedIndicatorsPerSec ?? undefined, best(inlineCold)?.sustainedIndicatorsPerSec ?? undefined, '', () => null,
          `${best(cold)?.sustainedIndicatorsPerSec} vs ${best(inlineCold)?.sustainedIndicatorsPerSec} indicators/s`)
      )
    }
  } finally {
    progress.clear()
    await dispatcher.close()
    for (const t of targets) await stopTarget(t)
  }

  const k = knee(sweepRows, opts.kneeGain, opts.kneeP99)
  const n = k === null ? null : (k.sustainedIndicatorsPerSec !== null ? Math.min(k.sustainedIndicatorsPerSec, k.indicatorsPerSec) : k.indicatorsPerSec)
  const sizing = k === null || n === null || n <= 0 ? null : { indicators_per_sec: n, p99_ms: k.p99, concurrency: k.concurrency }
  const f = opts.targetRate ?? (sizing === null ? null : Math.max(100_000, Math.ceil(sizing.indicators_per_sec * 3.5 / 10_000) * 10_000))
  const instances = Math.max(1, opts.urls.length)
  const sentence = sizing === null || f === null
    ? noSizing(sweepRows)
    : instances > 1
      ? `${instances} instances together sustain ${sizing.indicators_per_sec} indicators/s at p99 <= ${sizing.p99_ms} ms (concurrency ${sizing.concurrency} each); ` +
        `${opts.targetRate === null ? 'set --target-rate to check a rate against it' : `${f} indicators/s ${f <= sizing.indicators_per_sec ? 'fits' : 'needs more (measure a larger fleet: shared stores do not scale with instances)'}`}`
      : `one instance sustains ${sizing.indicators_per_sec} indicators/s at p99 <= ${sizing.p99_ms} ms (concurrency ${sizing.concurrency}); ` +
        `for ${f} indicators/s run ${Math.ceil(f / sizing.indicators_per_sec)} instances${opts.targetRate === null ? ' (example rate; set yours with --target-rate)' : ''}`
  console.log('')
  for (const r of ratios) console.log(`${r.name}: ${r.value ?? '-'}${r.target.endsWith(' us') ? ' us' : 'x'}${r.target === '' ? '' : ` (target ${r.target}: ${r.met === null ? '-' : r.met ? 'met' : 'missed'})`}; ${r.detail}`)
  const clientMax = Math.max(...rows.map((r) => r.clientCpuPercent))
  console.log(`client CPU: at most ${clientMax}% of one core per level`)
  const clientBound = rows.filter((r) => r.clientCpuPercent >= kClientBoundPercent).map((r) => `${r.label} c=${r.concurrency} (${r.clientCpuPercent}%)`)
  if (clientBound.length > 0) console.log(clientBoundNote(clientBound))
  console.log(sentence)
  const report: Report = {
    date: new Date().toISOString(),
    cpus: availableParallelism(),
    command: `npm run bench:capacity -- ${process.argv.slice(2).map((a) => a === opts.key ? '<key>' : a).join(' ')}`.trim(),
    deployment: opts.urls.length > 0 ? opts.urls.join(' ') : 'started by the bench on 127.0.0.1',
    instances,
    options: { ...opts, key: opts.key === null ? null : '<redacted>', out: opts.out },
    rows,
    ratios,
    sizing,
    sentence,
    client_bound: clientBound
  }
  mkdirSync(opts.out, { recursive: true })
  writeFileSync(join(opts.out, 'capacity.json'), JSON.stringify(report, null, 2) + '\n')
  writeFileSync(join(opts.out, 'capacity.html'), html(report))
  console.log(`wrote ${join(opts.out, 'capacity.json')} and ${join(opts.out, 'capacity.html')}`)
  if (sizing === null) process.exitCode = 1
}

const kUsage = `usage: npm run bench:capacity -- [--url URL [--url URL2 ...] --key KEY] [--bulk N] [--mix ip=40,domain=30,...] [--repeat 0..1]
  [--signal-details none|top|all] [--format json|msgpack] [--single] [--concurrency 1,2,4,8] [--duration S]
  [--target-rate F] [--out DIR] [--warmup N] [--knee-gain 0.1] [--knee-p99 3] [--pool N] [--profile DIR]`

{
  let opts: Options
  try {
    opts = parseOptions(process.argv.slice(2))
  } catch (err) {
    if (!(err instanceof UsageError)) throw err
    process.stderr.write(err.message === 'help' ? `${kUsage}\n` : `error: ${err.message}\n${kUsage}\n`)
    process.exit(err.message === 'help' ? 0 : 2)
  }
  try {
    await main(opts)
  } catch (err) {
    // A deployment that cannot be reached or refuses the bench is the operator's to fix: say so, no stack trace.
    const e = err as Error & { code?: unknown }
    const unreachable = typeof e.code === 'string' && kUnreachable.test(e.code)
    if (!(err instanceof BenchError) && !unreachable) throw err
    const hint = unreachable && kCertificate.test(String(e.code)) ? ' (a certificate from a private CA: give its PEM in NODE_EXTRA_CA_CERTS)' : ''
    process.stderr.write(`error: ${unreachable ? `cannot reach ${opts.urls.length > 0 ? opts.urls.join(' or ') : 'a server the bench started'}: ${String(e.code)} ${e.message}${hint}` : e.message}\n`)
    process.exitCode = 1
  }
}
