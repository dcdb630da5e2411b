/**
 * SQLite specifics: file mode, several connections on one file, and the synchronous writer in a worker thread.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { Worker } from 'node:worker_threads'
import Database from 'better-sqlite3'
import { toRows } from '../../src/store/history-rows.ts'
import { SqliteStore } from '../../src/store/sqlite.ts'
import type { HistoryRecord } from '../../src/store/types.ts'
import { historyRecord } from '../fixtures/history-record.ts'

function tempDir (t: { after: (fn: () => void) => void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-sqlite-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

function records (n: number, tenant: string): HistoryRecord[] {
  return Array.from({ length: n }, (_, i) => historyRecord({
    date: new Date(Date.UTC(2024, 0, 1, 0, 0, i)).toISOString(),
    request_id: `w-${i}`,
    bulk_request_id: 'bulk-w',
    tenant,
    apikey: 'keyworkeraaa',
    indicator: { type: 'ip', value: `192.0.2.${i}`, normalized: `192.0.2.${i}` }
  }))
}

test('a file store runs in WAL mode and two stores migrating the same new file apply the schema once', async (t) => {
  const path = join(tempDir(t), 'a.db')
  const a = new SqliteStore({ path })
  const b = new SqliteStore({ path })
  t.after(async () => { await a.close(); await b.close() })
  await Promise.all([a.migrate(), b.migrate()])
  const raw = new Database(path, { readonly: true })
  try {
    assert.equal(raw.pragma('journal_mode', { simple: true }), 'wal')
    assert.deepEqual(raw.prepare('SELECT version FROM schema_version').pluck().all(), [1, 2])
  } finally {
    raw.close()
  }
})

test('history written synchronously from a worker thread is visible to the main store with its counters', async (t) => {
  const path = join(tempDir(t), 'w.db')
  const main = new SqliteStore({ path })
  t.after(() => main.close())
  await main.migrate()
  // A raw Worker does not inherit tsx's loader hooks (Piscina arranges that itself): register them in the thread.
  const fixture = new URL('./fixtures/write-history-worker.ts', import.meta.url).href
  const tsxApi = import.meta.resolve('tsx/esm/api')
  const worker = new Worker(`import(${JSON.stringify(tsxApi)}).then((m) => { m.register(); return import(${JSON.stringify(fixture)}) })`, {
    eval: true,
    workerData: { path, records: records(50, 'worker-tenant') }
  })
  const [message] = await once(worker, 'message') as [string]
  assert.equal(message, 'done')
  await once(worker, 'exit')
  const page = await main.searchHistory('worker-tenant', {}, 100, null)
  assert.equal(page.results.length, 50)
  assert.equal(await main.usageForKey('keyworkeraaa', '2024-01-01'), 50)
})

test('an in-memory store works without WAL', async (t) => {
  const store = new SqliteStore({ path: ':memory:' })
  t.after(() => store.close())
  await store.migrate()
  store.writeHistorySync(records(3, 'mem'))
  assert.equal((await store.usage('mem', null, '2024-01-01')).total, 3)
})

test('a store without a path is refused with INVALID_OPTIONS, and an unopenable file with STORE_UNAVAILABLE', () => {
  assert.throws(() => new SqliteStore({ path: '' }), { code: 'INVALID_OPTIONS' })
  assert.throws(() => new SqliteStore({ path: '/nonexistent-dir-iocv/x.db' }), (err: { code?: string }) => /^STORE_/.test(err.code ?? ''))
})

test('one request row per request: a continuation right after its last item extends it, a later one gets its own row', async (t) => {
  const path = join(tempDir(t), 'r.db')
  const store = new SqliteStore({ path })
  t.after(() => store.close())
  store.migrateSync()
  const rows = (n: number, uid: string, request: string): ReturnType<typeof toRows> =>
    toRows(records(n, 'layout').map((r) => ({ ...r, date: '2024-01-01T00:00:00.000Z', request_id: request }))).map((r) => ({ ...r, uid }))
  store.writeHistoryRowsSync(rows(3, 'a', 'ra'))
  store.writeHistoryRowsSync(rows(2, 'a', 'ra')) // the writer cut request a across two batches
  store.writeHistoryRowsSync(rows(4, 'b', 'rb'))
  store.writeHistoryRowsSync(rows(1, 'a', 'ra')) // a replay long after: a row of its own
  const raw = new Database(path, { readonly: true })
  t.after(() => raw.close())
  assert.deepEqual(raw.prepare('SELECT id, uid, first_item, last_item FROM history_requests ORDER BY id').all(), [
    { id: 1, uid: 'a', first_item: 1, last_item: 5 },
    { id: 2, uid: 'b', first_item: 6, last_item: 9 },
    { id: 3, uid: 'a:10', first_item: 10, last_item: 10 }
  ])
  assert.deepEqual(raw.prepare('SELECT req, count(*) AS n, min(id) AS lo, max(id) AS hi FROM history GROUP BY req ORDER BY req').all(), [
    { req: 1, n: 5, lo: 1, hi: 5 },
    { req: 2, n: 4, lo: 6, hi: 9 },
    { req: 3, n: 1, lo: 10, hi: 10 }
  ])
  // Only the request-level fields, once per request; each item holds the indicator's members.
  const envelope = JSON.parse(raw.prepare('SELECT envelope FROM history_requests WHERE id = 2').pluck().get() as string) as Record<string, unknown>
  assert.equal(envelope.request_id, 'rb')
  assert.equal('indicator' in envelope, false)
  assert.match(raw.prepare('SELECT item FROM history WHERE id = 6').pluck().get() as string, /^"indicator":\{"type":"ip"/)
  assert.equal((await store.searchHistory('layout', {}, 100, null)).results.length, 10)
})

/** Items per segment of the indicator_value index (the schema's shift of 16). */
const kSegment = 65_536

/** Records of one request at `date`: `n` filler indicators, `value` at the given positions. */
function valueRecords (n: number, date: string, request: string, value: string, at: number[]): HistoryRecord[] {
  return Array.from({ length: n }, (_, i) => historyRecord({
    tenant: 'seg',
    date,
    request_id: request,
    indicator: at.includes(i) ? { type: 'domain', value, normalized: value } : { type: 'ip', value: `10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`, normalized: null }
  }))
}

test('a value search reads the index segment by segment and still returns every match once, newest first', async (t) => {
  const path = join(tempDir(t), 's.db')
  const store = new SqliteStore({ path })
  t.after(() => store.close())
  store.migrateSync()
  const at = (hour: number): string => `2024-05-01T${String(hour).padStart(2, '0')}:00:00.000Z`
  // Segment 0 (ids 1..65535) holds two matches at 12:00 and, last, one at 13:00. Segment 1 then gets three at 12:00,
  // which rank before segment 0's 12:00 items (same date, higher ids), and, as a spool replay would, three at 11:00:
  // a newer segment whose latest date is older than an older segment's.
  await store.writeHistory(valueRecords(kSegment - 3, at(12), 'r12', 'evil.example', [10, 20]))
  await store.writeHistory(valueRecords(2, at(13), 'r13', 'evil.example', [0]))
  await store.writeHistory(valueRecords(3, at(12), 'r12b', 'evil.example', [0, 1, 2]))
  await store.writeHistory(valueRecords(3, at(11), 'r11', 'evil.example', [0, 1, 2]))
  const raw = new Database(path, { readonly: true })
  t.after(() => raw.close())
  assert.deepEqual(raw.prepare('SELECT seg, min_ts, max_ts FROM history_segments ORDER BY seg').all(), [
    { seg: 0, min_ts: Date.parse(at(12)), max_ts: Date.parse(at(13)) },
    { seg: 1, min_ts: Date.parse(at(11)), max_ts: Date.parse(at(12)) }
  ])
  const expected = ['r13', 'r12b', 'r12b', 'r12b', 'r12', 'r12', 'r11', 'r11', 'r11']
  for (const limit of [1, 2, 3, 100]) {
    const seen: string[] = []
    let cursor: string | null = null
    do {
      const page = await store.searchHistory('seg', { indicator_value: 'evil.example' }, limit, cursor)
      assert.ok(page.results.length <= limit)
      seen.push(...page.results.map((r) => r.request_id))
      cursor = page.next_cursor
    } while (cursor !== null)
    assert.deepEqual(seen, expected, `limit ${limit}`)
  }
  // Date filters pick segments by their bounds, then rows by their own dates.
  const window = await store.searchHistory('seg', { indicator_value: 'evil.example', date_gte: at(11), date_lt: at(12) }, 10, null)
  assert.deepEqual(window.results.map((r) => r.request_id), ['r11', 'r11', 'r11'])
  const late = await store.searchHistory('seg', { indicator_value: 'evil.example', date_gte: at(13) }, 10, null)
  assert.deepEqual(late.results.map((r) => r.request_id), ['r13'])
  assert.deepEqual((await store.searchHistory('seg', { indicator_value: 'absent.example' }, 10, null)).results, [])
  assert.deepEqual((await store.searchHistory('other', { indicator_value: 'evil.example' }, 10, null)).results, [])
  // Purge drops the segments it empties and keeps the bounds of those that still hold items.
  await store.purgeHistory(new Date(at(12)))
  assert.deepEqual(raw.prepare('SELECT seg FROM history_segments ORDER BY seg').pluck().all(), [0, 1])
  assert.deepEqual((await store.searchHistory('seg', { indicator_value: 'evil.example' }, 10, null)).results.map((r) => r.request_id), expected.slice(0, 6))
  await store.purgeHistory(new Date(at(13)))
  assert.deepEqual(raw.prepare('SELECT seg FROM history_segments ORDER BY seg').pluck().all(), [0])
  assert.deepEqual((await store.searchHistory('seg', { indicator_value: 'evil.example' }, 10, null)).results.map((r) => r.request_id), ['r13'])
  await store.purgeHistory(new Date(at(14)))
  assert.deepEqual(raw.prepare('SELECT count(*) FROM history_segments').pluck().get(), 0)
  assert.deepEqual((await store.searchHistory('seg', { indicator_value: 'evil.example' }, 10, null)).results, [])
})

test('a database of schema version 1 is upgraded: its items get segment bounds and value searches find them', async (t) => {
  const path = join(tempDir(t), 'v1.db')
  const old = new SqliteStore({ path })
  old.migrateSync()
  await old.writeHistory([
    ...valueRecords(3, '2024-05-01T10:00:00.000Z', 'old-a', 'evil.example', [1]),
    ...valueRecords(2, '2024-05-01T11:00:00.000Z', 'old-b', 'evil.example', [0, 1])
  ])
  await old.close()
  // Back to what migration 1 left: the value index on (tenant, value prefix, ts, id) and no segments table.
  const raw = new Database(path)
  raw.exec(`DROP INDEX history_tenant_seg_ivalue; DROP TABLE history_segments; DELETE FROM schema_version WHERE version = 2;
    CREATE INDEX history_tenant_ivalue ON history (tenant, substr(indicator_value, 1, 512), ts, id);`)
  raw.close()
  const store = new SqliteStore({ path })
  t.after(() => store.close())
  await store.migrate()
  const check = new Database(path, { readonly: true })
  t.after(() => check.close())
  assert.deepEqual(check.prepare('SELECT version FROM schema_version ORDER BY version').pluck().all(), [1, 2])
  assert.deepEqual(check.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'history_tenant_%ivalue'").pluck().all(), ['history_tenant_seg_ivalue'])
  assert.deepEqual(check.prepare('SELECT seg, min_ts, max_ts FROM history_segments').all(), [
    { seg: 0, min_ts: Date.parse('2024-05-01T10:00:00.000Z'), max_ts: Date.parse('2024-05-01T11:00:00.000Z') }
  ])
  const found = await store.searchHistory('seg', { indicator_value: 'evil.example' }, 10, null)
  assert.deepEqual(found.results.map((r) => r.request_id), ['old-b', 'old-b', 'old-a'])
})
