/**
 * PostgreSQL specifics: credentials never leak into errors, concurrent migrations, concurrent batches.
 * Tests that need a server read IOC_TEST_DATABASE_URL and are skipped without it.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { test, type TestContext } from 'node:test'
import pg from 'pg'
import { rowParts } from '../../src/history/blocks.ts'
import { toRows } from '../../src/history/rows.ts'
import { PostgresStore } from '../../src/store/postgres.ts'
import { kPostgresMigrations } from '../../src/store/migrations/postgres/index.ts'
import type { HistoryRecord } from '../../src/store/types.ts'
import { historyRecord } from '../fixtures/history-record.ts'
import { readPostgresHistory, waitFor } from '../fixtures/read-history.ts'

const kDatabaseUrl = process.env.IOC_TEST_DATABASE_URL
const kSkip = kDatabaseUrl === undefined || kDatabaseUrl === '' ? 'IOC_TEST_DATABASE_URL not set' : null

/** A test's own schema on the test server: its stores, and an admin client for checks. */
interface Fresh { schema: string, stores: PostgresStore[], admin: pg.Client }

/**
 * Opens `count` stores of `max` connections on a new schema; after the test they close and the schema is dropped.
 * Null (the test is skipped) without IOC_TEST_DATABASE_URL.
 */
async function freshSchema (t: TestContext, count: number, max: number): Promise<Fresh | null> {
  if (kSkip !== null) {
    t.skip(kSkip)
    return null
  }
  const url = kDatabaseUrl as string
  const schema = `iocv_test_${randomBytes(6).toString('hex')}`
  const stores = Array.from({ length: count }, () => new PostgresStore({ url, schema, max }))
  const admin = new pg.Client({ connectionString: url })
  await admin.connect()
  t.after(async () => {
    for (const s of stores) await s.close()
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
    await admin.end()
  })
  return { schema, stores, admin }
}

/** Every text reachable from an error and its causes. */
function texts (err: unknown): string[] {
  const out: string[] = []
  let e = err
  for (let depth = 0; e !== null && e !== undefined && depth < 10; depth++) {
    out.push(String((e as Error).message), String((e as Error).stack), JSON.stringify(e))
    for (const v of Object.values(e as Record<string, unknown>)) if (typeof v === 'string') out.push(v)
    e = (e as { cause?: unknown }).cause
  }
  return out
}

function assertNoSecret (err: unknown, secrets: string[]): void {
  for (const text of texts(err)) {
    for (const s of secrets) assert.ok(!text.includes(s), `error text reveals a secret: ${text}`)
    assert.ok(!/postgres(ql)?:\/\//i.test(text), `error text contains a URL: ${text}`)
  }
}

test('an unreachable database rejects with STORE_UNAVAILABLE and never reveals the URL or its password', async () => {
  const url = 'postgres://iocv_user:Sup3rSecretPw@127.0.0.1:1/iocv?sslmode=disable'
  const store = new PostgresStore({ url, connectionTimeoutMs: 500 })
  try {
    const err = await store.ping().then(() => null, (e: unknown) => e)
    assert.equal((err as { code?: string } | null)?.code, 'STORE_UNAVAILABLE')
    assertNoSecret(err, ['Sup3rSecretPw', url])
  } finally {
    await store.close()
  }
})

test('a malformed connection string is never echoed in the error', async () => {
  const url = 'postgres://iocv_user:Sup3rSecretPw@[not-a-host/db'
  const store = new PostgresStore({ url, connectionTimeoutMs: 500 })
  try {
    const err = await store.ping().then(() => null, (e: unknown) => e)
    assert.ok(err !== null)
    assertNoSecret(err, ['Sup3rSecretPw', url, 'not-a-host'])
  } finally {
    await store.close()
  }
})

test('a schema name that is not a plain lowercase identifier is refused with INVALID_OPTIONS', () => {
  for (const schema of ['Public', 'a-b', 'x"; DROP SCHEMA public; --', '', '1abc', 'a'.repeat(64)]) {
    assert.throws(() => new PostgresStore({ url: 'postgres://127.0.0.1/x', schema }), { code: 'INVALID_OPTIONS' })
  }
})

test('PostgreSQL: stores migrating a new schema together apply each migration once', async (t) => {
  const fresh = await freshSchema(t, 3, 1)
  if (fresh === null) return
  const { schema, stores, admin } = fresh
  await Promise.all(stores.map((s) => s.migrate()))
  const { rows } = await admin.query(`SELECT version FROM "${schema}".schema_version ORDER BY version`)
  assert.deepEqual(rows, kPostgresMigrations.map((_m, i) => ({ version: i + 1 })))
})

test('PostgreSQL: concurrent batches over the same counters neither deadlock nor lose counts', async (t) => {
  const fresh = await freshSchema(t, 1, 8)
  if (fresh === null) return
  const store = fresh.stores[0] as PostgresStore
  await store.migrate()
  const keys = ['keyaaaaaaaaa', 'keybbbbbbbbb', 'keycccccccccc']
  const batch = (b: number): HistoryRecord[] => Array.from({ length: 30 }, (_, i) => historyRecord({
    date: `2024-10-0${1 + (i % 2)}T12:00:00.000Z`,
    request_id: `b${b}-${i}`,
    bulk_request_id: `b${b}`,
    tenant: 'race',
    // Each batch lists the keys in a different order: without sorted upserts this is the classic deadlock.
    apikey: keys[(i + b) % keys.length] as string,
    indicator: { type: 'ip', value: `198.51.100.${i}`, normalized: `198.51.100.${i}` }
  }))
  await Promise.all(Array.from({ length: 16 }, (_, b) => store.writeHistory(batch(b))))
  const total = (await store.usage('race', null, '2024-10-01')).total + (await store.usage('race', null, '2024-10-02')).total
  assert.equal(total, 16 * 30)
})

test('PostgreSQL: a batch becomes part and request rows with consecutive ids, in one open block per tenant and day, in day partitions', async (t) => {
  const fresh = await freshSchema(t, 1, 2)
  if (fresh === null) return
  const { schema, admin } = fresh
  const store = fresh.stores[0] as PostgresStore
  await store.migrate()
  const rows = (n: number, uid: string, request: string, tenant = 'layout', date = '2024-01-01T00:00:00.000Z'): ReturnType<typeof toRows> =>
    toRows(Array.from({ length: n }, (_, i) => historyRecord({
      date, request_id: request, tenant, indicator: { type: 'ip', value: `192.0.2.${i}`, normalized: null }
    }))).map((r) => ({ ...r, uid }))
  await store.writeHistoryRows(rows(3, 'a', 'ra'))
  await store.writeHistoryRows(rows(2, 'a', 'ra')) // the same request continued in the next batch
  await store.writeHistoryRows([...rows(4, 'b', 'rb'), ...rows(1, 'c', 'rc', 'other'), ...rows(2, 'd', 'rd', 'layout', '2024-01-02T12:00:00.000Z')])
  const q = async (sql: string): Promise<unknown[]> => (await admin.query(sql.replaceAll('$s', `"${schema}"`))).rows
  assert.deepEqual(await q('SELECT uid, first_item::int AS first, last_item::int AS last FROM $s.history_requests ORDER BY id'), [
    { uid: 'a', first: 1, last: 3 }, { uid: 'a', first: 4, last: 5 }, { uid: 'b', first: 6, last: 9 }, { uid: 'c', first: 10, last: 10 }, { uid: 'd', first: 11, last: 12 }
  ])
  const parts = await q('SELECT day::text, id::int, n, req::int, block::int FROM $s.history_parts ORDER BY id') as Array<{ block: number }>
  const [b1, b2, b3] = [parts[0]?.block, parts[3]?.block, parts[4]?.block]
  assert.deepEqual(parts, [
    { day: '2024-01-01', id: 1, n: 3, req: 1, block: b1 }, { day: '2024-01-01', id: 4, n: 2, req: 2, block: b1 },
    { day: '2024-01-01', id: 6, n: 4, req: 3, block: b1 }, { day: '2024-01-01', id: 10, n: 1, req: 4, block: b2 },
    { day: '2024-01-02', id: 11, n: 2, req: 5, block: b3 }
  ])
  assert.deepEqual(await q('SELECT id::int, day::text, tenant, n, open FROM $s.history_blocks ORDER BY day, tenant'), [
    { id: b1, day: '2024-01-01', tenant: 'layout', n: 9, open: true }, { id: b2, day: '2024-01-01', tenant: 'other', n: 1, open: true },
    { id: b3, day: '2024-01-02', tenant: 'layout', n: 2, open: true }
  ])
  // Each day's three partitions, and the next day's, made ahead of the first batch after midnight.
  const tables = (await q(`SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE nspname = '${schema}' ` +
    "AND relname ~ '_d2024010[1-3]$' ORDER BY relname")).map((r) => (r as { relname: string }).relname)
  assert.deepEqual(tables, ['blocks', 'parts', 'requests'].flatMap((k) => ['01', '02', '03'].map((d) => `history_${k}_d202401${d}`)))
  const page = await store.searchHistory('layout', {}, 100, null)
  assert.deepEqual(page.results.map((r) => `${r.request_id}:${r.indicator.value}`), [
    'rd:192.0.2.1', 'rd:192.0.2.0', 'rb:192.0.2.3', 'rb:192.0.2.2', 'rb:192.0.2.1', 'rb:192.0.2.0',
    'ra:192.0.2.1', 'ra:192.0.2.0', 'ra:192.0.2.2', 'ra:192.0.2.1', 'ra:192.0.2.0'
  ])
})

test('PostgreSQL: a batch calls its meanwhile once, after its statements are sent and before the write settles', async (t) => {
  const fresh = await freshSchema(t, 1, 2)
  if (fresh === null) return
  const { schema, admin } = fresh
  const store = fresh.stores[0] as PostgresStore
  await store.migrate()
  const parts = rowParts(toRows(Array.from({ length: 3 }, (_, i) => historyRecord({
    date: '2024-01-01T00:00:00.000Z', request_id: 'rm', tenant: 'meanwhile', indicator: { type: 'ip', value: `192.0.2.${i}`, normalized: null }
  }))))
  const calls: string[] = []
  const writing = store.writeHistoryParts(parts, { journal: 'j', position: 7 }, () => { calls.push('meanwhile') })
  void writing.then(() => calls.push('settled'))
  await writing
  assert.deepEqual(calls, ['meanwhile', 'settled'])
  const q = async (sql: string): Promise<unknown[]> => (await admin.query(sql.replaceAll('$s', `"${schema}"`))).rows
  assert.deepEqual(await q('SELECT sum(n)::int AS n FROM $s.history_parts'), [{ n: 3 }])
  assert.equal(await store.journalPosition('j'), 7)
  // A mark alone commits too, and calls it once.
  calls.length = 0
  await store.writeHistoryParts([], { journal: 'j', position: 9 }, () => { calls.push('mark') })
  assert.deepEqual(calls, ['mark'])
  assert.equal(await store.journalPosition('j'), 9)
  // A batch the server refuses (a mark that is not a safe integer) fails before its commit: no call.
  calls.length = 0
  await assert.rejects(store.writeHistoryParts(parts, { journal: 'j', position: 2 ** 60 }, () => { calls.push('refused') }),
    { code: 'INVALID_REQUEST' })
  assert.deepEqual(calls, [])
  assert.deepEqual(await q('SELECT sum(n)::int AS n FROM $s.history_parts'), [{ n: 3 }])
})

test('PostgreSQL: a block a batch does not fit in is closed, and a tenant and day keeps one open block', async (t) => {
  const fresh = await freshSchema(t, 1, 2)
  if (fresh === null) return
  const { schema, admin } = fresh
  const store = fresh.stores[0] as PostgresStore
  await store.migrate()
  const batch = (b: number): ReturnType<typeof toRows> => toRows(Array.from({ length: 10_000 }, (_, i) => historyRecord({
    date: '2024-03-01T00:00:00.000Z', request_id: `r${b}`, tenant: 'fill', indicator: { type: 'ip', value: `10.${b}.${i >> 8}.${i & 255}`, normalized: null }
  })))
  const blocks = async (): Promise<unknown[]> =>
    (await admin.query(`SELECT n, open FROM "${schema}".history_blocks ORDER BY id`)).rows
  // 10,000 items fit a block once: each later batch starts a block and closes the one before, which it did not join.
  for (let b = 0; b < 3; b++) await store.writeHistoryRows(batch(b))
  assert.deepEqual(await blocks(), [{ n: 10_000, open: false }, { n: 10_000, open: false }, { n: 10_000, open: true }])
  // A block left open by an earlier version beside the newest: the next batch closes it too.
  await admin.query(`UPDATE "${schema}".history_blocks SET open = true WHERE id = (SELECT min(id) FROM "${schema}".history_blocks)`)
  await store.writeHistoryRows(batch(3))
  assert.deepEqual(await blocks(), [{ n: 10_000, open: false }, { n: 10_000, open: false }, { n: 10_000, open: false }, { n: 10_000, open: true }])
  const found = await store.searchHistory('fill', { indicator_value: '10.1.3.7' }, 10, null)
  assert.deepEqual(found.results.map((r) => r.request_id), ['r1'])
})

/** Rows of schema version 7 (one row per indicator), inserted as that version's writer stored them. */
async function insertRowHistory (admin: pg.Client, schema: string, requests: HistoryRecord[][]): Promise<void> {
  const s = `"${schema}"`
  let item = 0
  for (const [i, records] of requests.entries()) {
    const rows = toRows(records)
    const r0 = rows[0] as (typeof rows)[number]
    const first = item + 1
    await admin.query(
      `INSERT INTO ${s}.history_requests (id, uid, date, tenant, request_id, bulk_request_id, http_status, auth_type, apikey, user_id, envelope, ` +
      'first_item, last_item) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)',
      [i + 1, r0.uid, r0.date, r0.tenant, r0.requestId, r0.bulkRequestId, r0.httpStatus, r0.authType, r0.apikey, r0.userId, r0.envelope, first, first + rows.length - 1])
    await admin.query(
      `INSERT INTO ${s}.history (id, req, date, tenant, indicator_type, indicator_value, indicator_normalized, item) ` +
      'SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::timestamptz[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])',
      [rows.map((_, k) => first + k), rows.map(() => i + 1), rows.map((r) => r.date), rows.map((r) => r.tenant), rows.map((r) => r.indicatorType),
        rows.map((r) => r.indicatorValue), rows.map((r) => r.indicatorNormalized), rows.map((r) => r.item)])
    item += rows.length
  }
}

test('PostgreSQL: history rows of schema version 7 move into parts; a move interrupted mid-way resumes with nothing lost or written twice', async (t) => {
  const fresh = await freshSchema(t, 0, 1)
  if (fresh === null) return
  const { schema, admin } = fresh
  const url = kDatabaseUrl as string
  const open = (): PostgresStore => {
    const s = new PostgresStore({ url, schema, max: 2, moveBatch: 30 })
    t.after(async () => await s.close())
    return s
  }
  const store = open()
  await store.migrate(7)
  // 20 requests of 10 records, on 2024-03-01 (the first 10) and 2024-03-03, two tenants, some values repeated.
  const requests = Array.from({ length: 20 }, (_, i) => Array.from({ length: 10 }, (_, k) => historyRecord({
    date: `2024-03-0${i < 10 ? 1 : 3}T10:${String(i).padStart(2, '0')}:00.000Z`,
    request_id: `old-${i}`,
    bulk_request_id: i % 2 === 0 ? `bulk-${i}` : null,
    tenant: i % 3 === 0 ? 'other' : 'moved',
    indicator: k === 0 ? { type: 'domain', value: 'evil.example', normalized: 'evil.example' } : { type: 'ip', value: `198.51.100.${i * 10 + k}`, normalized: null }
  })))
  await insertRowHistory(admin, schema, requests)
  await admin.query(`INSERT INTO "${schema}".usage (tenant, day, key_id, count) VALUES ('moved', '2024-03-01', 'aaaaaaaaaaaa', 70)`)
  const searchAll = async (s: PostgresStore, tenant: string, filters: object): Promise<string[]> => {
    const out: string[] = []
    let cursor: string | null = null
    do {
      const page = await s.searchHistory(tenant, filters, 7, cursor)
      out.push(...page.results.map((r) => `${r.request_id}:${r.indicator.value}`))
      cursor = page.next_cursor
    } while (cursor !== null)
    return out
  }

  // Schema version 8, then one record written by the new version: it makes 2024-03-01's partitions (and the next
  // day's), so the move's first chunks need no new partition and its chunk reaching 2024-03-03 does.
  await store.migrate(8)
  const live = historyRecord({ date: '2024-03-01T23:00:00.000Z', request_id: 'live', tenant: 'moved', indicator: { type: 'domain', value: 'evil.example', normalized: 'evil.example' } })
  await store.writeHistory([live])
  const daysLock = `SELECT pg_advisory_lock(hashtext('ioc-verdict:history-days:${schema}'))`
  await admin.query(daysLock)
  // Its outcome is taken at once: the termination below may reject it before the test's own await is reached.
  const moving = store.migrate().then(() => null, (err: unknown) => err as { code?: string })
  /** The backend waiting for a lock that the connection `blocker` holds. */
  const waitingFor = async (blocker: pg.Client): Promise<number> => {
    const { rows: [me] } = await blocker.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')
    return await waitFor('the mover to wait on a lock', async () => (await admin.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [me?.pid])).rows[0]?.pid)
  }
  await waitingFor(admin)
  const moved = async (): Promise<number> => Number((await admin.query(`SELECT request FROM "${schema}".history_rows_moved`)).rows[0]?.request)
  const before = await moved()
  assert.ok(before >= 3 && before < 11, `chunks of 2024-03-01 are moved, none of 2024-03-03 (${before})`)
  // Then the next chunk is held inside its transaction, its parts copied, at its progress update, and cut off there.
  const locker = new pg.Client({ connectionString: url })
  await locker.connect()
  try {
    await locker.query('BEGIN')
    await locker.query(`SELECT * FROM "${schema}".history_rows_moved FOR UPDATE`)
    await admin.query(daysLock.replace('pg_advisory_lock', 'pg_advisory_unlock'))
    const mover = await waitingFor(locker)
    await admin.query('SELECT pg_terminate_backend($1)', [mover])
    assert.equal((await moving)?.code, 'STORE_UNAVAILABLE')
  } finally {
    await locker.end() // its row lock goes with it, whatever happened
  }
  assert.equal(await moved(), before, 'the interrupted chunk left nothing')
  assert.equal((await readPostgresHistory(admin, schema)).length, before * 10 + 1)

  // A restart finishes the move.
  const again = open()
  await again.migrate()
  assert.equal((await admin.query(`SELECT to_regclass('"${schema}".history_rows') AS t`)).rows[0]?.t, null, 'the row tables are gone')
  const stored = await readPostgresHistory(admin, schema)
  const want = [...requests.flat(), live]
  assert.deepEqual(stored.map((r) => r.record), want, 'every record once, in id order')
  assert.deepEqual(stored.map((r) => r.id).slice(0, 200), Array.from({ length: 200 }, (_, i) => i + 1), 'item ids kept')
  assert.ok((stored[200]?.id ?? 0) > 200, 'the new version\'s ids continue above them')
  const newest = (tenant: string, keep: (r: HistoryRecord) => boolean): string[] =>
    want.map((r, i) => ({ r, i })).filter((x) => x.r.tenant === tenant && keep(x.r))
      .sort((a, b) => (a.r.date < b.r.date ? 1 : a.r.date > b.r.date ? -1 : b.i - a.i)).map((x) => `${x.r.request_id}:${x.r.indicator.value}`)
  assert.deepEqual(await searchAll(again, 'moved', {}), newest('moved', () => true))
  assert.deepEqual(await searchAll(again, 'moved', { indicator_value: 'evil.example' }), newest('moved', (r) => r.indicator.value === 'evil.example'))
  assert.deepEqual(await searchAll(again, 'other', { exclude_bulk_requests: true }), newest('other', (r) => r.bulk_request_id === null))
  assert.equal(await again.usageForKey('aaaaaaaaaaaa', '2024-03-01'), 71, 'the move counts nothing again')
})

test('PostgreSQL: purge drops the partitions of each day wholly before the cutoff; another instance then writing to such a day makes them again', async (t) => {
  const fresh = await freshSchema(t, 2, 2)
  if (fresh === null) return
  const { schema, admin } = fresh
  const [a, b] = fresh.stores as [PostgresStore, PostgresStore]
  await a.migrate()
  const record = (date: string, id: string): HistoryRecord => historyRecord({ date, request_id: id, tenant: 'purge', apikey: 'keypurgeaaaa' })
  await a.writeHistory([record('2024-05-01T00:00:00.000Z', 'd1-a'), record('2024-05-01T23:59:59.999Z', 'd1-b'), record('2024-05-02T12:00:00.000Z', 'd2'),
    record('2024-05-04T00:00:00.000Z', 'd4')])
  const days = async (): Promise<string[]> => (await admin.query<{ relname: string }>(
    `SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE nspname = '${schema}' AND relname ~ '^history_parts_d\\d{8}$' ORDER BY 1`))
    .rows.map((r) => r.relname.slice(-8))
  assert.deepEqual(await days(), ['20240501', '20240502', '20240503', '20240504', '20240505'])
  const ids = async (): Promise<string[]> => (await a.searchHistory('purge', {}, 100, null)).results.map((r) => r.request_id)
  // 2024-05-02T12:00 cuts 2024-05-02: only 2024-05-01 ended before it; its records and its three partitions go.
  assert.equal(await b.purgeHistory(new Date('2024-05-02T12:00:00.000Z')), 2)
  assert.deepEqual(await days(), ['20240502', '20240503', '20240504', '20240505'])
  assert.equal((await admin.query(`SELECT count(*)::int AS n FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE nspname = '${schema}' AND relname ~ '_d20240501$' AND relkind IN ('r', 'p')`)).rows[0]?.n, 0)
  assert.deepEqual(await ids(), ['d4', 'd2'])
  assert.equal(await a.usageForKey('keypurgeaaaa', '2024-05-01'), 2, 'billing counters survive the purge')
  // A day that ended exactly at the cutoff goes too.
  assert.equal(await b.purgeHistory(new Date('2024-05-03T00:00:00.000Z')), 1)
  assert.deepEqual(await ids(), ['d4'])
  // Store a had seen 2024-05-01's partitions: writing there again, it makes them anew (a late replay of an old record).
  await a.writeHistory([record('2024-05-01T08:00:00.000Z', 'late')])
  assert.deepEqual(await ids(), ['d4', 'late'])
  assert.equal(await a.purgeHistory(new Date('2024-05-02T00:00:00.000Z')), 1)
})

test('PostgreSQL: a new day partition keeps its parts lz4-compressed where the server has lz4, and they read back whole', async (t) => {
  const fresh = await freshSchema(t, 1, 2)
  if (fresh === null) return
  const { schema, admin } = fresh
  const store = fresh.stores[0] as PostgresStore
  await store.migrate()
  const lz4 = (await admin.query<{ lz4: boolean }>("SELECT 'lz4' = ANY (enumvals) AS lz4 FROM pg_settings WHERE name = 'default_toast_compression'")).rows[0]?.lz4 === true
  // One request of 3,000 records: a part of many kilobytes, which PostgreSQL moves out of line (TOAST) and compresses.
  const records = Array.from({ length: 3000 }, (_, i) => historyRecord({
    date: '2024-06-01T10:00:00.000Z', tenant: 'lz4', request_id: 'big', bulk_request_id: 'bulk-big', indicator: { type: 'domain', value: `host-${i}.example`, normalized: `host-${i}.example` }
  }))
  await store.writeHistory(records)
  const { rows } = await admin.query<{ method: string | null, stored: number, raw: number }>(
    `SELECT pg_column_compression(part) AS method, pg_column_size(part) AS stored, octet_length(part) AS raw FROM "${schema}".history_parts`)
  assert.ok(rows.length > 0)
  for (const r of rows) {
    if (lz4) {
      assert.equal(r.method, 'lz4')
      assert.ok(r.stored < r.raw, `compressed: ${r.stored} of ${r.raw} bytes`)
    } else {
      assert.equal(r.method, null, 'stored as it is without lz4')
    }
  }
  const values: string[] = []
  for (let cursor: string | null = null; ;) {
    const page = await store.searchHistory('lz4', {}, 1000, cursor)
    values.push(...page.results.map((r) => r.indicator.value))
    if (page.next_cursor === null) break
    cursor = page.next_cursor
  }
  assert.deepEqual(values, records.map((r) => r.indicator.value).reverse())
})
