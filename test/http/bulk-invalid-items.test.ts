/**
 * A bulk's invalid items never fail the batch (docs/API.md "Bulk"): an over-long value, an unknown type or a value
 * that is not a string is answered in its own result item, echoed as sent, and recorded in history as sent (cut when
 * longer than a record holds). Scoring threads on, so that items travel to them as a bulk's do in production.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { buildForFile } from '../helper.ts'

type Json = Record<string, any>

const svc = buildForFile({ IOC_POOL_SIZE: '2' })
const kBulk = '/api/v2/ioc/verdict/bulk'

async function bulk (key: string, payload: string | object): Promise<{ status: number, body: Json }> {
  const res = await svc.app.inject({ method: 'POST', url: kBulk, headers: { 'x-api-key': key, 'content-type': 'application/json' }, payload })
  return { status: res.statusCode, body: res.json() as Json }
}

async function history (key: string, query = ''): Promise<Json[]> {
  await svc.history.flush()
  const res = await svc.app.inject({ url: `/api/v2/mgmt/enrich-logs/search-history?limit=1000${query}`, headers: { 'x-api-key': key } })
  assert.equal(res.statusCode, 200, res.body)
  return (res.json() as Json).results as Json[]
}

test('a value over 8192 characters is an invalid item: the rest of the batch is answered, and it is recorded cut', async () => {
  const key = await svc.makeKey(['verdict', 'verdict_bulk', 'mgmt'], { tenant: 'invalid-long' })
  const long = 'a'.repeat(9000)
  const longObject = { a: 'b'.repeat(9000) }
  const r = await bulk(key, { indicators: [{ value: '1.2.3.4' }, { value: long }, { value: longObject }, { value: 'a'.repeat(8192) }] })
  assert.equal(r.status, 200, JSON.stringify(r.body).slice(0, 300))
  const [ok, tooLong, objectItem, atLimit] = r.body.results as Json[]
  assert.equal(ok?.risk?.score !== undefined && ok.errors === undefined, true)
  assert.equal(tooLong?.indicator.value, long, 'echoed as sent')
  assert.deepEqual(tooLong?.errors, ['value is too long (max 8192 characters)'])
  assert.equal(tooLong?.risk, null)
  assert.deepEqual(objectItem?.indicator.value, longObject)
  assert.ok((objectItem?.errors as string[]).length > 0)
  assert.ok((atLimit?.errors as string[]).length > 0, 'at the limit: normalized, and no indicator')
  assert.notDeepEqual(atLimit?.errors, tooLong?.errors)
  const records = await history(key)
  assert.equal(records.length, 4, 'one record per indicator, invalid ones included')
  const values = records.map((x) => x.indicator.value as string).sort((a, b) => a.length - b.length)
  assert.equal(values[0], '1.2.3.4')
  assert.equal(values[1], 'a'.repeat(8192))
  assert.deepEqual(values.slice(2).sort(), [`${'a'.repeat(8192)}\u2026`, `${JSON.stringify(longObject).slice(0, 8192)}\u2026`].sort())
  const usage = (await svc.app.inject({ url: '/api/v2/mgmt/usage', headers: { 'x-api-key': key } })).json() as Json
  assert.equal(usage.key.used, 4)
})

test('a string type that is not one of the five is recorded as sent, in bulk and single calls', async () => {
  const key = await svc.makeKey(['verdict', 'verdict_bulk', 'mgmt'], { tenant: 'invalid-type' })
  const r = await bulk(key, { indicators: [{ type: 'IP', value: '10.9.8.7' }, { type: 'url', value: 'x.example' }, { type: 42, value: 'y.example' }] })
  assert.equal(r.status, 200)
  assert.deepEqual((r.body.results as Json[]).map((x) => x.indicator.type), ['IP', 'url', 42])
  const single = await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'x-api-key': key }, payload: { indicator: { type: 'Domain', value: 'z.example' } } })
  assert.equal(single.statusCode, 400)
  const byValue = new Map((await history(key)).map((x) => [x.indicator.value, x.indicator.type]))
  assert.deepEqual(Object.fromEntries(byValue), { '10.9.8.7': 'IP', 'x.example': 'url', 'y.example': null, 'z.example': 'Domain' })
})

test('a value that is not a string and holds a lone surrogate is echoed and recorded as sent', async () => {
  const key = await svc.makeKey(['verdict', 'verdict_bulk', 'mgmt'], { tenant: 'invalid-surrogate' })
  const valid = Array.from({ length: 40 }, (_, i) => `{"value":"10.3.0.${i}"}`).join(',')
  const r = await bulk(key, `{"indicators":[${valid},{"value":{"k\\udc00":"\\ud800"}},{"value":["\\ud800"]}]}`)
  assert.equal(r.status, 200)
  const items = (r.body.results as Json[]).slice(40)
  assert.deepEqual(items.map((x) => x.indicator.value), [{ 'k\udc00': '\ud800' }, ['\ud800']])
  const sent = JSON.stringify(['\ud800'])
  assert.equal(sent, '["\\ud800"]')
  const found = await history(key, `&indicator_value=${encodeURIComponent(sent)}`)
  assert.deepEqual(found.map((x) => x.indicator.value), [sent])
})
