/**
 * Records written before the request limits existed (docs/API.md "Limits") may hold strings of megabytes: a 5 MB
 * `source.product` on every record of a 1,000-item bulk, a 2 MB indicator value. Written here straight into each store
 * as the history writer writes (one envelope per request, encoded parts), they are searched without a copy of the
 * envelope per record: every string is cut to MAX_RECORD_STRING, a page stays within MAX_PAGE_BYTES, and paging reads
 * every record once.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { historyParts, HistoryItems } from '../../src/history/codec.ts'
import type { HistoryPart } from '../../src/history/block.ts'
import { indicatorJson, itemTail, kInvalidVerdictMembers, recordFragment } from '../../src/history/record.ts'
import { MAX_PAGE_BYTES, MAX_RECORD_STRING } from '../../src/history/rows.ts'
import type { HistoryRecord } from '../../src/store/index.ts'
import { historyEnvelope } from '../fixtures/history-record.ts'
import { build } from '../helper.ts'
import { storeBackends, type ExplainableStore } from '../store/backends.ts'

const kBig = 5 * 1024 * 1024
const kItems = 1000

/** A 1,000-item bulk with a 5 MB source.product, then a single call with a 2 MB value, as their parts. */
function oversized (tenant: string): HistoryPart[] {
  const out: HistoryPart[] = []
  const items = new HistoryItems(kItems)
  for (let i = 0; i < kItems; i++) {
    const value = `10.0.${i >> 8}.${i & 255}`
    items.add('ip', value, value, recordFragment(indicatorJson('ip', value, value), itemTail(kInvalidVerdictMembers, null, null)))
  }
  const date = new Date(Date.now() - 60_000).toISOString()
  historyParts(historyEnvelope({ tenant, request_id: 'big-source', date, bulk_request_id: 'b1', count: kItems, source: { product: 'p'.repeat(kBig) } }), [items.encode()], out)
  const single = new HistoryItems(1)
  const value = 'v'.repeat(2 * 1024 * 1024)
  single.add(null, value, null, recordFragment(indicatorJson(null, value, null), itemTail(kInvalidVerdictMembers, null, null)))
  historyParts(historyEnvelope({ tenant, request_id: 'big-value', date: new Date().toISOString(), count: 1, http_status: 400 }), [single.encode()], out)
  return out
}

function checkPage (results: HistoryRecord[]): void {
  const bytes = Buffer.byteLength(JSON.stringify(results))
  assert.ok(bytes <= MAX_PAGE_BYTES, `a page of ${bytes} bytes`)
  for (const r of results) {
    const product = r.source?.product
    if (product !== undefined) assert.equal(product, `${'p'.repeat(MAX_RECORD_STRING)}\u2026`)
    assert.ok(r.indicator.value.length <= MAX_RECORD_STRING + 1)
  }
}

async function searchEverything (store: ExplainableStore, tenant: string): Promise<HistoryRecord[]> {
  const all: HistoryRecord[] = []
  let cursor: string | null = null
  do {
    const page = await store.searchHistory(tenant, {}, 1000, cursor)
    checkPage(page.results)
    assert.ok(page.results.length > 0)
    all.push(...page.results)
    cursor = page.next_cursor
  } while (cursor !== null)
  return all
}

for (const backend of storeBackends) {
  test(`${backend.name}: oversized records written before the limits are searched with every string cut and pages bounded`, { skip: backend.skip ?? false }, async () => {
    const h = await backend.open()
    try {
      await h.store.writeHistoryParts(oversized('big'))
      const first = await h.store.searchHistory('big', {}, 1000, null)
      checkPage(first.results)
      assert.equal(first.results[0]?.request_id, 'big-value', 'newest first')
      assert.equal(first.results[0]?.indicator.value, `${'v'.repeat(MAX_RECORD_STRING)}\u2026`)
      assert.notEqual(first.next_cursor, null, 'a page of a thousand cut records passes the byte bound, so another page follows')
      const all = await searchEverything(h.store, 'big')
      assert.equal(all.length, kItems + 1)
      assert.equal(new Set(all.map((r) => r.indicator.value)).size, kItems + 1, 'each record once')
      const byValue = await h.store.searchHistory('big', { indicator_value: '10.0.3.231' }, 10, null)
      assert.equal(byValue.results.length, 1)
      checkPage(byValue.results)
    } finally {
      await h.cleanup()
    }
  })
}

test('search-history answers a page within the byte bound over oversized records, and the service keeps answering', async (t) => {
  const svc = await build(t)
  await svc.store.writeHistoryParts(oversized('t1'))
  const res = await svc.app.inject({ url: '/api/v2/mgmt/enrich-logs/search-history?limit=1000', headers: { 'x-api-key': svc.key } })
  assert.equal(res.statusCode, 200)
  assert.ok(res.rawPayload.length <= MAX_PAGE_BYTES + 1024, `${res.rawPayload.length} bytes`)
  const page = res.json() as { results: HistoryRecord[], next_cursor: string | null }
  checkPage(page.results)
  assert.notEqual(page.next_cursor, null)
  assert.equal((await svc.app.inject({ url: '/livez' })).statusCode, 200)
})
