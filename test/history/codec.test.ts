/**
 * History records between threads (src/pool/history-codec.ts): what a scoring worker encodes, the writer expands into
 * rows whose stored JSON is exactly the envelope plus the item, for any text the caller sent.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { historyRows, HistoryItems, itemFragment, kInvalidVerdictMembers } from '../../src/pool/history-codec.ts'
import type { HistoryEnvelope } from '../../src/pool/history-types.ts'
import { recordJson, type HistoryRow } from '../../src/store/history-rows.ts'

const kEnvelope: HistoryEnvelope = {
  date: '2026-11-21T10:00:00.000Z',
  request_id: 'req-1',
  bulk_request_id: 'b-1',
  http_status: 200,
  auth_type: 'api_key',
  tenant: 't1',
  apikey: 'abcdefabcdef',
  user_id: null,
  evidence_details: 'none',
  label_details: 'none',
  source: { channel: 'siem' },
  scoring_version: null,
  query_type: null,
  project_id: null,
  project_name: null,
  count: 3
}

test('encoded items expand into one row each, with the envelope and item JSON intact for any text', () => {
  const items = new HistoryItems()
  const odd = 'bücher.de \u0000 "quoted" \\ 😀'
  items.add('domain', odd, 'xn--bcher-kva.de', itemFragment({ type: 'domain', value: odd, normalized: 'xn--bcher-kva.de' }, '"risk":{"score":50},"scores":{},"labels":[],"label_count":0', 'block', 'edr'))
  items.add(null, '', null, itemFragment({ type: null, value: '', normalized: null }, kInvalidVerdictMembers, null, null))
  const other = new HistoryItems()
  other.add('ip', '1.2.3.4', '1.2.3.4', itemFragment({ type: 'ip', value: '1.2.3.4', normalized: '1.2.3.4' }, kInvalidVerdictMembers, null, null))
  const rows: HistoryRow[] = []
  historyRows(kEnvelope, [items.encode(), other.encode()], rows)
  assert.equal(rows.length, 3)
  assert.equal(new Set(rows.map((r) => r.uid)).size, 1)
  const first = rows[0] as HistoryRow
  assert.equal(first.indicatorValue, odd.replaceAll('\u0000', '\uFFFD'), 'the indexed column has no NUL')
  assert.equal(first.indicatorType, 'domain')
  assert.equal(rows[1]?.indicatorType, null)
  assert.equal(rows[1]?.indicatorNormalized, null)
  const record = JSON.parse(recordJson(first.envelope, first.item)) as Record<string, unknown>
  assert.deepEqual(record.indicator, { type: 'domain', value: odd, normalized: 'xn--bcher-kva.de' })
  assert.equal(record.request_id, 'req-1')
  assert.equal(record.action_source, 'edr')
  assert.deepEqual(record.source, { channel: 'siem' })
  assert.equal('count' in record, false)
  assert.equal(rows[2]?.indicatorValue, '1.2.3.4')
})

test('an empty chunk encodes and expands to no rows', () => {
  const rows: HistoryRow[] = []
  historyRows({ ...kEnvelope, count: 0 }, [new HistoryItems().encode()], rows)
  assert.deepEqual(rows, [])
})

test('a lone surrogate in one string leaves the strings after it intact', () => {
  const items = new HistoryItems()
  const lone = 'a\ud800'
  items.add('domain', lone, null, itemFragment({ type: 'domain', value: lone, normalized: null }, kInvalidVerdictMembers, null, null))
  items.add('domain', '\udc00b', null, itemFragment({ type: 'domain', value: 'c', normalized: null }, kInvalidVerdictMembers, 'allow', null))
  const rows: HistoryRow[] = []
  historyRows(kEnvelope, [items.encode()], rows)
  assert.equal(rows.length, 2)
  assert.equal(rows[0]?.indicatorValue, 'a\uFFFD', 'replaced as UTF-8 requires, and only that code unit')
  assert.equal(rows[1]?.indicatorValue, '\uFFFDb')
  const second = JSON.parse(recordJson((rows[1] as HistoryRow).envelope, (rows[1] as HistoryRow).item)) as Record<string, unknown>
  assert.deepEqual(second.indicator, { type: 'domain', value: 'c', normalized: null })
  assert.equal(second.action_taken, 'allow')
})

test('halves of a surrogate pair split across two strings are each replaced, never joined into one character', () => {
  const items = new HistoryItems()
  items.add('domain', 'a\ud83d', '\ude00b', itemFragment({ type: 'domain', value: 'v', normalized: null }, kInvalidVerdictMembers, null, null))
  const rows: HistoryRow[] = []
  historyRows(kEnvelope, [items.encode()], rows)
  assert.equal(rows[0]?.indicatorValue, 'a\uFFFD')
  assert.equal(rows[0]?.indicatorNormalized, '\uFFFDb')
})
