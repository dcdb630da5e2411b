/**
 * History ingest bench: can the history writer (HistoryClient -> worker thread -> SQLite) keep up with the
 * service's bulk throughput without a growing backlog?
 *
 *   node --import tsx bench/history.bench.ts [--seconds 10] [--concurrency 2] [--max-backlog 200000] [--batch N] [--pool N]
 *
 * Phase 1 (no HTTP): envelopes with pre-encoded parts, made exactly as the scoring workers make them
 *   (scoreBulkChunk -> encoded history items, 2 parts of 5,000 per 10,000-record envelope),
 *   submitted as fast as the writer accepts them (closed loop: a new envelope whenever the backlog is under
 *   --max-backlog) for --seconds; the backlog (history.state().pending) is sampled every 250 ms. --batch overrides
 *   the rows per store transaction for this phase (default: the configured IOC_HISTORY_BATCH).
 * Breakdown: per-record cost of each ingest step on one thread (envelope and store parts, SQLite block and request
 *   inserts + usage upsert), to show where the time goes.
 * Phase 2 (HTTP): an in-process service (startService + listen on 127.0.0.1:0, scoring pool at its default size
 *   or --pool)
 *   driven at full speed with 10,000-indicator bulks of fresh random indicators over undici for --seconds; prints
 *   the service's indicators/s, the writer's rows/s and the backlog over time.
 *
 * Results are printed and written to bench/results/history.json.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import pino from 'pino'
import { Agent, request } from 'undici'
import { loadConfig } from '../src/config.ts'
import { Snapshot } from '../src/engine/index.ts'
import { loadManifest, loadSnapshot } from '../src/intel/index.ts'
import { startHistory, type HistoryClient } from '../src/history/client.ts'
import type { HistoryEnvelope } from '../src/history/types.ts'
import { historyParts } from '../src/history/codec.ts'
import { scoreBulkChunk, type ChunkItem } from '../src/pool/score-chunk.ts'
import { SqliteStore, type HistoryPart } from '../src/store/index.ts'
import { startService } from '../src/service.ts'

const kRoot = join(import.meta.dirname, '..')
const kIntelCache = join(tmpdir(), 'ioc-verdict-bench-intel')
const kManifest = join(kRoot, 'data', 'feeds', 'manifest.json')
const kSampleMs = 250
const kBulk = 10_000
const kPart = 5_000

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    concurrency: { type: 'string', default: '2' },
    'max-backlog': { type: 'string', default: '200000' },
    bulks: { type: 'string', default: '60' },
    batch: { type: 'string' },
    pool: { type: 'string' }
  }
})
const kSeconds = Number(values.seconds)
const kConcurrency = Number(values.concurrency)
const kMaxBacklog = Number(values['max-backlog'])
const kBodies = Number(values.bulks)

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

function envelope (count: number): HistoryEnvelope {
  return {
    date: new Date().toISOString(),
    request_id: randomUUID(),
    bulk_request_id: randomUUID(),
    http_status: 200,
    auth_type: 'api_key',
    tenant: 'bench',
    apikey: 'benchkeyaaaa',
    user_id: null,
    evidence_details: 'none',
    label_details: 'top',
    source: { channel: 'siem', product: 'bench' },
    scoring_version: null,
    query_type: 'bench',
    project_id: null,
    project_name: null,
    count
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

/** Waits until the writer has written `target` records; returns the wait in ms. */
async function drain (history: HistoryClient, target: number): Promise<number> {
  const t0 = performance.now()
  while (history.state().written < target) {
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
log('loading the intel snapshot...')
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

// --- phase 1: the writer alone ------------------------------------------------------------------------------------
const dir1 = mkdtempSync(join(tmpdir(), 'ioc-verdict-bench-history-'))
const cfgDefaults = loadConfig({ IOC_DATA_DIR: dir1 })
const kBatch = values.batch === undefined ? cfgDefaults.historyBatch : Number(values.batch)
const history = await startHistory({
  store: { kind: 'sqlite', path: join(dir1, 'ioc-verdict.db') },
  spoolDir: join(dir1, 'spool'),
  journalDir: join(dir1, 'journal'),
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
log(`\nphase 1: HistoryClient + worker + SQLite, no HTTP, ${kSeconds} s, backlog capped at ${kMaxBacklog} (batch ${kBatch}, flush ${cfgDefaults.historyFlushMs} ms)`)
let submitted1 = 0
const s1 = sampler(history)
const p1Start = performance.now()
let next = 0
while (performance.now() - p1Start < kSeconds * 1000) {
  if (history.state().pending < kMaxBacklog) {
    const a = parts[next++ % kDistinctParts] as Uint8Array
    const b = parts[next++ % kDistinctParts] as Uint8Array
    // Each envelope gets its own copies (as each request has its own); the journal write is not awaited here, so
    // requests overlap as concurrent ones do.
    void history.submit(envelope(kBulk), [a.slice(), b.slice()])
    submitted1 += kBulk
    await new Promise((resolve) => setImmediate(resolve)) // lets status messages and the sampler in
  } else {
    await sleep(5) // at the cap: leave the CPU to the writer instead of spinning
  }
}
const p1Seconds = (performance.now() - p1Start) / 1000
const written1AtEnd = history.state().written
const drain1 = await drain(history, submitted1)
s1.stop()
await history.close()
const phase1Rates = rates(s1.samples)
printSamples('phase 1 backlog over time', phase1Rates)
const steady1 = phase1Rates.filter((r) => r.t > 1)
const phase1 = {
  batch: kBatch,
  seconds: round(p1Seconds, 1),
  submitted: submitted1,
  writtenDuringPhase: written1AtEnd,
  recordsPerSec: Math.round(written1AtEnd / p1Seconds),
  recordsPerSecIncludingDrain: Math.round(submitted1 / (p1Seconds + drain1 / 1000)),
  drainMs: Math.round(drain1),
  maxBacklog: Math.max(...phase1Rates.map((r) => r.backlog)),
  meanWrittenPerSecAfter1s: Math.round(steady1.reduce((a, r) => a + r.writtenPerSec, 0) / Math.max(1, steady1.length))
}
log(JSON.stringify(phase1))
rmSync(dir1, { recursive: true, force: true })

// --- breakdown: where one record's time goes, single-threaded -------------------------------------------------
const dirB = mkdtempSync(join(tmpdir(), 'ioc-verdict-bench-history-'))
const breakdownN = kDistinctParts * kPart
let t = performance.now()
const env = envelope(breakdownN)
const storeParts: HistoryPart[] = []
historyParts(env, parts, storeParts)
const expandUs = (performance.now() - t) * 1000 / breakdownN
const store = new SqliteStore({ path: join(dirB, 'b.db') })
store.migrateSync()
t = performance.now()
for (const p of storeParts) store.writeHistoryPartsSync([p])
const writeUs = (performance.now() - t) * 1000 / breakdownN
await store.close()
rmSync(dirB, { recursive: true, force: true })
const breakdown = {
  records: breakdownN,
  envelopeAndPartsUsPerRecord: round(expandUs, 2),
  sqliteInsertUsPerRecord: round(writeUs, 2),
  singleThreadCeilingRecordsPerSec: Math.round(1e6 / (expandUs + writeUs))
}
log(`\nbreakdown (one thread): ${JSON.stringify(breakdown)}`)

// --- phase 2: a listening service at full bulk speed ----------------------------------------------------------
const dir2 = mkdtempSync(join(tmpdir(), 'ioc-verdict-bench-history-'))
const config = loadConfig({ IOC_DATA_DIR: dir2, IOC_PORT: '0', IOC_LOG_LEVEL: 'silent', IOC_BOOTSTRAP_KEY: '0', IOC_INTEL_CACHE_DIR: kIntelCache, IOC_MAX_INFLIGHT: '1000000', ...(values.pool === undefined ? {} : { IOC_POOL_SIZE: values.pool }) })
const svc = await startService(config)
await svc.app.listen({ host: '127.0.0.1', port: 0 })
const addr = svc.app.server.address()
const base = `http://127.0.0.1:${typeof addr === 'object' && addr !== null ? addr.port : 0}`
const key = (await svc.store.createKey({ tenant: 'bench', permissions: ['verdict', 'verdict_bulk'], quota: null })).key
const dispatcher = new Agent({ connections: kConcurrency })
log(`\nphase 2: service on ${base}, pool ${config.poolSize}, ${kConcurrency} concurrent 10,000-indicator bulks, ${kSeconds} s; generating ${kBodies} bodies...`)
const bodies = Array.from({ length: kBodies + 2 }, () => Buffer.from(JSON.stringify({ indicators: freshIndicators(kBulk), signal_details: 'none' })))

let answered = 0
let errors = 0
let bodyIndex = 0
let reused = false
async function post (): Promise<void> {
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
const p2Start = performance.now()
await Promise.all(Array.from({ length: kConcurrency }, async () => {
  while (performance.now() - p2Start < kSeconds * 1000) await post()
}))
const p2Seconds = (performance.now() - p2Start) / 1000
const written2AtEnd = svc.history.state().written - writtenBefore
const drain2 = await drain(svc.history, answered)
s2.stop()
const phase2Rates = rates(s2.samples)
printSamples('phase 2 (service under full bulk load)', phase2Rates)
await dispatcher.close()
await svc.app.close()
rmSync(dir2, { recursive: true, force: true })

const answered2 = answered - answeredBefore
const half = phase2Rates.filter((r) => r.t <= p2Seconds)
const firstHalf = half.slice(0, Math.floor(half.length / 2))
const secondHalf = half.slice(Math.floor(half.length / 2))
const mean = (xs: number[]): number => xs.length === 0 ? 0 : xs.reduce((a, x) => a + x, 0) / xs.length
const phase2 = {
  seconds: round(p2Seconds, 1),
  poolSize: config.poolSize,
  concurrency: kConcurrency,
  indicatorsAnswered: answered2,
  errors,
  bodiesReused: reused,
  serviceIndicatorsPerSec: Math.round(answered2 / p2Seconds),
  historyWrittenPerSec: Math.round(written2AtEnd / p2Seconds),
  drainAfterLoadMs: Math.round(drain2),
  maxBacklog: Math.max(...phase2Rates.map((r) => r.backlog)),
  meanBacklogFirstHalf: Math.round(mean(firstHalf.map((r) => r.backlog))),
  meanBacklogSecondHalf: Math.round(mean(secondHalf.map((r) => r.backlog)))
}
log(JSON.stringify(phase2))

const summary = {
  date: new Date().toISOString(),
  cpus: availableParallelism(),
  writerRecordsPerSec: phase1.recordsPerSec,
  serviceBulkIndicatorsPerSec: phase2.serviceIndicatorsPerSec,
  historyWrittenPerSecUnderLoad: phase2.historyWrittenPerSec,
  headroom: round(phase1.recordsPerSec / Math.max(1, phase2.serviceIndicatorsPerSec), 2),
  keepsUp: phase2.drainAfterLoadMs < 2_000 && phase2.meanBacklogSecondHalf <= Math.max(2 * phase2.meanBacklogFirstHalf, 2 * kBulk * kConcurrency)
}
console.log(summary)
mkdirSync(join(kRoot, 'bench', 'results'), { recursive: true })
writeFileSync(join(kRoot, 'bench', 'results', 'history.json'), JSON.stringify({ summary, phase1, breakdown, phase2, phase1Samples: phase1Rates, phase2Samples: phase2Rates }, null, 2) + '\n')
