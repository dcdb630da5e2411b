/**
 * The SQLite store's history write for single calls: each call is a request of its own, where a 10,000-indicator bulk
 * shares one request row. Calls of one key within one millisecond share a request row (each item carrying its own
 * envelope members: docs/ARCHITECTURE.md "A single call"). Batches of --calls single-call parts (encoded as the main
 * thread encodes a single call's record) are written with writeHistoryPartsSync, as the history writer does, into two
 * fresh stores in turn, for --rounds rounds (the first two are warm-up):
 *
 *   apart     every call in a millisecond of its own: a request row per call (every call, before shared rows)
 *   shared    calls dated as they come at --rate calls per second (default 9,600, the capacity bench's cached
 *             single calls at c=32): those of one millisecond share a row
 *
 *   npm run bench:history-singles -- [--calls 10000] [--rounds 12] [--rate 9600]
 *
 * Figures: each variant's median wall time per call of a batch (the store write alone, on this thread), and the
 * median over rounds of apart's time over shared's.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { availableParallelism, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { Snapshot } from '../src/engine/index.ts'
import { historyParts } from '../src/history/codec.ts'
import { loadManifest, loadSnapshot } from '../src/intel/index.ts'
import { scoreBulkChunk } from '../src/pool/score-chunk.ts'
import { SqliteStore, type HistoryPart } from '../src/store/index.ts'
import { benchEnvelope } from './history-envelope.ts'
import { median } from './stats.ts'

const { values } = parseArgs({ options: { calls: { type: 'string', default: '10000' }, rounds: { type: 'string', default: '12' }, rate: { type: 'string', default: '9600' } } })
const kCalls = Math.max(1, Number(values.calls))
const kRate = Math.max(1, Number(values.rate))
const kRounds = Math.max(3, Number(values.rounds))
const kWarmup = 2

const feeds = await loadManifest(join(import.meta.dirname, '..', 'data', 'feeds', 'manifest.json'))
const snapshot = new Snapshot((await loadSnapshot({ feeds, cacheDir: join(tmpdir(), 'ioc-verdict-bench-intel') })).data)
const params = { mode: 'single', format: 'json', scoringVersion: null, signalDetails: 'top', evidenceDetails: 'none' } as const
const part = scoreBulkChunk([['ip', '198.51.100.7', null, null]], params, { snapshot, cache: null }).history

/**
 * One batch of single calls: each its own request (its own envelope and uid), as the writer reads them, dated one
 * millisecond apart or at kRate calls per second.
 */
function batch (apart: boolean): HistoryPart[] {
  const out: HistoryPart[] = []
  const t0 = Date.now()
  for (let i = 0; i < kCalls; i++) {
    const date = new Date(t0 + (apart ? i : Math.floor(i * 1000 / kRate))).toISOString()
    historyParts({ ...benchEnvelope(1), date, bulk_request_id: null }, [part], out)
  }
  return out
}

const variants = ['apart', 'shared'] as const
const dirs: string[] = []
const stores = new Map<string, SqliteStore>()
for (const v of variants) {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-singles-'))
  dirs.push(dir)
  const store = new SqliteStore({ path: join(dir, 'history.db') })
  await store.migrate()
  stores.set(v, store)
}
process.stderr.write(`load average ${loadavg().map((x) => x.toFixed(2)).join(' ')} on ${availableParallelism()} cores; ` +
  `${kRounds} rounds of ${kCalls} single calls per store (${kWarmup} warm-up), shared at ${kRate} calls/s\n`)
const perCall = new Map<string, number[]>(variants.map((v) => [v, []]))
const ratios: number[] = []
try {
  for (let r = 0; r < kRounds; r++) {
    const us: Record<string, number> = {}
    // Alternating which store goes first, so that neither always follows the other's work.
    for (const v of r % 2 === 0 ? variants : [...variants].reverse()) {
      const parts = batch(v === 'apart')
      const t0 = performance.now()
      ;(stores.get(v) as SqliteStore).writeHistoryPartsSync(parts, { journal: 'bench', position: r })
      us[v] = (performance.now() - t0) * 1000 / kCalls
    }
    if (r < kWarmup) continue
    for (const v of variants) perCall.get(v)?.push(us[v] as number)
    ratios.push((us.apart as number) / (us.shared as number))
  }
} finally {
  for (const s of stores.values()) await s.close()
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
}
for (const v of variants) console.log(`${v.padEnd(9)} ${median(perCall.get(v) ?? []).toFixed(1)} us per call (median of ${kRounds - kWarmup} batches)`)
console.log(`apart / shared time per call: ${median(ratios).toFixed(2)}x (median of the rounds)`)
