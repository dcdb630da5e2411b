/**
 * X-API-Key authentication and permissions (docs/API.md "Auth, quotas, history"), through app.inject.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { InjectOptions, LightMyRequestResponse } from 'fastify'
import { buildForFile } from '../helper.ts'

const svc = buildForFile()

const kSingle = '/api/v2/ioc/verdict'
const kBulk = '/api/v2/ioc/verdict/bulk'
const kSingleBody = { indicator: { value: '192.0.2.1' } }
const kBulkBody = { indicators: [{ value: '192.0.2.1' }] }

function keyId (key: string): string {
  return key.split('_')[1] as string
}

function secretOf (key: string): string {
  return key.slice(`iocv_${keyId(key)}_`.length)
}

async function call (url: string, payload: object, key?: string): Promise<LightMyRequestResponse> {
  const opts: InjectOptions = { method: 'POST', url, payload }
  if (key !== undefined) opts.headers = { 'x-api-key': key }
  return await svc.app.inject(opts)
}

function assertError (res: LightMyRequestResponse, status: number, code: string): void {
  assert.equal(res.statusCode, status, res.body)
  const body = res.json()
  assert.deepEqual(Object.keys(body).sort(), ['code', 'error', 'message', 'statusCode'])
  assert.equal(body.code, code)
}

test('a request without X-API-Key gets 401 MISSING_API_KEY on both verdict routes', async () => {
  assertError(await call(kSingle, kSingleBody), 401, 'MISSING_API_KEY')
  assertError(await call(kBulk, kBulkBody), 401, 'MISSING_API_KEY')
  assertError(await call(kSingle, kSingleBody, ''), 401, 'MISSING_API_KEY')
  assertError(await call(kSingle, kSingleBody, '   '), 401, 'MISSING_API_KEY')
})

test('the key is checked before the body, so an unauthenticated caller learns nothing about body validation', async () => {
  const res = await svc.app.inject({ method: 'POST', url: kSingle, headers: { 'content-type': 'application/json' }, payload: '{broken' })
  assertError(res, 401, 'MISSING_API_KEY')
  const res2 = await svc.app.inject({ method: 'POST', url: kBulk, headers: { 'content-type': 'text/plain', 'x-api-key': 'nope' }, payload: 'x' })
  assertError(res2, 401, 'INVALID_API_KEY')
})

test('an unknown, garbled or wrong-secret key gets 401 INVALID_API_KEY', async () => {
  const real = await svc.makeKey(['verdict', 'verdict_bulk'])
  const wrongSecret = `iocv_${keyId(real)}_${secretOf(real).split('').reverse().join('')}`
  const unknownId = `iocv_aaaaaaaaaaaa_${secretOf(real)}`
  const garbled = ['garbage', 'iocv_', 'iocv__', `${real}x`, real.slice(0, -1), real.toUpperCase(), 'x'.repeat(10_000), 'Bearer ' + real, `${real},${real}`]
  for (const k of [wrongSecret, unknownId, ...garbled]) {
    assertError(await call(kSingle, kSingleBody, k), 401, 'INVALID_API_KEY')
    assertError(await call(kBulk, kBulkBody, k), 401, 'INVALID_API_KEY')
  }
  assert.equal((await call(kSingle, kSingleBody, real)).statusCode, 200)
  assert.equal((await call(kSingle, kSingleBody, `  ${real}  `)).statusCode, 200, 'surrounding spaces are ignored')
})

test('a revoked key gets 401 INVALID_API_KEY', async () => {
  const key = await svc.makeKey(['verdict', 'verdict_bulk'])
  assert.equal(await svc.store.revokeKey(keyId(key)), true)
  assertError(await call(kSingle, kSingleBody, key), 401, 'INVALID_API_KEY')
  assertError(await call(kBulk, kBulkBody, key), 401, 'INVALID_API_KEY')
})

test('a key without verdict_bulk gets 403 PERMISSION_DENIED on bulk, and without verdict on single', async () => {
  const singleOnly = await svc.makeKey(['verdict'])
  const bulkOnly = await svc.makeKey(['verdict_bulk'])
  const mgmtOnly = await svc.makeKey(['mgmt'])
  assertError(await call(kBulk, kBulkBody, singleOnly), 403, 'PERMISSION_DENIED')
  assert.match((await call(kBulk, kBulkBody, singleOnly)).json().message, /verdict_bulk/)
  assertError(await call(kSingle, kSingleBody, bulkOnly), 403, 'PERMISSION_DENIED')
  assert.match((await call(kSingle, kSingleBody, bulkOnly)).json().message, /\bverdict\b/)
  assertError(await call(kSingle, kSingleBody, mgmtOnly), 403, 'PERMISSION_DENIED')
  assertError(await call(kBulk, kBulkBody, mgmtOnly), 403, 'PERMISSION_DENIED')
  assert.equal((await call(kSingle, kSingleBody, singleOnly)).statusCode, 200)
  assert.equal((await call(kBulk, kBulkBody, bulkOnly)).statusCode, 200)
})

test('the admin permission implies every other permission', async () => {
  const admin = await svc.makeKey(['admin'])
  assert.equal((await call(kSingle, kSingleBody, admin)).statusCode, 200)
  assert.equal((await call(kBulk, kBulkBody, admin)).statusCode, 200)
})

test('the intel reload needs the admin permission', async () => {
  const res = await svc.app.inject({ method: 'POST', url: '/api/v2/mgmt/intel/reload', headers: { 'x-api-key': await svc.makeKey(['verdict', 'verdict_bulk', 'mgmt']) } })
  assertError(res, 403, 'PERMISSION_DENIED')
  assertError(await svc.app.inject({ method: 'POST', url: '/api/v2/mgmt/intel/reload' }), 401, 'MISSING_API_KEY')
})

test('the key string never appears in any response body or header', async () => {
  const key = await svc.makeKey(['verdict', 'verdict_bulk'], { tenant: 'leak-check', quota: 3 })
  const secret = secretOf(key)
  const unknown = `iocv_bbbbbbbbbbbb_${secret}`
  const requests: InjectOptions[] = [
    { method: 'POST', url: kSingle, headers: { 'x-api-key': key }, payload: kSingleBody },
    { method: 'POST', url: kSingle, headers: { 'x-api-key': key, accept: 'application/msgpack' }, payload: kSingleBody },
    { method: 'POST', url: kBulk, headers: { 'x-api-key': key }, payload: { indicators: [{ value: 'bad!' }, { value: '192.0.2.9' }] } },
    { method: 'POST', url: kSingle, headers: { 'x-api-key': key }, payload: { indicator: { value: 'bad value!' } } },
    { method: 'POST', url: kSingle, headers: { 'x-api-key': key }, payload: { indicator: { value: '1.2.3.4' }, extra: 1 } },
    { method: 'POST', url: kSingle, headers: { 'x-api-key': key }, payload: { indicator: { value: '1.2.3.4', action_source: 'x'.repeat(99) } } },
    { method: 'POST', url: kSingle, headers: { 'x-api-key': key, 'content-type': 'text/plain' }, payload: key },
    { method: 'POST', url: kSingle, headers: { 'x-api-key': key, accept: 'text/html' }, payload: kSingleBody },
    { method: 'POST', url: kBulk, headers: { 'x-api-key': key }, payload: { indicators: [{ value: '1.1.1.1' }, { value: '1.1.1.2' }, { value: '1.1.1.3' }] } },
    { method: 'POST', url: kSingle, headers: { 'x-api-key': unknown }, payload: kSingleBody },
    { method: 'POST', url: kSingle, headers: { 'x-api-key': `${key} trailing` }, payload: kSingleBody },
    { method: 'POST', url: '/api/v2/mgmt/intel/reload', headers: { 'x-api-key': key } },
    { method: 'GET', url: '/api/v2/mgmt/enrich-logs/search-history', headers: { 'x-api-key': key } },
    { method: 'GET', url: `/api/v2/mgmt/enrich-logs/search-history?apikey=${keyId(key)}`, headers: { 'x-api-key': key } },
    { method: 'GET', url: '/api/v2/mgmt/usage', headers: { 'x-api-key': key } },
    { method: 'GET', url: '/api/v2/ioc/health', headers: { 'x-api-key': key } },
    { method: 'POST', url: '/api/v2/ioc/history', headers: { 'x-api-key': key }, payload: { apikey: 'x' } },
    { method: 'GET', url: '/api/v2/no-such-route', headers: { 'x-api-key': key } }
  ]
  const statuses: number[] = []
  for (const r of requests) {
    const res = await svc.app.inject(r)
    statuses.push(res.statusCode)
    if (r.url === '/api/v2/mgmt/enrich-logs/search-history') await svc.history.flush()
    const text = res.rawPayload.toString('latin1') + JSON.stringify(res.headers)
    for (const needle of [key, secret, unknown]) {
      assert.ok(!text.includes(needle), `${r.method} ${r.url} (${res.statusCode}) does not echo the key`)
    }
  }
  // The mix covers successes and the main rejections (not only one kind of response).
  for (const s of [200, 400, 401, 403, 404, 406, 415, 429]) assert.ok(statuses.includes(s), `status ${s} was exercised`)
})
