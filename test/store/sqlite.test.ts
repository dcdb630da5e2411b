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
    assert.deepEqual(raw.prepare('SELECT version FROM schema_version').pluck().all(), [1])
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
