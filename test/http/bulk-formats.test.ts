/**
 * The bulk route's NDJSON and CSV answers (Accept: application/x-ndjson, text/csv): the same items as the JSON answer,
 * in request order, with the batch's ids in headers.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { buildForFile } from '../helper.ts'

type Json = Record<string, any>

const svc = buildForFile()
const kBulk = '/api/v2/ioc/verdict/bulk'
const kIndicators = [
  { value: '104.16.0.1' }, { value: 'example[.]com' }, { value: 'bad, "quoted" value!' }, { value: '=HYPERLINK("x")' },
  { value: 'AS13335' }, { type: 'ip_block', value: '192.0.2.0/24' }, { value: '1.2.3.4' }
]

async function bulk (accept: string, signalDetails = 'top'): Promise<{ status: number, headers: Record<string, any>, body: string }> {
  const res = await svc.app.inject({ method: 'POST', url: kBulk, headers: { 'x-api-key': svc.key, accept }, payload: { indicators: kIndicators, signal_details: signalDetails } })
  return { status: res.statusCode, headers: res.headers, body: res.body }
}

test('NDJSON answers one result item per line, the same items as the JSON answer, in request order', async () => {
  const json = JSON.parse((await bulk('application/json')).body) as Json
  const nd = await bulk('application/x-ndjson')
  assert.equal(nd.status, 200)
  assert.match(nd.headers['content-type'], /^application\/x-ndjson/)
  assert.ok(nd.body.endsWith('\n'))
  const items = nd.body.trimEnd().split('\n').map((l) => JSON.parse(l) as Json)
  assert.equal(items.length, kIndicators.length)
  assert.deepEqual(items.map((i) => i.indicator.value), kIndicators.map((i) => i.value))
  assert.deepEqual(items.map((i) => i.risk?.score ?? null), json.results.map((r: Json) => r.risk?.score ?? null))
  assert.equal(nd.headers['x-record-count'], String(kIndicators.length))
  assert.match(nd.headers['x-bulk-request-id'], /^[0-9a-f-]{36}$/)
  assert.equal(nd.headers['x-data-timestamp'], json.meta.data_timestamp)
  assert.equal(nd.headers['x-engine-version'], json.meta.engine_version)
})

test('CSV answers a header and one row per indicator, quoted as RFC 4180 says and safe to open in a spreadsheet', async () => {
  const json = JSON.parse((await bulk('application/json')).body) as Json
  const csv = await bulk('text/csv')
  assert.equal(csv.status, 200)
  assert.match(csv.headers['content-type'], /^text\/csv/)
  const rows = csv.body.split('\r\n')
  assert.equal(rows.pop(), '', 'every row ends in CRLF')
  assert.equal(rows[0], 'value,type,normalized,score,strength,category,top_signals,error')
  assert.equal(rows.length, kIndicators.length + 1)
  const first = json.results[0] as Json
  assert.equal(rows[1], ['104.16.0.1', 'ip', '104.16.0.1', first.risk.score, first.risk.strength, first.risk.category,
    first.signals.map((s: Json) => s.signal_id).join(' '), ''].join(','))
  assert.match(rows[3] as string, /^"bad, ""quoted"" value!",,,,,,,.+$/, 'an invalid value: quoted, with its error')
  assert.match(rows[4] as string, /^"'=HYPERLINK\(""x""\)",/, 'a formula is neutralized')
  assert.match(rows[6] as string, /^192\.0\.2\.0\/24,ip_block,192\.0\.2\.0\/24,\d+,/)
})

test('without signals asked for, the CSV top_signals column is empty; an empty bulk is a header alone', async () => {
  const csv = await bulk('text/csv', 'none')
  for (const row of csv.body.split('\r\n').slice(1, -1)) assert.equal(row.split(',')[6], '', row)
  const empty = await svc.app.inject({ method: 'POST', url: kBulk, headers: { 'x-api-key': svc.key, accept: 'text/csv' }, payload: { indicators: [] } })
  assert.equal(empty.body, 'value,type,normalized,score,strength,category,top_signals,error\r\n')
  const nd = await svc.app.inject({ method: 'POST', url: kBulk, headers: { 'x-api-key': svc.key, accept: 'application/x-ndjson' }, payload: { indicators: [] } })
  assert.equal(nd.body, '')
})

test('Accept picks the preferred format; the single route and unknown types answer 406 NOT_ACCEPTABLE', async () => {
  assert.match((await bulk('text/csv;q=0.5, application/x-ndjson')).headers['content-type'], /x-ndjson/)
  assert.match((await bulk('text/csv, application/json;q=0.1')).headers['content-type'], /text\/csv/)
  const xml = await bulk('application/xml')
  assert.equal(xml.status, 406)
  assert.equal(JSON.parse(xml.body).code, 'NOT_ACCEPTABLE')
  const single = await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'x-api-key': svc.key, accept: 'text/csv' }, payload: { indicator: { value: '1.1.1.1' } } })
  assert.equal(single.statusCode, 406)
})

test('an NDJSON or CSV bulk leaves one history record per indicator, like a JSON bulk', async () => {
  const key = await svc.makeKey(['verdict_bulk', 'mgmt'], { tenant: 'formats' })
  for (const accept of ['application/x-ndjson', 'text/csv']) {
    const res = await svc.app.inject({ method: 'POST', url: kBulk, headers: { 'x-api-key': key, accept }, payload: { indicators: kIndicators } })
    assert.equal(res.statusCode, 200)
  }
  await svc.history.flush()
  const page = (await svc.app.inject({ url: '/api/v2/mgmt/enrich-logs/search-history?limit=100', headers: { 'x-api-key': key } })).json() as Json
  assert.equal(page.results.length, 2 * kIndicators.length)
})

/** Item types and values a bulk's schema lets through that are not strings (any JSON value). */
const kOddItems: Array<{ type?: unknown, value?: unknown }> = [
  { type: ['a,b'], value: '1.2.3.4' }, { type: { k: 'v, "w"' }, value: '1.2.3.4' }, { type: 7, value: '8.8.8.8' },
  { type: true, value: [1, '=x'] }, { type: null, value: { a: [null, 'b\r\nc'] } }, { type: 'ip', value: 1.5 }, { value: false },
  { type: '=cmd', value: '-1' }
]

test('every answer format writes an item whatever its type and value hold: an error row, never a failed answer', async () => {
  for (const accept of ['text/csv', 'application/x-ndjson', 'application/json', 'application/msgpack']) {
    const res = await svc.app.inject({ method: 'POST', url: kBulk, headers: { 'x-api-key': svc.key, accept }, payload: { indicators: [...kOddItems, { value: '1.1.1.1' }] } })
    assert.equal(res.statusCode, 200, `${accept}: ${res.body.slice(0, 200)}`)
    if (accept === 'text/csv') {
      const rows = res.body.split('\r\n').slice(1, -1)
      assert.equal(rows.length, kOddItems.length + 1)
      assert.match(rows[0] as string, /^1\.2\.3\.4,"\[""a,b""\]",,,,,,.+$/, 'a non-string type is written as its JSON text')
      assert.match(rows[3] as string, /^"\[1,""=x""\]",true,/)
      assert.match(rows[7] as string, /^"'-1","'=cmd",/, 'formulas are neutralized in every column')
      assert.match(rows[8] as string, /^1\.1\.1\.1,ip,1\.1\.1\.1,\d+,/)
    }
  }
})

test('a CSV bulk with a bad item anywhere is answered whole and charges exactly the items answered', async () => {
  const key = await svc.makeKey(['verdict_bulk', 'mgmt'], { tenant: 'csv-odd' })
  const keyId = key.split('_')[1] as string
  const n = 6_000
  const indicators: Array<{ type?: unknown, value: unknown }> = Array.from({ length: n }, (_, i) => ({ value: `10.1.${i >> 8}.${i & 255}` }))
  indicators[0] = { type: ['first, bad'], value: '1.2.3.4' }
  indicators[5_500] = { type: ['late, bad'], value: '1.2.3.4' }
  const res = await svc.app.inject({ method: 'POST', url: kBulk, headers: { 'x-api-key': key, accept: 'text/csv' }, payload: { indicators } })
  assert.equal(res.statusCode, 200)
  const rows = res.body.split('\r\n')
  assert.equal(rows.pop(), '', 'the answer ends with a whole row')
  assert.equal(rows.length, n + 1)
  assert.match(rows[1] as string, /^1\.2\.3\.4,"\[""first, bad""\]",/)
  assert.match(rows[5_501] as string, /^1\.2\.3\.4,"\[""late, bad""\]",/)
  await svc.history.flush()
  const usage = await svc.store.usage('csv-odd', keyId, new Date().toISOString().slice(0, 10))
  assert.equal(usage.total, n)
})

test('a lone surrogate sent in JSON is answered in MessagePack as U+FFFD, never as bytes that are not UTF-8', async () => {
  const { unpack } = await import('msgpackr')
  // JSON text can carry a lone surrogate (\ud800); UTF-8 cannot.
  // Invalid items, and valid ones found in a URL whose path holds one.
  const payload = '{"indicators":[{"value":"a\\ud800.com"},{"value":"' + 'b'.repeat(30) + '\\udfff.example"},{"value":"x\\ud83d\\ude00.example"},' +
    '{"value":"hxxp://evil.example/\\ud800"},{"value":"https://evil.example/' + 'p'.repeat(30) + '?\\udfff"}]}'
  for (const signalDetails of ['none', 'all']) {
    const body = payload.replace(/}$/, `,"signal_details":"${signalDetails}"}`)
    const res = await svc.app.inject({ method: 'POST', url: kBulk, headers: { 'x-api-key': svc.key, 'content-type': 'application/json', accept: 'application/msgpack' }, payload: body })
    assert.equal(res.statusCode, 200)
    const raw = res.rawPayload
    for (const bad of [[0xed, 0xa0, 0x80], [0xed, 0xbf, 0xbf]]) assert.equal(raw.indexOf(Buffer.from(bad)), -1, `${signalDetails}: no encoded surrogate`)
    const values = ((unpack(raw) as Json).results as Json[]).map((r) => r.indicator.value)
    assert.deepEqual(values, ['a\ufffd.com', `${'b'.repeat(30)}\ufffd.example`, 'x\ud83d\ude00.example', 'hxxp://evil.example/\ufffd', `https://evil.example/${'p'.repeat(30)}?\ufffd`])
  }
})
