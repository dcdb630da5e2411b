/**
 * The stores' history write alone, without the writer thread or its journal: one batch of 100,000 records (20 parts
 * of 5,000, encoded as the scoring workers encode them) written to SQLite, then to PostgreSQL with parts stored as
 * they are, then to PostgreSQL with parts lz4-compressed, in turn, for --rounds rounds, so that each variant sees the
 * same machine. Figures: each variant's median batch time, and the median over rounds of SQLite's time over its time
 * (PostgreSQL / SQLite as a rate ratio).
 *
 *   npm run bench:history-store -- --postgres URL [--rounds 10]
 *
 * --postgres names a database the bench may create and drop throwaway schemas in (iocv_bench_<hex>). The lz4 variant
 * is skipped when the server cannot compress with lz4.
 */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { availableParallelism, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import pg from 'pg'
import { Snapshot } from '../src/engine/index.ts'
import { historyParts } from '../src/history/codec.ts'
import { benchEnvelope } from './history-envelope.ts'
import { loadManifest, loadSnapshot } from '../src/intel/index.ts'
import { scoreBulkChunk, type ChunkItem } from '../src/pool/score-chunk.ts'
import { PostgresStore, SqliteStore, type HistoryPart, type JournalMark } from '../src/store/index.ts'
import { median } from './stats.ts'

const { values } = parseArgs({ options: { postgres: { type: 'string' }, rounds: { type: 'string', default: '10' } } })
if (values.postgres === undefined) throw new Error('--postgres URL is required')
const kUrl = values.postgres
const kRounds = Math.max(1, Number(values.rounds))
const kParts = 20
const kPart = 5_000
const log = (line: string): void => { process.stderr.write(line + '\n') }

/** Random public-looking indicators: IPv4, domains and SHA-256 hashes (about 60/30/10). */
function freshIndicators (n: number): ChunkItem[] {
  const bytes = randomBytes(n * 8)
  const out: ChunkItem[] = []
  for (let i = 0; i < n; i++) {
    const o = i * 8
    const kind = bytes[o]! % 10
    if (kind < 6) out.push([undefined, `${11 + (bytes[o + 1]! % 180)}.${bytes[o + 2]}.${bytes[o + 3]}.${1 + (bytes[o + 4]! % 254)}`, null, null])
    else if (kind < 9) out.push(['domain', `${bytes.subarray(o + 1, o + 7).toString('hex')}.${['com', 'net', 'org', 'io'][bytes[o + 7]! % 4]}`, null, null])
    else out.push(['file_hash_sha256', randomBytes(32).toString('hex'), null, null])
  }
  return out
}

log(`load average ${loadavg().map((x) => x.toFixed(2)).join(' ')} on ${availableParallelism()} cores; encoding parts...`)
const feeds = await loadManifest(join(import.meta.dirname, '..', 'data', 'feeds', 'manifest.json'))
const snapshot = new Snapshot((await loadSnapshot({ feeds, cacheDir: join(tmpdir(), 'ioc-verdict-bench-intel') })).data)
const params = { mode: 'bulk', format: 'json', scoringVersion: null, signalDetails: 'top', evidenceDetails: 'none' } as const
const encoded: Uint8Array[] = []
for (let i = 0; i < kParts; i++) encoded.push(scoreBulkChunk(freshIndicators(kPart), params, { snapshot, cache: null }).history)
const batch = (): HistoryPart[] => {
  const out: HistoryPart[] = []
  historyParts(benchEnvelope(kParts * kPart), encoded, out)
  return out
}

interface Writer { writeHistoryParts: (parts: readonly HistoryPart[], mark?: JournalMark) => Promise<void>, close: () => Promise<void> }
const dir = mkdtempSync(join(tmpdir(), 'ioc-verdict-bench-history-store-'))
const admin = new pg.Client({ connectionString: kUrl })
await admin.connect()
const schemas: string[] = []
/** A migrated PostgreSQL store on a schema of its own, with today's partitions made by a first batch. */
async function postgres (lz4: boolean): Promise<Writer> {
  const schema = `iocv_bench_${randomBytes(4).toString('hex')}`
  schemas.push(schema)
  const store = new PostgresStore({ url: kUrl, schema })
  await store.migrate()
  await store.writeHistoryParts(batch(), { journal: 'bench', position: 0 })
  if (!lz4) {
    // Partitions made where the server has lz4 compress parts; this variant stores them as they are.
    const { rows } = await admin.query<{ name: string }>('SELECT relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace ' +
      "WHERE nspname = $1 AND relkind = 'r' AND relname ~ '^history_parts_d[0-9]{8}$'", [schema])
    for (const r of rows) await admin.query(`ALTER TABLE "${schema}".${r.name} ALTER COLUMN part SET STORAGE EXTERNAL, ALTER COLUMN part SET COMPRESSION pglz`)
  }
  return store
}

const lz4 = (await admin.query<{ lz4: boolean }>("SELECT 'lz4' = ANY (enumvals) AS lz4 FROM pg_settings WHERE name = 'default_toast_compression'")).rows[0]?.lz4 === true
try {
  const sqlite = new SqliteStore({ path: join(dir, 'ioc-verdict.db') })
  await sqlite.migrate()
  const variants: Array<[string, Writer]> = [['sqlite', sqlite], ['postgres, parts as they are', await postgres(false)]]
  if (lz4) variants.push(['postgres, parts in lz4', await postgres(true)])
  const ms = new Map<string, number[]>(variants.map(([name]) => [name, []]))
  let position = 0
  for (let r = 0; r < kRounds; r++) {
    for (const [name, store] of variants) {
      const parts = batch()
      const t0 = performance.now()
      await store.writeHistoryParts(parts, { journal: 'bench', position: ++position })
      ms.get(name)?.push(performance.now() - t0)
    }
  }
  const lite = ms.get('sqlite') as number[]
  const result = {
    date: new Date().toISOString(),
    loadAverage: loadavg()[0],
    rounds: kRounds,
    recordsPerBatch: kParts * kPart,
    variants: variants.map(([name]) => {
      const own = ms.get(name) as number[]
      return { name, medianMs: Math.round(median(own)), recordsPerSec: Math.round(kParts * kPart / median(own) * 1000), ratioOverSqlite: Math.round(median(own.map((t, i) => (lite[i] as number) / t)) * 100) / 100, ms: own.map(Math.round) }
    })
  }
  console.log(JSON.stringify(result, null, 2))
  for (const [, store] of variants) await store.close()
} finally {
  for (const s of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`)
  await admin.end()
  rmSync(dir, { recursive: true, force: true })
}
