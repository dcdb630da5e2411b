/**
 * PostgreSQL specifics: credentials never leak into errors, concurrent migrations, concurrent batches.
 * Tests that need a server read IOC_TEST_DATABASE_URL and are skipped without it.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { test, type TestContext } from 'node:test'
import pg from 'pg'
import { toRows } from '../../src/history/rows.ts'
import { PostgresStore } from '../../src/store/postgres.ts'
import type { HistoryRecord } from '../../src/store/types.ts'
import { historyRecord } from '../fixtures/history-record.ts'

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
  assert.deepEqual(rows, [1, 2, 3, 4, 5, 6, 7, 8].map((version) => ({ version })))
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
