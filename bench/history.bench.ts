/**
 * History ingest bench: can the history writer (HistoryClient -> worker thread -> store) keep up with the service's
 * bulk throughput without a growing backlog, on SQLite and on PostgreSQL, and how do the two compare in one run?
 *
 *   npm run bench:history -- [--postgres URL] [--rounds 2] [--seconds 10] [--concurrency 2] [--max-backlog 200000]
 *     [--batch N] [--pool N] [--bulks 60] [--phase2 0|1]
 *
 * --postgres names a database the bench may create and drop throwaway schemas in (iocv_bench_<hex>); without it
 * only SQLite is measured. Each phase runs once per store per round, the stores alternating (SQLite, PostgreSQL,
 * SQLite, ...), so that both see the same machine; ratios are PostgreSQL over SQLite, median of the rounds.
 *
 * Phase 1 (no HTTP): envelopes with pre-encoded parts, made exactly as the scoring workers make them
 *   (scoreBulkChunk -> encoded history items, 2 parts of 5,000 per 10,000-record envelope), submitted as fast as the
 *   writer accepts them (closed loop: a new envelope whenever the backlog is under --max-backlog) for --seconds; the
 *   backlog (history.state().pending) is sampled every 250 ms. --batch overrides the records per store transaction.
 *   Its figure is the writer's rate, records written / seconds; its drain is the time to write what was left.
 * Breakdown: per record, encoding the envelope and store parts, and one batch of 10,000 records at a time written
 *   by the store on this thread (SQLite: CPU; PostgreSQL: the round trips' latency, most of it the server's work).
 * Phase 2 (HTTP): an in-process service (startService + listen on 127.0.0.1:0, scoring pool at its default size or
 *   --pool) driven with 10,000-indicator bulks of fresh random indicators over undici for --seconds at --concurrency;
 *   sustained = indicators answered / (seconds + time until their history is in the store).
 *
 * Results are printed and written to bench/results/history.json.
 */
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { availableParallelism, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import pg from 'pg'
import pino from 'pino'
import { Agent, request } from 'undici'
import { loadConfig, type StoreOptions } from '../src/config.ts'
import { Snapshot } from '../src/engine/index.ts'
import { loadManifest, loadSnapshot } from '../src/intel/index.ts'
import { startHistory, type HistoryClient } from '../src/history/client.ts'
import { benchEnvelope } from './history-envelope.ts'
import { historyParts } from '../src/history/codec.ts'
import { scoreBulkChunk, type ChunkItem } from '../src/pool/score-chunk.ts'
import { PostgresStore, SqliteStore, type HistoryPart } from '../src/store/index.ts'
import { startService } from '../src/service.ts'
import { median } from './stats.ts'

const kRoot = join(import.meta.dirname, '..')
const kIntelCache = join(tmpdir(), 'ioc-verdict-bench-intel')
const kManifest = join(kRoot, 'data', 'feeds', 'manifest.json')
const kSampleMs = 250
const kBulk = 10_000
const kPart = 5_000

const { values } = parseArgs({
  options: {
    postgres: { type: 'string' },
    rounds: { type: 'string', default: '2' },
    seconds: { type: 'string', default: '10' },
    concurrency: { type: 'string', default: '2' },
    'max-backlog': { type: 'string', default: '200000' },
    bulks: { type: 'string', default: '60' },
    batch: { type: 'string' },
    pool: { type: 'string' },
    phase2: { type: 'string', default: '1' }
  }
})
const kSeconds = Number(values.seconds)
const kConcurrency = Number(values.concurrency)
const kMaxBacklog = Number(values['max-backlog'])
const kBodies = Number(values.bulks)
const kRounds = Math.max(1, Number(values.rounds))
const kPostgres = values.postgres ?? null

const log = (line: string): void => { process.stderr.write(line + '\n') }
const round = (x: number, d = 0): number => Math.round(x * 10 ** d) / 10 ** d
const sleep = async (ms: number): Promise<void> => await new Promise((resolve) => setTimeout(resolve, ms))

/** Random public-looking indicators: IPv4, domains and SHA-256 hashes (about 60/30/10), never repeated in practice. */
function freshIndicators (n: number): Array<{ type?: string, value: string }> {
  const bytes = randomBytes(n * 8)
  const out: Array<{ type?: string, value: string }> = new Array(n)
  for (let i = 0; i < n; i++) {
    const o = i * 8
    const kind = bytes[o]! % 10
    if (kind < 6) {
      out[i] = { value: `${11 + (bytes[o + 1]! % 180)}.${bytes[o + 2]}.${bytes[o + 3]}.${1 + (bytes[o + 4]! % 254)}` }
    } else if (kind < 9) {
      out[i] = { type: 'domain', value: `${bytes.subarray(o + 1, o + 7).toString('hex')}.${['com', 'net', 'org', 'io'][bytes[o + 7]! % 4]}` }
    } else {
      out[i] = { type: 'file_hash_sha256', value: randomBytes(32).toString('hex') }
    }
  }
  return out
}

// --- stores -----------------------------------------------------------------------------------------------------

type Kind = 'sqlite' | 'postgres'
const kKinds: Kind[] = kPostgres === null ? ['sqlite'] : ['sqlite', 'postgres']

/** A fresh store of one kind for one measurement, and how to remove it. */
interface BenchStore { options: StoreOptions, env: Record<string, string>, dir: string, drop: () => Promise<void> }

async function freshStore (kind: Kind): Promise<BenchStore> {
  const dir = mkdtempSync(join(tmpdir(), 'ioc-verdict-bench-history-'))
  if (kind === 'sqlite') {
    return { options: { kind: 'sqlite', path: join(dir, 'ioc-verdict.db') }, env: {}, dir, drop: async () => { rmSync(dir, { recursive: true, force: true }) } }
  }
  const url = kPostgres as string
  const schema = `iocv_bench_${randomBytes(4).toString('hex')}`
  return {
    options: { kind: 'postgres', url, schema },
    env: { IOC_STORE: 'postgres', IOC_DATABASE_URL: url, IOC_DATABASE_SCHEMA: schema },
    dir,
    drop: async () => {
      rmSync(dir, { recursive: true, force: true })
      const admin = new pg.Client({ connectionString: url })
      await admin.connect()
      try {
        await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
      } finally {
        await admin.end()
      }
    }
  }
}

interface Sample { t: number, backlog: number, written: number, answered?: number }

/** Samples the writer every 250 ms until stopped. */
function sampler (history: HistoryClient, answered: () => number = () => 0): { samples: Sample[], stop: () => void } {
  const t0 = performance.now()
  const samples: Sample[] = []
  const take = (): void => {
    const s = history.state()
    samples.push({ t: round((performance.now() - t0) / 1000, 2), backlog: s.pending, written: s.written, answered: answered() })
  }
  take()
  const timer = setInterval(take, kSampleMs)
  return { samples, stop: () => { clearInterval(timer); take() } }
}

/** Per-interval rates from cumulative samples. */
function rates (samples: Sample[]): Array<{ t: number, backlog: number, writtenPerSec: number, answeredPerSec: number }> {
  const out = []
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1] as Sample
    const b = samples[i] as Sample
    const dt = b.t - a.t
    if (dt <= 0) continue
    out.push({ t: b.t, backlog: b.backlog, writtenPerSec: Math.round((b.written - a.written) / dt), answeredPerSec: Math.round(((b.answered ?? 0) - (a.answered ?? 0)) / dt) })
  }
  return out
}

/** Waits until the writer has written `target` records (at most 5 minutes); returns the wait in ms. */
async function drain (history: HistoryClient, target: number): Promise<number> {
  const t0 = performance.now()
  while (history.state().written < target) {
    if (performance.now() - t0 > 300_000) throw new Error(`history did not drain: ${history.state().written} of ${target} written after 5 minutes`)
    await history.flush()
    if (history.state().written < target) await sleep(10)
  }
  return performance.now() - t0
}

function printSamples (title: string, rows: ReturnType<typeof rates>): void {
  log(`\n${title}`)
  log('     t(s)   backlog   written/s  answered/s')
  for (const r of rows) log(`${String(r.t.toFixed(2)).padStart(9)} ${String(r.backlog).padStart(9)} ${String(r.writtenPerSec).padStart(11)} ${String(r.answeredPerSec).padStart(11)}`)
}

// --- setup: the snapshot and pre-encoded parts ------------------------------------------------------------------
log(`load average ${loadavg().map((x) => x.toFixed(2)).join(' ')} on ${availableParallelism()} cores; loading the intel snapshot...`)
const feeds = await loadManifest(kManifest)
const snapshot = new Snapshot((await loadSnapshot({ feeds, cacheDir: kIntelCache })).data)
const params = { mode: 'bulk', format: 'json', scoringVersion: null, signalDetails: 'top', evidenceDetails: 'none' } as const
const kDistinctParts = 20
const parts: Uint8Array[] = []
const t0Encode = performance.now()
for (let i = 0; i < kDistinctParts; i++) {
  const items: ChunkItem[] = freshIndicators(kPart).map((ind) => [ind.type, ind.value, i % 2 === 0 ? 'block' : null, i % 3 === 0 ? 'edr' : null])
  parts.push(scoreBulkChunk(items, params, { snapshot, cache: null }).history)
}
log(`encoded ${kDistinctParts} parts of ${kPart} records (${round(parts.reduce((a, p) => a + p.length, 0) / kDistinctParts / kPart)} bytes/record) in ${round(performance.now() - t0Encode)} ms`)
const cfgDefaults = loadConfig({ IOC_DATA_DIR: tmpdir() })
const kBatch = values.batch === undefined ? cfgDefaults.historyBatch : Number(values.batch)

// --- phase 1: the writer alone ------------------------------------------------------------------------------------
async function phase1 (kind: Kind) {
  const bs = await freshStore(kind)
  try {
    const history = await startHistory({
      store: bs.options,
      legacySpoolDir: join(bs.dir, 'spool'),
      journalDir: join(bs.dir, 'journal'),
      journalLimit: cfgDefaults.journalLimit,
      journalSegmentBytes: cfgDefaults.journalSegmentBytes,
      durability: cfgDefaults.historyDurability,
      asyncWindowMs: cfgDefaults.historyAsyncWindowMs,
      asyncWindowBytes: cfgDefaults.historyAsyncWindowBytes,
      commitTimeoutMs: cfgDefaults.historyCommitTimeoutMs,
      batch: kBatch,
      flushMs: cfgDefaults.historyFlushMs,
      retentionDays: 0,
      maxBacklog: Number.MAX_SAFE_INTEGER,
      logger: pino({ level: 'silent' })
    })
    await history.flush() // the store is open and migrated before the clock starts
    log(`\nphase 1 (${kind}): HistoryClient + worker + store, no HTTP, ${kSeconds} s, backlog capped at ${kMaxBacklog} (batch ${kBatch}, flush ${cfgDefaults.historyFlushMs} ms)`)
    let submitted = 0
    let failed = 0
    const s1 = sampler(history)
    const start = performance.now()
    let next = 0
    while (performance.now() - start < kSeconds * 1000) {
      if (history.state().pending < kMaxBacklog) {
        const a = parts[next++ % kDistinctParts] as Uint8Array
        const b = parts[next++ % kDistinctParts] as Uint8Array
        // Each envelope gets its own copies (as each request has its own); the journal write is not awaited here, so
        // requests overlap as concurrent ones do.
        submitted += kBulk
        history.submit(benchEnvelope(kBulk), [a.slice(), b.slice()]).catch(() => { failed += kBulk })
        await new Promise((resolve) => setImmediate(resolve)) // lets status messages and the sampler in
      } else {
        await sleep(5) // at the cap: leave the CPU to the writer instead of spinning
      }
    }
    const seconds = (performance.now() - start) / 1000
    const writtenAtEnd = history.state().written
    const drainMs = await drain(history, submitted - failed)
    s1.stop()
    await history.close()
    const samples = rates(s1.samples)
    printSamples(`phase 1 (${kind}) backlog over time`, samples)
    const steady = samples.filter((r) => r.t > 1)
    const out = {
      seconds: round(seconds, 1),
      submitted,
      failed,
      writtenDuringPhase: writtenAtEnd,
      recordsPerSec: Math.round(writtenAtEnd / seconds),
      recordsPerSecIncludingDrain: Math.round((submitted - failed) / (seconds + drainMs / 1000)),
      drainMs: Math.round(drainMs),
      maxBacklog: Math.max(...samples.map((r) => r.backlog)),
      meanWrittenPerSecAfter1s: Math.round(steady.reduce((a, r) => a + r.writtenPerSec, 0) / Math.max(1, steady.length))
    }
    log(JSON.stringify(out))
    return { ...out, samples }
  } finally {
    await bs.drop()
  }
}

// --- breakdown: where one record's time goes, one batch at a time ----------------------------------------------
async function breakdown (kind: Kind): Promise<Record<string, number>> {
  const bs = await freshStore(kind)
  try {
    const n = kDistinctParts * kPart
    let t = performance.now()
    const storeParts: HistoryPart[] = []
    historyParts(benchEnvelope(n), parts, storeParts)
    const expandUs = (performance.now() - t) * 1000 / n
    const store = bs.options.kind === 'sqlite' ? new SqliteStore({ path: bs.options.path }) : new PostgresStore({ url: bs.options.url, schema: bs.options.schema as string })
    await store.migrate()
    t = performance.now()
    for (let i = 0; i < storeParts.length; i += 2) await store.writeHistoryParts(storeParts.slice(i, i + 2))
    const writeUs = (performance.now() - t) * 1000 / n
    await store.close()
    return { records: n, envelopeAndPartsUsPerRecord: round(expandUs, 2), storeWriteUsPerRecord: round(writeUs, 2), oneBatchAtATimeRecordsPerSec: Math.round(1e6 / (expandUs + writeUs)) }
  } finally {
    await bs.drop()
  }
}

// --- phase 2: a listening service at full bulk speed ----------------------------------------------------------
const bodies = Number(values.phase2) === 0
  ? []
  : Array.from({ length: kBodies + 2 }, () => Buffer.from(JSON.stringify({ indicators: freshIndicators(kBulk), signal_details: 'none' })))

async function phase2 (kind: Kind) {
  const bs = await freshStore(kind)
  try {
    const config = loadConfig({
      IOC_DATA_DIR: bs.dir,
      IOC_PORT: '0',
      IOC_LOG_LEVEL: 'silent',
      IOC_BOOTSTRAP_KEY: '0',
      IOC_INTEL_CACHE_DIR: kIntelCache,
      ...bs.env,
      ...(values.pool === undefined ? {} : { IOC_POOL_SIZE: values.pool })
    })
    const svc = await startService(config)
    await svc.app.listen({ host: '127.0.0.1', port: 0 })
    const addr = svc.app.server.address()
    const base = `http://127.0.0.1:${typeof addr === 'object' && addr !== null ? addr.port : 0}`
    const key = (await svc.store.createKey({ tenant: 'bench', permissions: ['verdict', 'verdict_bulk'], quota: null })).key
    const dispatcher = new Agent({ connections: kConcurrency })
    log(`\nphase 2 (${kind}): service on ${base}, pool ${config.poolSize}, ${kConcurrency} concurrent 10,000-indicator bulks, ${kSeconds} s`)
    let answered = 0
    let errors = 0
    let bodyIndex = 0
    let reused = false
    const post = async (): Promise<void> => {
      if (bodyIndex >= bodies.length) { bodyIndex = 2; reused = true }
      const res = await request(`${base}/api/v2/ioc/verdict/bulk`, { method: 'POST', dispatcher, headers: { 'content-type': 'application/json', 'x-api-key': key }, body: bodies[bodyIndex++] as Buffer })
      await res.body.arrayBuffer()
      if (res.statusCode === 200) answered += kBulk
      else errors++
    }
    // Warm-up (JIT, threads) with two bulks of their own.
    await post()
    await post()
    await drain(svc.history, answered)
    const answeredBefore = answered
    const writtenBefore = svc.history.state().written
    const s2 = sampler(svc.history, () => answered)
    const start = performance.now()
    await Promise.all(Array.from({ length: kConcurrency }, async () => {
      while (performance.now() - start < kSeconds * 1000) await post()
    }))
    const seconds = (performance.now() - start) / 1000
    const writtenAtEnd = svc.history.state().written - writtenBefore
    const drainMs = await drain(svc.history, answered)
    s2.stop()
    const samples = rates(s2.samples)
    printSamples(`phase 2 (${kind}, service under full bulk load)`, samples)
    await dispatcher.close()
    await svc.app.close()
    const indicators = answered - answeredBefore
    const out = {
      seconds: round(seconds, 1),
      poolSize: config.poolSize,
      concurrency: kConcurrency,
      indicatorsAnswered: indicators,
      errors,
      bodiesReused: reused,
      serviceIndicatorsPerSec: Math.round(indicators / seconds),
      historyWrittenPerSec: Math.round(writtenAtEnd / seconds),
      drainAfterLoadMs: Math.round(drainMs),
      sustainedIndicatorsPerSec: Math.round(indicators / (seconds + drainMs / 1000)),
      maxBacklog: Math.max(...samples.map((r) => r.backlog))
    }
    log(JSON.stringify(out))
    return { ...out, samples }
  } finally {
    await bs.drop()
  }
}

// --- the run: rounds of each phase, the stores alternating ------------------------------------------------------
type Rounds<T> = Record<Kind, T[]>
const p1: Rounds<Awaited<ReturnType<typeof phase1>>> = { sqlite: [], postgres: [] }
const bd: Rounds<Awaited<ReturnType<typeof breakdown>>> = { sqlite: [], postgres: [] }
const p2: Rounds<Awaited<ReturnType<typeof phase2>>> = { sqlite: [], postgres: [] }
const loads: number[] = [loadavg()[0] as number]
for (let r = 0; r < kRounds; r++) {
  for (const kind of kKinds) p1[kind].push(await phase1(kind))
  loads.push(loadavg()[0] as number)
}
for (const kind of kKinds) {
  bd[kind].push(await breakdown(kind))
  log(`\nbreakdown (${kind}, one batch of 10,000 at a time on this thread): ${JSON.stringify(bd[kind][0])}`)
}
if (bodies.length > 0) {
  for (let r = 0; r < kRounds; r++) {
    for (const kind of kKinds) p2[kind].push(await phase2(kind))
    loads.push(loadavg()[0] as number)
  }
}

const figure = <T extends Record<string, unknown>>(rounds: Rounds<T>, kind: Kind, key: keyof T): number => median(rounds[kind].map((x) => Number(x[key])))
const ratioOf = <T extends Record<string, unknown>>(rounds: Rounds<T>, key: keyof T): { median: number | null, perRound: number[] } => {
  if (rounds.postgres.length === 0) return { median: null, perRound: [] }
  const perRound = rounds.postgres.map((x, i) => round(Number(x[key]) / Math.max(1, Number(rounds.sqlite[i]?.[key])), 2))
  return { median: round(figure(rounds, 'postgres', key) / Math.max(1, figure(rounds, 'sqlite', key)), 2), perRound }
}
const summary = {
  date: new Date().toISOString(),
  cpus: availableParallelism(),
  loadAverage: { min: round(Math.min(...loads), 1), max: round(Math.max(...loads), 1) },
  rounds: kRounds,
  writerRecordsPerSec: Object.fromEntries(kKinds.map((k) => [k, figure(p1, k, 'recordsPerSec')])),
  writerRatioPostgresOverSqlite: ratioOf(p1, 'recordsPerSec'),
  writerIncludingDrainRatio: ratioOf(p1, 'recordsPerSecIncludingDrain'),
  ...(bodies.length === 0
    ? {}
    : {
        serviceSustainedIndicatorsPerSec: Object.fromEntries(kKinds.map((k) => [k, figure(p2, k, 'sustainedIndicatorsPerSec')])),
        serviceSustainedRatioPostgresOverSqlite: ratioOf(p2, 'sustainedIndicatorsPerSec'),
        serviceErrors: Object.fromEntries(kKinds.map((k) => [k, p2[k].reduce((a, x) => a + Number(x.errors), 0)]))
      })
}
console.log(JSON.stringify(summary, null, 2))
mkdirSync(join(kRoot, 'bench', 'results'), { recursive: true })
writeFileSync(join(kRoot, 'bench', 'results', 'history.json'), JSON.stringify({ summary, phase1: p1, breakdown: bd, phase2: p2 }, null, 2) + '\n')
