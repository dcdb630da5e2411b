/**
 * GET /api/v2/mgmt/enrich-logs/search-history over HTTP (docs/API.md "Auth, quotas, history"): tenant isolation
 * whatever the filters or cursor, every filter, cursor pagination, and 400/401 for what it refuses.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { HistoryRecord } from '../../src/store/index.ts'
import { build, type Built } from '../helper.ts'
import { keyParts } from '../fixtures/read-history.ts'
import { historyRecord } from '../fixtures/history-record.ts'

const kSearch = '/api/v2/mgmt/enrich-logs/search-history'

interface Page { results: HistoryRecord[], next_cursor: string | null }

async function search (b: Built, key: string | null, query: Record<string, string> = {}): Promise<{ status: number, body: Page & { code?: string } }> {
  const qs = new URLSearchParams(query).toString()
  const res = await b.app.inject({ method: 'GET', url: qs === '' ? kSearch : `${kSearch}?${qs}`, headers: key === null ? {} : { 'x-api-key': key } })
  return { status: res.statusCode, body: res.json() }
}

async function ok (b: Built, key: string, query: Record<string, string> = {}): Promise<Page> {
  const { status, body } = await search(b, key, query)
  assert.equal(status, 200, JSON.stringify(body))
  return body
}

/** Every page of a search, following next_cursor. */
async function allPages (b: Built, key: string, query: Record<string, string>): Promise<{ rows: HistoryRecord[], pages: number }> {
  const rows: HistoryRecord[] = []
  let cursor: string | null = null
  let pages = 0
  do {
    const page: Page = await ok(b, key, cursor === null ? query : { ...query, cursor })
    rows.push(...page.results)
    cursor = page.next_cursor
    pages++
    assert.ok(pages < 1000, 'pagination ends')
  } while (cursor !== null)
  return { rows, pages }
}

function direct (tenant: string, apikey: string, day: number, value: string): HistoryRecord {
  return historyRecord({
    date: new Date(Date.UTC(2024, 0, day)).toISOString(),
    request_id: `direct-${tenant}-${day}`,
    auth_type: 'dashboard',
    tenant,
    apikey,
    indicator: { type: 'ip', value, normalized: value },
    evidence_details: 'summary',
    label_details: 'top',
    user_id: 'u-1'
  })
}

const ids = (rows: HistoryRecord[]): string[] => rows.map((r) => JSON.stringify(r))

test('search-history', async (t) => {
  const b = await build(t)
  const k1 = b.key
  const k1b = await b.makeKey(['verdict', 'verdict_bulk'])
  const k2 = await b.makeKey(['verdict', 'verdict_bulk'], { tenant: 't2' })
  const k2verdictOnly = await b.makeKey(['verdict'], { tenant: 't2' })
  const id1 = keyParts(k1).id
  const id1b = keyParts(k1b).id
  const id2 = keyParts(k2).id

  const single = async (key: string, requestId: string, value: string): Promise<void> => {
    const res = await b.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'x-api-key': key, 'x-request-id': requestId }, payload: { indicator: { value } } })
    assert.equal(res.statusCode, 200)
  }
  const bulk = async (key: string, requestId: string, values: string[]): Promise<void> => {
    const res = await b.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict/bulk', headers: { 'x-api-key': key, 'x-request-id': requestId }, payload: { indicators: values.map((value) => ({ value })) } })
    assert.equal(res.statusCode, 200)
  }
  // Both tenants query overlapping values; dates in 2024 come from records written straight to the store.
  await single(k1, 't1-single', '198.51.100.1')
  await bulk(k1, 't1-bulk', ['198.51.100.1', 'example.com', 'AS13335'])
  await single(k1b, 't1b-single', 'example.com')
  await single(k1, 't1-defanged', '198.51.100[.]1')
  await single(k2, 't2-single', '198.51.100.1')
  await bulk(k2, 't2-bulk', ['198.51.100.1', 'example.com'])
  await b.store.writeHistory([1, 2, 3].map((d) => direct('t1', id1, d, '192.0.2.1')))
  await b.store.writeHistory([1, 2, 3].map((d) => direct('t2', id2, d, '192.0.2.1')))
  await b.history.flush()
  const t1Total = 1 + 3 + 1 + 1 + 3
  const t2Total = 1 + 2 + 3

  await t.test('each tenant sees exactly its own rows, newest first', async () => {
    const a = await ok(b, k1, { limit: '1000' })
    assert.equal(a.results.length, t1Total)
    assert.equal(a.next_cursor, null)
    assert.ok(a.results.every((r) => r.tenant === 't1'))
    const c = await ok(b, k2, { limit: '1000' })
    assert.equal(c.results.length, t2Total)
    assert.ok(c.results.every((r) => r.tenant === 't2'))
    for (const rows of [a.results, c.results]) {
      for (let i = 1; i < rows.length; i++) assert.ok(rows[i - 1]!.date >= rows[i]!.date, 'newest first')
    }
  })

  await t.test('no filter, filter combination or foreign key id returns another tenant\'s rows', async () => {
    const filters: Array<Record<string, string>> = [
      {},
      { apikey: id1 },
      { apikey: id1b },
      { apikey: id2 },
      { indicator_value: '198.51.100.1' },
      { indicator_value: 'example.com', indicator_type: 'domain' },
      { user_id: 'u-1' },
      { auth_type: 'dashboard' },
      { auth_type: 'api_key', exclude_bulk_requests: 'true' },
      { date_gte: '2024-01-01', date_lt: '2100-01-01' },
      { indicator_type: 'ip', apikey: id1, date_gte: '2000-01-01T00:00:00Z' },
      { limit: '1' }
    ]
    for (const f of filters) {
      for (const [key, tenant, foreign] of [[k1, 't1', id2], [k2, 't2', id1], [k2verdictOnly, 't2', id1]] as const) {
        const { rows } = await allPages(b, key, f)
        assert.ok(rows.every((r) => r.tenant === tenant && r.apikey !== foreign), `${tenant} ${JSON.stringify(f)}`)
      }
    }
    // The other tenant's key id as a filter: nothing, not an error.
    assert.equal((await ok(b, k2, { apikey: id1 })).results.length, 0)
    assert.equal((await ok(b, k1, { apikey: id2 })).results.length, 0)
  })

  await t.test('a cursor from one tenant\'s search never pages into that tenant for another', async () => {
    const first = await ok(b, k1, { limit: '2' })
    assert.ok(first.next_cursor !== null)
    const { rows } = await allPages(b, k2, { limit: '2', cursor: first.next_cursor })
    assert.ok(rows.length > 0)
    assert.ok(rows.every((r) => r.tenant === 't2'))
  })

  await t.test('the search is not gated on a history permission: a verdict-only key may search its tenant', async () => {
    assert.equal((await ok(b, k2verdictOnly, { limit: '1000' })).results.length, t2Total)
  })

  await t.test('date_gte is inclusive and date_lt exclusive, with offsets or plain dates', async () => {
    const d = (day: number): string => new Date(Date.UTC(2024, 0, day)).toISOString()
    const range = await ok(b, k1, { date_gte: d(2), date_lt: d(3) })
    assert.deepEqual(range.results.map((r) => r.date), [d(2)])
    assert.deepEqual((await ok(b, k1, { date_gte: '2024-01-02', date_lt: '2024-01-04' })).results.map((r) => r.date), [d(3), d(2)])
    assert.deepEqual((await ok(b, k1, { date_gte: '2024-01-02T01:00:00+01:00', date_lt: '2024-01-02T00:00:00.001Z' })).results.map((r) => r.date), [d(2)])
    assert.deepEqual((await ok(b, k1, { date_lt: '2024-01-02' })).results.map((r) => r.date), [d(1)])
    const recent = await ok(b, k1, { date_gte: '2025-01-01' })
    assert.equal(recent.results.length, t1Total - 3)
  })

  await t.test('user_id, apikey and auth_type filters match exactly', async () => {
    const user = await ok(b, k1, { user_id: 'u-1' })
    assert.equal(user.results.length, 3)
    assert.ok(user.results.every((r) => r.user_id === 'u-1'))
    assert.equal((await ok(b, k1, { user_id: 'u-2' })).results.length, 0)

    const byKey = await ok(b, k1, { apikey: id1b })
    assert.deepEqual(byKey.results.map((r) => r.request_id), ['t1b-single'])
    assert.equal((await ok(b, k1, { apikey: id1 })).results.length, t1Total - 1)

    assert.equal((await ok(b, k1, { auth_type: 'dashboard' })).results.length, 3)
    const api = await ok(b, k1, { auth_type: 'api_key' })
    assert.equal(api.results.length, t1Total - 3)
    assert.ok(api.results.every((r) => r.auth_type === 'api_key'))
  })

  await t.test('exclude_bulk_requests drops every bulk row and keeps every single one', async () => {
    for (const v of ['true', '1']) {
      const rows = (await ok(b, k1, { exclude_bulk_requests: v, limit: '1000' })).results
      assert.equal(rows.length, t1Total - 3)
      assert.ok(rows.every((r) => r.bulk_request_id === null))
    }
    for (const v of ['false', '0']) assert.equal((await ok(b, k1, { exclude_bulk_requests: v })).results.length, t1Total)
  })

  await t.test('indicator_type and indicator_value filter on the type and the value as sent', async () => {
    const domains = await ok(b, k1, { indicator_type: 'domain' })
    assert.deepEqual(domains.results.map((r) => r.indicator.value).sort(), ['example.com', 'example.com'])
    assert.equal((await ok(b, k1, { indicator_type: 'asn' })).results.length, 1)
    assert.equal((await ok(b, k1, { indicator_type: 'file_hash_sha256' })).results.length, 0)
    // The defanged form normalizes to 198.51.100.1 but was sent differently: the value filter matches as sent.
    const value = await ok(b, k1, { indicator_value: '198.51.100.1' })
    assert.deepEqual(value.results.map((r) => r.request_id).sort(), ['t1-bulk', 't1-single'])
    assert.deepEqual((await ok(b, k1, { indicator_value: '198.51.100[.]1' })).results.map((r) => r.request_id), ['t1-defanged'])
    const both = await ok(b, k1, { indicator_value: '198.51.100.1', exclude_bulk_requests: 'true', apikey: id1, auth_type: 'api_key', indicator_type: 'ip' })
    assert.deepEqual(both.results.map((r) => r.request_id), ['t1-single'])
  })

  await t.test('limit 2 pages through every row once, newest first, ending with a null cursor', async () => {
    const full = (await ok(b, k1, { limit: '1000' })).results
    assert.ok(full.length >= 5)
    const { rows, pages } = await allPages(b, k1, { limit: '2' })
    assert.equal(pages, Math.ceil(full.length / 2))
    assert.deepEqual(ids(rows), ids(full))
    assert.equal(new Set(ids(rows)).size, rows.length, 'no duplicates')
    // Pagination composes with filters.
    const filtered = await allPages(b, k1, { limit: '1', user_id: 'u-1' })
    assert.deepEqual(filtered.rows.map((r) => r.date), ['2024-01-03T00:00:00.000Z', '2024-01-02T00:00:00.000Z', '2024-01-01T00:00:00.000Z'])
    // The default page holds everything here; a page of exactly the remaining rows has no next cursor.
    assert.equal((await ok(b, k1)).results.length, t1Total)
    assert.equal((await ok(b, k1, { limit: String(t1Total) })).next_cursor, null)
  })

  await t.test('invalid filter values, limits, cursors and unknown filters are 400 INVALID_REQUEST', async () => {
    const bad: Array<Record<string, string>> = [
      { date_gte: 'yesterday' },
      { date_gte: '2024-13-01' },
      { date_gte: '2024-02-30' },
      { date_lt: '2024-01-01T10:00:00' }, // no offset: which time zone?
      { date_lt: '' },
      { limit: '0' },
      { limit: '1001' },
      { limit: 'abc' },
      { limit: '-1' },
      { limit: '1.5' },
      { cursor: 'not-a-cursor' },
      { cursor: '!!!' },
      { cursor: Buffer.from(JSON.stringify(['2024-01-01T00:00:00.000Z', '0'])).toString('base64url') },
      { indicator_type: 'url' },
      { exclude_bulk_requests: 'yes' },
      { bulk_request_id: 'x' },
      { http_status: '200' },
      { indicator_normalized: '198.51.100.1' },
      { label: 'x' },
      { label_name: 'x' },
      { label_direction: 'malicious' }
    ]
    for (const q of bad) {
      const { status, body } = await search(b, k1, q)
      assert.equal(status, 400, JSON.stringify(q))
      assert.equal(body.code, 'INVALID_REQUEST', JSON.stringify(q))
    }
  })

  await t.test('without a valid key the search is 401', async () => {
    const none = await search(b, null)
    assert.equal(none.status, 401)
    assert.equal(none.body.code, 'MISSING_API_KEY')
    const wrong = await search(b, `iocv_${'a'.repeat(12)}_${'b'.repeat(43)}`)
    assert.equal(wrong.status, 401)
    assert.equal(wrong.body.code, 'INVALID_API_KEY')
  })
})
