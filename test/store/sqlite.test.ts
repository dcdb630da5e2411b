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
import { toRows } from '../../src/history/rows.ts'
import { SqliteStore } from '../../src/store/sqlite.ts'
import { kBlockItems } from '../../src/history/blocks.ts'
import { storedItems } from '../../src/history/sqlite-search.ts'
import type { HistoryRecord, SearchFilters } from '../../src/store/types.ts'
import { HistoryItems, type HistoryPart } from '../../src/history/block.ts'
import { historyParts } from '../../src/history/codec.ts'
import { kInvalidVerdictMembers } from '../../src/history/record.ts'
import type { HistoryEnvelope } from '../../src/history/types.ts'
import { historyEnvelope, historyRecord, itemFragment } from '../fixtures/history-record.ts'

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
    assert.deepEqual(raw.prepare('SELECT version FROM schema_version').pluck().all(), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14])
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
  assert.deepEqual(storedItems(raw).map((r) => [r.id, (JSON.parse(r.envelope) as { request_id: string }).request_id]), [
    [1, 'ra'], [2, 'ra'], [3, 'ra'], [4, 'ra'], [5, 'ra'], [6, 'rb'], [7, 'rb'], [8, 'rb'], [9, 'rb'], [10, 'ra']
  ])
  // One part per batch's run, each filed under its request; all four joined the tenant's one open block.
  assert.deepEqual(raw.prepare('SELECT id, n, req, block FROM history_parts ORDER BY id').all(), [
    { id: 1, n: 3, req: 1, block: 1 }, { id: 4, n: 2, req: 1, block: 1 }, { id: 6, n: 4, req: 2, block: 1 }, { id: 10, n: 1, req: 3, block: 1 }
  ])
  assert.deepEqual(raw.prepare('SELECT id, n, open FROM history_blocks').all(), [{ id: 1, n: 10, open: 1 }])
  // Only the request-level fields, once per request; each item holds the indicator's members.
  const envelope = JSON.parse(raw.prepare('SELECT envelope FROM history_requests WHERE id = 2').pluck().get() as string) as Record<string, unknown>
  assert.equal(envelope.request_id, 'rb')
  assert.equal('indicator' in envelope, false)
  assert.match(storedItems(raw)[5]?.item ?? '', /^"indicator":\{"type":"ip"/)
  assert.equal((await store.searchHistory('layout', {}, 100, null)).results.length, 10)
})

/** Records of one request at `date`: `n` filler indicators, `value` at the given positions. */
function valueRecords (n: number, date: string, request: string, value: string, at: number[]): HistoryRecord[] {
  return Array.from({ length: n }, (_, i) => historyRecord({
    tenant: 'seg',
    date,
    request_id: request,
    indicator: at.includes(i) ? { type: 'domain', value, normalized: value } : { type: 'ip', value: `10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`, normalized: null }
  }))
}

test('a value search reads blocks newest first and returns every match once, in order, and purge keeps it exact', async (t) => {
  const path = join(tempDir(t), 's.db')
  const store = new SqliteStore({ path })
  t.after(() => store.close())
  store.migrateSync()
  const at = (hour: number): string => `2024-05-01T${String(hour).padStart(2, '0')}:00:00.000Z`
  // r12 fills the first block and starts the second. r13 and r12b join the second (r12b ranks before r12: same
  // date, higher ids), and a filler without matches closes it. r11 comes later but is older, as a spool replay would
  // be; r10 and r14 then join the third block, whose date range spans both.
  await store.writeHistory(valueRecords(kBlockItems + 5, at(12), 'r12', 'evil.example', [10, kBlockItems + 2]))
  await store.writeHistory(valueRecords(2, at(13), 'r13', 'evil.example', [0]))
  await store.writeHistory(valueRecords(3, at(12), 'r12b', 'evil.example', [0, 1, 2]))
  await store.writeHistory(valueRecords(kBlockItems - 10, at(9), 'r09', 'evil.example', []))
  await store.writeHistory(valueRecords(3, at(11), 'r11', 'evil.example', [0, 1, 2]))
  await store.writeHistory([...valueRecords(2, at(10), 'r10', 'evil.example', [1]), ...valueRecords(1, at(14), 'r14', 'evil.example', [0])])
  const raw = new Database(path, { readonly: true })
  t.after(() => raw.close())
  const hour = (h: number): number => Date.parse(at(h))
  assert.deepEqual(raw.prepare('SELECT n, min_ts, max_ts, open FROM history_blocks ORDER BY id').all(), [
    { n: kBlockItems, min_ts: hour(12), max_ts: hour(12), open: 0 },
    { n: kBlockItems, min_ts: hour(9), max_ts: hour(13), open: 0 },
    { n: 6, min_ts: hour(10), max_ts: hour(14), open: 1 }
  ])
  const expected = ['r14', 'r13', 'r12b', 'r12b', 'r12b', 'r12', 'r12', 'r11', 'r11', 'r11', 'r10']
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
  // The same rows through the type filter, which reads blocks by their type mask.
  const domains = await store.searchHistory('seg', { indicator_type: 'domain' }, 100, null)
  assert.deepEqual(domains.results.map((r) => r.request_id), expected)
  // Date filters pick blocks by their range, then rows by their own dates.
  const window = await store.searchHistory('seg', { indicator_value: 'evil.example', date_gte: at(11), date_lt: at(12) }, 10, null)
  assert.deepEqual(window.results.map((r) => r.request_id), ['r11', 'r11', 'r11'])
  const late = await store.searchHistory('seg', { indicator_value: 'evil.example', date_gte: at(13) }, 10, null)
  assert.deepEqual(late.results.map((r) => r.request_id), ['r14', 'r13'])
  assert.deepEqual((await store.searchHistory('seg', { indicator_value: 'absent.example' }, 10, null)).results, [])
  assert.deepEqual((await store.searchHistory('seg', { indicator_value: 'evil.exampl' }, 10, null)).results, [])
  assert.deepEqual((await store.searchHistory('other', { indicator_value: 'evil.example' }, 10, null)).results, [])
  // Purge deletes the old requests with their parts; blocks stay while they hold newer parts.
  assert.equal(await store.purgeHistory(new Date(at(12))), kBlockItems - 10 + 3 + 2)
  assert.equal(raw.prepare('SELECT count(*) FROM history_blocks').pluck().get(), 3)
  const kept = expected.filter((r) => r !== 'r11' && r !== 'r10')
  assert.deepEqual((await store.searchHistory('seg', { indicator_value: 'evil.example' }, 100, null)).results.map((r) => r.request_id), kept)
  assert.deepEqual((await store.searchHistory('seg', { indicator_type: 'domain' }, 100, null)).results.map((r) => r.request_id), kept)
  assert.equal(storedItems(raw).length, kBlockItems + 5 + 2 + 3 + 1)
  assert.equal(await store.purgeHistory(new Date(at(15))), kBlockItems + 5 + 2 + 3 + 1)
  assert.equal(raw.prepare('SELECT count(*) FROM history_blocks').pluck().get(), 0)
  assert.equal(raw.prepare('SELECT count(*) FROM history_parts').pluck().get(), 0)
  assert.deepEqual((await store.searchHistory('seg', {}, 10, null)).results, [])
})

test('a database of schema version 2 is upgraded: its items move into blocks with their ids, and searches find them', async (t) => {
  const path = join(tempDir(t), 'v2.db')
  const old = new SqliteStore({ path })
  old.migrateSync(2)
  await old.close()
  // Rows as version 2 stored them: two tenants interleaved, so each tenant's ids are not one range.
  const raw = new Database(path)
  const rows = toRows([
    ...valueRecords(3, '2024-05-01T10:00:00.000Z', 'old-a', 'evil.example', [1]),
    ...valueRecords(2, '2024-05-01T11:00:00.000Z', 'old-b', 'evil.example', [0, 1]).map((r) => ({ ...r, tenant: 'other' })),
    ...valueRecords(2, '2024-05-01T12:00:00.000Z', 'old-c', 'evil.example', [0])
  ])
  const request = raw.prepare('INSERT INTO history_requests (uid, ts, tenant, request_id, bulk_request_id, http_status, auth_type, apikey, user_id, envelope, first_item, last_item) ' +
    'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)')
  const item = raw.prepare('INSERT INTO history (id, req, ts, tenant, indicator_type, indicator_value, indicator_normalized, item) VALUES (?, ?, ?, ?, ?, ?, ?, ?)')
  for (const [first, last] of [[1, 3], [4, 5], [6, 7]] as const) {
    const r = rows[first - 1] as (typeof rows)[number]
    const req = Number(request.run(r.uid, r.ts, r.tenant, r.requestId, r.bulkRequestId, r.httpStatus, r.authType, r.apikey, r.userId, r.envelope, first, last).lastInsertRowid)
    for (let id = first; id <= last; id++) {
      const x = rows[id - 1] as (typeof rows)[number]
      item.run(id, req, x.ts, x.tenant, x.indicatorType, x.indicatorValue, x.indicatorNormalized, x.item)
    }
  }
  raw.close()
  const store = new SqliteStore({ path })
  t.after(() => store.close())
  await store.migrate()
  const check = new Database(path, { readonly: true })
  t.after(() => check.close())
  assert.deepEqual(check.prepare('SELECT version FROM schema_version ORDER BY version').pluck().all(), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14])
  assert.deepEqual(check.prepare("SELECT name FROM sqlite_master WHERE name IN ('history', 'history_segments')").pluck().all(), [])
  assert.deepEqual(check.prepare('SELECT id, n, req, block FROM history_parts ORDER BY id').all(), [
    { id: 1, n: 3, req: 1, block: 1 }, { id: 4, n: 2, req: 2, block: 2 }, { id: 6, n: 2, req: 3, block: 1 }
  ])
  assert.deepEqual(check.prepare('SELECT id, n, tenant FROM history_blocks ORDER BY id').all(), [{ id: 1, n: 5, tenant: 'seg' }, { id: 2, n: 2, tenant: 'other' }])
  assert.deepEqual(storedItems(check).map((r) => r.id), [1, 2, 3, 4, 5, 6, 7])
  const found = await store.searchHistory('seg', { indicator_value: 'evil.example' }, 10, null)
  assert.deepEqual(found.results.map((r) => r.request_id), ['old-c', 'old-a'])
  assert.deepEqual((await store.searchHistory('other', { indicator_value: 'evil.example' }, 10, null)).results.map((r) => r.request_id), ['old-b', 'old-b'])
  assert.deepEqual((await store.searchHistory('seg', {}, 10, null)).results.map((r) => r.indicator.value),
    ['10.0.0.1', 'evil.example', '10.0.0.2', 'evil.example', '10.0.0.0'])
  // New items continue the ids.
  await store.writeHistory(valueRecords(1, '2024-05-02T00:00:00.000Z', 'new', 'evil.example', [0]))
  assert.deepEqual(storedItems(check).map((r) => r.id), [1, 2, 3, 4, 5, 6, 7, 8])
})

/** The envelope of a request of tenant `tenant`, as the service hands it to the writer. */
function partsEnvelope (tenant: string, request: string, date: string, count: number): HistoryEnvelope {
  return historyEnvelope({ tenant, request_id: request, date, count, apikey: 'keypartsaaaa' })
}

/** One encoded part of domain indicators, as a scoring worker makes it. */
function encoded (values: string[]): Uint8Array {
  const items = new HistoryItems(values.length)
  for (const v of values) items.add('domain', v, v, itemFragment({ type: 'domain', value: v, normalized: v }, kInvalidVerdictMembers, null, null))
  return items.encode()
}

test('one batch of parts from several tenants and requests: ids in arrival order, one block per tenant, each part filed under its request', async (t) => {
  const path = join(tempDir(t), 'p.db')
  const store = new SqliteStore({ path })
  t.after(() => store.close())
  store.migrateSync()
  const parts: HistoryPart[] = []
  historyParts(partsEnvelope('A', 'a1', '2024-07-01T00:00:02.000Z', 3), [encoded(['x.example', 'y.example']), encoded(['z.example'])], parts)
  historyParts(partsEnvelope('B', 'b1', '2024-07-01T00:00:01.000Z', 1), [encoded(['x.example'])], parts)
  historyParts(partsEnvelope('A', 'a2', '2024-07-01T00:00:01.000Z', 1), [encoded(['x.example'])], parts)
  historyParts(partsEnvelope('A', 'a3', '2024-07-01T00:00:00.000Z', 0), [encoded([])], parts)
  assert.equal(parts.length, 4, 'a request without records gives no part')
  await store.writeHistoryParts(parts)
  const raw = new Database(path, { readonly: true })
  t.after(() => raw.close())
  assert.deepEqual(raw.prepare('SELECT id, n, tenant FROM history_blocks ORDER BY id').all(), [{ id: 1, n: 4, tenant: 'A' }, { id: 2, n: 1, tenant: 'B' }])
  assert.deepEqual(raw.prepare('SELECT id, n, req, block FROM history_parts ORDER BY id').all(), [
    { id: 1, n: 2, req: 1, block: 1 }, { id: 3, n: 1, req: 1, block: 1 }, { id: 4, n: 1, req: 2, block: 2 }, { id: 5, n: 1, req: 3, block: 1 }
  ])
  assert.deepEqual(raw.prepare('SELECT id, tenant, request_id, first_item, last_item FROM history_requests ORDER BY id').all(), [
    { id: 1, tenant: 'A', request_id: 'a1', first_item: 1, last_item: 3 },
    { id: 2, tenant: 'B', request_id: 'b1', first_item: 4, last_item: 4 },
    { id: 3, tenant: 'A', request_id: 'a2', first_item: 5, last_item: 5 }
  ])
  const values = async (tenant: string, filters: SearchFilters): Promise<string[]> =>
    (await store.searchHistory(tenant, filters, 10, null)).results.map((r) => `${r.request_id}:${r.indicator.value}`)
  assert.deepEqual(await values('A', {}), ['a1:z.example', 'a1:y.example', 'a1:x.example', 'a2:x.example'])
  assert.deepEqual(await values('A', { indicator_value: 'x.example' }), ['a1:x.example', 'a2:x.example'])
  assert.deepEqual(await values('B', { indicator_value: 'x.example' }), ['b1:x.example'])
  assert.deepEqual(await values('B', { indicator_type: 'domain' }), ['b1:x.example'])
  assert.deepEqual(await values('B', { indicator_type: 'ip' }), [])
  assert.deepEqual(await store.usage('A', null, '2024-07-01'), { tenant: 'A', day: '2024-07-01', keys: [{ apikey: 'keypartsaaaa', count: 4 }], total: 4 })
})

test('a part of an unknown format is refused as INVALID_RECORD, and nothing of its batch is written', async (t) => {
  const store = new SqliteStore({ path: ':memory:' })
  t.after(() => store.close())
  store.migrateSync()
  const parts: HistoryPart[] = []
  historyParts(partsEnvelope('F', 'f1', '2024-07-02T00:00:00.000Z', 1), [encoded(['ok.example'])], parts)
  historyParts(partsEnvelope('F', 'f2', '2024-07-02T00:00:01.000Z', 1), [encoded(['later.example'])], parts)
  const bad = Buffer.from((parts[1] as HistoryPart).part)
  assert.equal(bad.readUInt32LE(0), 2, 'a part starts with its format')
  bad.writeUInt32LE(3, 0)
  assert.throws(() => store.writeHistoryPartsSync([parts[0] as HistoryPart, { ...(parts[1] as HistoryPart), part: bad }]),
    (err: { code?: string }) => err.code === 'INVALID_RECORD')
  assert.deepEqual((await store.searchHistory('F', {}, 10, null)).results, [])
  assert.equal((await store.usage('F', null, '2024-07-02')).total, 0)
  await store.writeHistoryParts(parts)
  assert.deepEqual((await store.searchHistory('F', {}, 10, null)).results.map((r) => r.indicator.value), ['later.example', 'ok.example'])
})

test('a search that reads more than its budget answers early with a cursor, and paging finds exactly what an unbounded search finds', async (t) => {
  const path = join(tempDir(t), 'budget.db')
  const full = new SqliteStore({ path })
  t.after(() => full.close())
  await full.migrate()
  const at = (day: number, h = 0): string => new Date(Date.UTC(2024, 4, day, h)).toISOString()
  // Four requests of more than a block each, written out of date order, a few matches spread through them.
  await full.writeHistory(valueRecords(kBlockItems + 3, at(10), 'r10', 'evil.example', [0, 5000, kBlockItems + 2]))
  await full.writeHistory(valueRecords(kBlockItems + 3, at(12), 'r12', 'evil.example', [7]))
  await full.writeHistory(valueRecords(kBlockItems + 3, at(11), 'r11', 'evil.example', []))
  await full.writeHistory(valueRecords(kBlockItems + 3, at(13), 'r13', 'evil.example', [1, 2, 3, 9000]))
  await full.writeHistory(valueRecords(5, at(12, 5), 'r12b', 'evil.example', [0, 4]))
  // The newest request fills two blocks of one date, with matches in each: a page cut between them must not return
  // the first block's matches and then, from a cursor at that date, return them again.
  await full.writeHistory(valueRecords(2 * kBlockItems, at(14), 'r14', 'evil.example', [11, kBlockItems + 11]))
  const bounded = new SqliteStore({ path, searchBudget: 5_000 })
  t.after(() => bounded.close())
  const pages = async (store: SqliteStore, filters: SearchFilters, limit: number): Promise<{ rows: string[], short: number }> => {
    const rows: string[] = []
    let short = 0
    let cursor: string | null = null
    for (let n = 0; ; n++) {
      assert.ok(n < 1000, `paging ends: ${JSON.stringify(filters)} ${limit} ${cursor ?? ''} ${Buffer.from(cursor ?? '', 'base64url').toString()}`)
      const page = await store.searchHistory('seg', filters, limit, cursor)
      rows.push(...page.results.map((r) => `${r.request_id} ${r.indicator.value}`))
      cursor = page.next_cursor
      if (cursor === null) break
      if (page.results.length < limit) short++
    }
    return { rows, short }
  }
  // Block scans (a value, a type) and a request walk (a type with a key filter), each reading past the budget.
  for (const filters of [{ indicator_value: 'evil.example' }, { indicator_type: 'domain' }, { indicator_type: 'domain', apikey: 'aaaaaaaaaaaa' }] as SearchFilters[]) {
    for (const limit of [3, 1000]) {
      const want = await pages(full, filters, limit)
      const got = await pages(bounded, filters, limit)
      assert.deepEqual(got.rows, want.rows, JSON.stringify(filters))
      assert.ok(got.short > 0, `the budget cut a page short (${JSON.stringify(filters)}, limit ${limit})`)
      assert.equal(want.short, 0, 'without a budget, only the last page is short')
    }
  }
  assert.equal((await pages(full, { indicator_value: 'evil.example' }, 1000)).rows.length, 12)
  // A request filter the index does not hold (auth_type) is checked as rows arrive, and every row read counts: a
  // filter that matches no request still answers within the budget, page after page, then ends.
  const tiny = new SqliteStore({ path, searchBudget: 2 })
  t.after(() => tiny.close())
  for (const [filters, limit] of [[{ auth_type: 'session' }, 5], [{ auth_type: 'api_key', apikey: 'aaaaaaaaaaaa', indicator_type: 'domain' }, 5],
    [{ apikey: 'aaaaaaaaaaaa', exclude_bulk_requests: true }, 1000]] as Array<[SearchFilters, number]>) {
    const want = await pages(full, filters, limit)
    const got = await pages(tiny, filters, limit)
    assert.deepEqual(got.rows, want.rows, JSON.stringify(filters))
    if (want.rows.length === 0) assert.ok(got.short > 0, `empty pages with a cursor first (${JSON.stringify(filters)})`)
  }
})
