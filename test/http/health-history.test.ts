/**
 * GET /api/v2/ioc/health (spec 4.3; API.md "Health") and the retired POST /api/v2/ioc/history (spec 4.4) with its
 * replacement, through app.inject.
 */
import assert from 'node:assert/strict'
import { tmpdir } from 'node:os'
import { test } from 'node:test'
import { buildForFile, kTestIntelCache } from '../helper.ts'

const svc = buildForFile()

const kHealth = '/api/v2/ioc/health'
const kReplacement = 'GET /api/v2/mgmt/enrich-logs/search-history'

test('health answers 200 with status ok and its checks, without authentication', async () => {
  const res = await svc.app.inject({ method: 'GET', url: kHealth })
  assert.equal(res.statusCode, 200)
  assert.match(String(res.headers['content-type']), /^application\/json/)
  const body = res.json()
  assert.equal(body.status, 'ok')
  assert.ok(['ok', 'degraded', 'unavailable'].includes(body.status))
  assert.equal(typeof body.checks, 'object')
  assert.equal(body.checks.store, 'ok')
  assert.equal(body.checks.quota, 'ok')
  assert.equal(typeof body.checks.intel.version, 'string')
  assert.equal(body.checks.intel.data_timestamp, svc.intel.snapshot.dataTimestamp)
  assert.equal(typeof res.headers['x-request-id'], 'string')
})

test('health ignores any key sent with it, valid or not', async () => {
  for (const key of [svc.key, 'garbage', '']) {
    const res = await svc.app.inject({ method: 'GET', url: kHealth, headers: { 'x-api-key': key } })
    assert.equal(res.statusCode, 200)
    assert.equal(res.json().status, 'ok')
  }
})

test('health leaks no key, file path or connection URL', async () => {
  await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'x-api-key': svc.key }, payload: { indicator: { value: '192.0.2.1' } } })
  const res = await svc.app.inject({ method: 'GET', url: kHealth })
  const text = res.body + JSON.stringify(res.headers)
  for (const needle of [svc.key, 'iocv_', svc.config.dataDir, kTestIntelCache, tmpdir(), svc.config.feeds, process.cwd(), '://', 'postgres', 'redis', 'sqlite', '.db', '.json', '.bin']) {
    assert.ok(!text.includes(needle), `health does not contain ${needle}`)
  }
  assert.doesNotMatch(res.body, /(^|["\s])\/[A-Za-z]/, 'no absolute path')
})

test('a verdict query is visible in the replacement search-history with the same key', async () => {
  const key = await svc.makeKey(['verdict'], { tenant: 'search-t' })
  const verdict = await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'x-api-key': key, 'x-request-id': 'hist-req-1' }, payload: { indicator: { value: '192.0.2.44' } } })
  assert.equal(verdict.statusCode, 200)
  await svc.history.flush()
  const res = await svc.app.inject({ method: 'GET', url: '/api/v2/mgmt/enrich-logs/search-history?indicator_value=192.0.2.44', headers: { 'x-api-key': key } })
  assert.equal(res.statusCode, 200)
  const body = res.json()
  assert.deepEqual(Object.keys(body).sort(), ['next_cursor', 'results'])
  assert.equal(body.results.length, 1)
  const [rec] = body.results
  assert.equal(rec.request_id, 'hist-req-1')
  assert.equal(rec.bulk_request_id, null)
  assert.equal(rec.http_status, 200)
  assert.equal(rec.tenant, 'search-t')
  assert.equal(rec.apikey, key.split('_')[1])
  assert.ok(!res.body.includes(key))
  const other = await svc.app.inject({ method: 'GET', url: '/api/v2/mgmt/enrich-logs/search-history?indicator_value=192.0.2.44', headers: { 'x-api-key': svc.key } })
  assert.deepEqual(other.json().results, [], 'another tenant sees nothing')
})

test('the retired POST /api/v2/ioc/history is 404 whatever the key or body, and names the replacement', async () => {
  const bodies = [undefined, {}, { date_gte: '2026-01-01T00:00:00Z', bulk_request_id: 'x', label: 'y' }, { results: [] }]
  for (const key of [undefined, svc.key, await svc.makeKey(['mgmt']), 'unknown-key']) {
    for (const payload of bodies) {
      const headers: Record<string, string> = key === undefined ? {} : { 'x-api-key': key }
      const res = await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/history', headers, ...(payload === undefined ? {} : { payload }) })
      assert.equal(res.statusCode, 404)
      const body = res.json()
      assert.deepEqual(Object.keys(body).sort(), ['code', 'error', 'message', 'statusCode'])
      assert.equal(body.statusCode, 404)
      assert.equal(body.error, 'Not Found')
      assert.ok(body.message.includes(kReplacement), body.message)
    }
  }
})

test('the retired history route is 404 even for bodies the service could not parse', async () => {
  const cases: Array<[string, string | Buffer]> = [
    ['text/plain', 'hello'],
    ['application/json', '{"oops"'],
    ['application/json', ''],
    ['application/msgpack', Buffer.from([0x82, 0xa1])],
    ['application/xml', '<history/>']
  ]
  for (const [type, payload] of cases) {
    const res = await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/history', headers: { 'content-type': type, 'x-api-key': svc.key }, payload })
    assert.equal(res.statusCode, 404, `${type}: ${res.body}`)
    assert.ok(res.json().message.includes(kReplacement))
  }
})
