/**
 * GET /api/v2/ioc/health (docs/API.md "Health") and the replacement of the retired POST /api/v2/ioc/history (its 404
 * is in errors.test.ts), through app.inject.
 */
import assert from 'node:assert/strict'
import { tmpdir } from 'node:os'
import { test } from 'node:test'
import { buildForFile, kTestIntelCache } from '../helper.ts'

const svc = buildForFile()

const kHealth = '/api/v2/ioc/health'

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
