/**
 * Timestamps, UTC days and the pagination cursor (store-independent).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { decodeCursor, encodeCursor, recordJson, requestRuns, toRows, usageDeltas } from '../../src/history/rows.ts'
import { isUtcDay, parseTimestamp, secondsUntilNextUtcMidnight } from '../../src/history/utc-day.ts'
import type { HistoryRecord } from '../../src/store/types.ts'

test('timestamps need an offset unless they are a plain date, and fractions are cut to milliseconds', () => {
  const cases: Array<[string, string | null]> = [
    ['2024-03-01', '2024-03-01T00:00:00.000Z'],
    ['2024-03-01T10:20:30Z', '2024-03-01T10:20:30.000Z'],
    ['2024-03-01T10:20Z', '2024-03-01T10:20:00.000Z'],
    ['2024-03-01t10:20:30.123456789z', '2024-03-01T10:20:30.123Z'],
    ['2024-03-01T10:20:30.5+02:00', '2024-03-01T08:20:30.500Z'],
    ['2024-03-01 10:20:30-05:30', '2024-03-01T15:50:30.000Z'],
    ['2024-03-01T10:20:30', null],
    ['2024-02-30', null],
    ['2024-03-01T25:00:00Z', null],
    ['March 1, 2024', null],
    ['1709288430000', null],
    ['', null]
  ]
  for (const [text, iso] of cases) {
    const ms = parseTimestamp(text)
    assert.equal(ms === null ? null : new Date(ms).toISOString(), iso, text)
  }
})

test('UTC days are real calendar days and Retry-After counts to the next UTC midnight', () => {
  assert.equal(isUtcDay('2024-02-29'), true)
  assert.equal(isUtcDay('2023-02-29'), false)
  assert.equal(isUtcDay('2024-2-1'), false)
  assert.equal(secondsUntilNextUtcMidnight(Date.UTC(2024, 0, 1, 23, 59, 59, 500)), 1)
  assert.equal(secondsUntilNextUtcMidnight(Date.UTC(2024, 0, 1)), 86_400)
  assert.equal(secondsUntilNextUtcMidnight(Date.UTC(2024, 0, 1, 12)), 43_200)
})

test('a cursor decodes to the position it encodes and nothing else decodes', () => {
  const c = encodeCursor('2024-03-01T10:20:30.123Z', 42)
  assert.match(c, /^[A-Za-z0-9_-]+$/)
  assert.deepEqual(decodeCursor(c), { ts: Date.UTC(2024, 2, 1, 10, 20, 30, 123), date: '2024-03-01T10:20:30.123Z', id: 42 })
  assert.equal(decodeCursor(null), null)
  assert.throws(() => decodeCursor(`${c}!`), { code: 'INVALID_REQUEST' })
  assert.throws(() => decodeCursor(c.slice(0, -2)), { code: 'INVALID_REQUEST' })
})

test('usage deltas add up rows per tenant, key and UTC day', () => {
  const base = { request_id: 'r', bulk_request_id: null, http_status: 200, auth_type: 'api_key', indicator: { type: 'ip', value: 'v', normalized: 'v' } }
  const rows = toRows([
    { ...base, tenant: 't', apikey: 'k1', date: '2024-01-01T23:59:59.999Z' },
    { ...base, tenant: 't', apikey: 'k1', date: '2024-01-02T00:59:59.999+01:00' },
    { ...base, tenant: 't', apikey: 'k1', date: '2024-01-02T00:00:00Z' },
    { ...base, tenant: 'u', apikey: 'k1', date: '2024-01-02T00:00:00Z' }
  ] as unknown as HistoryRecord[])
  assert.deepEqual(usageDeltas(rows), [
    { tenant: 't', keyId: 'k1', day: '2024-01-01', count: 2 },
    { tenant: 't', keyId: 'k1', day: '2024-01-02', count: 1 },
    { tenant: 'u', keyId: 'k1', day: '2024-01-02', count: 1 }
  ])
})

test('records split into a shared envelope and their own item, and consecutive records of one request share a uid', () => {
  const base = {
    request_id: 'r1',
    bulk_request_id: 'b1',
    http_status: 200,
    auth_type: 'api_key',
    tenant: 't',
    apikey: 'k1',
    user_id: null,
    date: '2024-01-01T01:00:00+01:00',
    evidence_details: 'none',
    label_details: 'none',
    source: null,
    risk: null,
    scores: null,
    labels: [],
    label_count: 0,
    action_taken: null,
    action_source: null
  }
  const records = [
    { ...base, indicator: { type: 'ip', value: '192.0.2.1', normalized: '192.0.2.1' } },
    { ...base, indicator: { type: 'domain', value: 'a.example', normalized: 'a.example' }, risk: { score: 1 } },
    { ...base, request_id: 'r2', indicator: { type: 'ip', value: '192.0.2.2', normalized: null } },
    { ...base, indicator: { type: 'ip', value: '192.0.2.3', normalized: null } } // r1 again, not consecutive
  ] as unknown as HistoryRecord[]
  const rows = toRows(records)
  assert.equal(rows[0]?.uid, rows[1]?.uid)
  assert.notEqual(rows[1]?.uid, rows[2]?.uid)
  assert.notEqual(rows[2]?.uid, rows[3]?.uid)
  assert.notEqual(rows[0]?.uid, rows[3]?.uid)
  assert.equal(rows[0]?.envelope, rows[1]?.envelope)
  assert.ok(!(rows[0]?.envelope ?? '').includes('indicator'))
  assert.match(rows[1]?.item ?? '', /^"risk":\{"score":1\},.*"indicator":\{"type":"domain"/) // the record's key order
  records.forEach((r, i) => {
    assert.deepEqual(JSON.parse(recordJson(rows[i]?.envelope ?? '', rows[i]?.item ?? '')), { ...r, date: '2024-01-01T00:00:00.000Z' })
  })
})

test('request runs: consecutive rows of one uid, and a uid seen earlier in the batch gets no uid', () => {
  const rows = ['a', 'a', 'b', 'a', 'c', 'c'].map((uid) => ({ uid })) as unknown as Parameters<typeof requestRuns>[0]
  assert.deepEqual(requestRuns(rows), [
    { start: 0, end: 2, uid: 'a' }, { start: 2, end: 3, uid: 'b' }, { start: 3, end: 4, uid: null }, { start: 4, end: 6, uid: 'c' }
  ])
  assert.deepEqual(requestRuns([]), [])
})
