/**
 * Key lifecycle over the API (POST/GET/DELETE /api/v2/mgmt/keys), expiry, allowed networks, last use, keys in the
 * query string, and the per-key rate limit with its headers, through app.inject.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { test } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { build, buildForFile, pgServices } from '../helper.ts'

type Json = Record<string, any>

const svc = buildForFile()
const kKeys = '/api/v2/mgmt/keys'
const kSingle = '/api/v2/ioc/verdict'
const kBody = { indicator: { value: '192.0.2.1' } }

function assertError (res: LightMyRequestResponse, status: number, code: string): void {
  assert.equal(res.statusCode, status, res.body)
  assert.equal(res.json().code, code)
}

async function create (body: object, key = svc.key): Promise<LightMyRequestResponse> {
  return await svc.app.inject({ method: 'POST', url: kKeys, headers: { 'x-api-key': key }, payload: body })
}

test('an admin creates a key for its tenant, sees it once, lists it with last_used_at, and revokes it', async () => {
  const res = await create({ permissions: ['verdict'], quota: 1000, rate_limit: 600, expires_at: '2099-01-01T00:00:00+01:00', allowed_cidrs: ['127.0.0.1', '10.1.2.3/8'] })
  assert.equal(res.statusCode, 201, res.body)
  const { key, record } = res.json() as Json
  assert.match(key, /^iocv_[a-z2-7]{12}_/)
  assert.deepEqual({ ...record, created_at: undefined }, {
    id: key.split('_')[1],
    tenant: 't1',
    permissions: ['verdict'],
    quota: 1000,
    rate_limit: 600,
    expires_at: '2098-12-31T23:00:00.000Z',
    allowed_cidrs: ['127.0.0.1/32', '10.0.0.0/8'],
    created_at: undefined,
    revoked_at: null,
    last_used_at: null
  })
  assert.equal((await svc.app.inject({ method: 'POST', url: kSingle, headers: { 'x-api-key': key }, payload: kBody })).statusCode, 200)
  const list = (await svc.app.inject({ url: kKeys, headers: { 'x-api-key': svc.key } })).json() as Json
  const listed = list.keys.find((k: Json) => k.id === record.id)
  assert.equal(typeof listed.last_used_at, 'string', 'the use was recorded')
  assert.ok(!JSON.stringify(list).includes(key.split('_').slice(2).join('_')), 'no secret in the list')
  const del = await svc.app.inject({ method: 'DELETE', url: `${kKeys}/${record.id as string}`, headers: { 'x-api-key': svc.key } })
  assert.equal(del.statusCode, 200)
  assert.equal(typeof del.json().revoked_at, 'string')
  assertError(await svc.app.inject({ method: 'POST', url: kSingle, headers: { 'x-api-key': key }, payload: kBody }), 401, 'INVALID_API_KEY')
  assertError(await svc.app.inject({ method: 'DELETE', url: `${kKeys}/${record.id as string}`, headers: { 'x-api-key': svc.key } }), 400, 'INVALID_REQUEST')
})

test('key management needs admin, stays inside the caller\'s tenant, and validates every field', async () => {
  const mgmt = await svc.makeKey(['mgmt', 'verdict'])
  assertError(await create({ permissions: ['verdict'] }, mgmt), 403, 'PERMISSION_DENIED')
  assertError(await svc.app.inject({ url: kKeys, headers: { 'x-api-key': mgmt } }), 403, 'PERMISSION_DENIED')
  const otherTenant = await create({ tenant: 'other', permissions: ['verdict'] })
  assertError(otherTenant, 403, 'PERMISSION_DENIED')
  assert.match(otherTenant.json().message, /^an admin key creates keys of its own tenant only/)
  const otherAdmin = await svc.makeKey(['admin'], { tenant: 't2' })
  const other = (await create({ permissions: ['verdict'] }, otherAdmin)).json() as Json
  assert.equal(other.record.tenant, 't2')
  assert.ok(!((await svc.app.inject({ url: kKeys, headers: { 'x-api-key': svc.key } })).json() as Json).keys.some((k: Json) => k.id === other.record.id))
  assertError(await svc.app.inject({ method: 'DELETE', url: `${kKeys}/${other.record.id as string}`, headers: { 'x-api-key': svc.key } }), 404, 'NOT_FOUND')
  for (const bad of [
    {}, { permissions: [] }, { permissions: ['root'] }, { permissions: ['verdict'], quota: -1 }, { permissions: ['verdict'], rate_limit: 0 },
    { permissions: ['verdict'], expires_at: 'tomorrow' }, { permissions: ['verdict'], expires_at: '2001-01-01T00:00:00Z' },
    { permissions: ['verdict'], allowed_cidrs: ['300.1.1.1/8'] }, { permissions: ['verdict'], allowed_cidrs: [] },
    // Dates not in the calendar or times out of range are refused, not moved to the next valid instant.
    { permissions: ['verdict'], expires_at: '2099-02-30T00:00:00Z' }, { permissions: ['verdict'], expires_at: '2099-01-01T24:00:00Z' },
    { permissions: ['verdict'], expires_at: '2099-01-01T10:60:00Z' }, { permissions: ['verdict'], expires_at: '2099-01-01T00:00:00+24:00' },
    // Only dotted-decimal IPv4 and standard IPv6: inet_aton's octal, hex, integer and short forms, and zones, are refused.
    ...['010.000.000.000/8', '0177.0.0.1', '0x7f.0.0.1', '2130706433', '127.1', 'fe80::1%eth0/64', '10.0.0.0/+8', '10.0.0.0/08', '10.0.0.0/00', '::1/0128'].map((c) => ({ permissions: ['verdict'], allowed_cidrs: [c] })),
    { permissions: ['verdict'], extra: 1 }, JSON.parse('{"permissions":["verdict"],"__proto__":{"admin":true}}')
  ]) {
    assertError(await create(bad), 400, 'INVALID_REQUEST')
  }
  assert.equal(({} as Json).admin, undefined)
})

test('an expired key is refused with 401 and a key outside its networks with 403 ADDRESS_NOT_ALLOWED', async () => {
  const soon = (await create({ permissions: ['verdict'], expires_at: new Date(Date.now() + 1500).toISOString() })).json() as Json
  assert.equal((await svc.app.inject({ method: 'POST', url: kSingle, headers: { 'x-api-key': soon.key }, payload: kBody })).statusCode, 200)
  await new Promise((resolve) => setTimeout(resolve, 1600))
  assertError(await svc.app.inject({ method: 'POST', url: kSingle, headers: { 'x-api-key': soon.key }, payload: kBody }), 401, 'INVALID_API_KEY')
  const fenced = (await create({ permissions: ['verdict'], allowed_cidrs: ['203.0.113.0/24'] })).json() as Json
  assertError(await svc.app.inject({ method: 'POST', url: kSingle, headers: { 'x-api-key': fenced.key }, payload: kBody }), 403, 'ADDRESS_NOT_ALLOWED')
  assert.equal((await svc.app.inject({ method: 'POST', url: kSingle, remoteAddress: '203.0.113.9', headers: { 'x-api-key': fenced.key }, payload: kBody })).statusCode, 200)
})

test('a key sent in the query string is refused with 401 API_KEY_IN_QUERY', async () => {
  for (const q of ['api_key', 'apikey', 'key']) {
    assertError(await svc.app.inject({ method: 'POST', url: `${kSingle}?${q}=${svc.key}`, payload: kBody }), 401, 'API_KEY_IN_QUERY')
  }
})

test('a key with a rate limit gets RateLimit headers on every answer and 429 RATE_LIMITED with Retry-After past it', async () => {
  const limited = (await create({ permissions: ['verdict'], rate_limit: 3 })).json() as Json
  const headers = { 'x-api-key': limited.key }
  for (let i = 3; i > 0; i--) {
    const res = await svc.app.inject({ method: 'POST', url: kSingle, headers, payload: kBody })
    assert.equal(res.statusCode, 200)
    assert.equal(res.headers['ratelimit-limit'], '3')
    assert.equal(res.headers['ratelimit-remaining'], String(i - 1))
    assert.ok(Number(res.headers['ratelimit-reset']) > 0)
  }
  const over = await svc.app.inject({ method: 'POST', url: kSingle, headers, payload: kBody })
  assertError(over, 429, 'RATE_LIMITED')
  assert.ok(Number(over.headers['retry-after']) >= 1)
  assert.deepEqual(Object.keys(over.json()).sort(), ['code', 'error', 'message', 'statusCode'])
  const unlimited = await svc.app.inject({ method: 'POST', url: kSingle, headers: { 'x-api-key': svc.key }, payload: kBody })
  assert.equal(unlimited.statusCode, 200)
  assert.equal(unlimited.headers['ratelimit-limit'], undefined, 'a key without a limit is not limited')
})

test('the operator default applies to keys without a limit of their own', async (t) => {
  const own = await build(t, { IOC_RATE_LIMIT: '1' })
  const headers = { 'x-api-key': own.key }
  assert.equal((await own.app.inject({ method: 'POST', url: kSingle, headers, payload: kBody })).statusCode, 200)
  assertError(await own.app.inject({ method: 'POST', url: kSingle, headers, payload: kBody }), 429, 'RATE_LIMITED')
  assert.equal((await own.app.inject({ url: '/api/v2/ioc/health' })).statusCode, 200, 'routes without a key are not limited')
})

test('answers to a key with a daily quota carry X-Quota-Limit and X-Quota-Remaining', async () => {
  const key = await svc.makeKey(['verdict', 'verdict_bulk'], { quota: 10 })
  const single = await svc.app.inject({ method: 'POST', url: kSingle, headers: { 'x-api-key': key }, payload: kBody })
  assert.deepEqual([single.headers['x-quota-limit'], single.headers['x-quota-remaining']], ['10', '9'])
  const bulk = await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict/bulk', headers: { 'x-api-key': key }, payload: { indicators: [{ value: '1.1.1.1' }, { value: '8.8.8.8' }] } })
  assert.deepEqual([bulk.headers['x-quota-limit'], bulk.headers['x-quota-remaining']], ['10', '7'])
  // An invalid indicator is answered 400 and counted against the quota: the same headers.
  const invalid = await svc.app.inject({ method: 'POST', url: kSingle, headers: { 'x-api-key': key }, payload: { indicator: { value: '1.2.3', type: 'ip' } } })
  assertError(invalid, 400, 'INVALID_INDICATOR')
  assert.deepEqual([invalid.headers['x-quota-limit'], invalid.headers['x-quota-remaining']], ['10', '6'])
  // An empty bulk counts nothing and still says what is left.
  const empty = await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict/bulk', headers: { 'x-api-key': key }, payload: { indicators: [] } })
  assert.equal(empty.statusCode, 200)
  assert.deepEqual([empty.headers['x-quota-limit'], empty.headers['x-quota-remaining']], ['10', '6'])
  const exhausted = await svc.makeKey(['verdict_bulk'], { quota: 0 })
  const emptyAtZero = await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict/bulk', headers: { 'x-api-key': exhausted }, payload: { indicators: [] } })
  assert.equal(emptyAtZero.statusCode, 200)
  assert.deepEqual([emptyAtZero.headers['x-quota-limit'], emptyAtZero.headers['x-quota-remaining']], ['0', '0'])
  const none = await svc.app.inject({ method: 'POST', url: kSingle, headers: { 'x-api-key': svc.key }, payload: kBody })
  assert.equal(none.headers['x-quota-remaining'], undefined)
})

const kRedis = process.env.IOC_TEST_REDIS_URL
const kDb = process.env.IOC_TEST_DATABASE_URL
test('with Redis, instances share one rate-limit window per key', {
  skip: kRedis === undefined || kDb === undefined ? 'IOC_TEST_REDIS_URL or IOC_TEST_DATABASE_URL not set' : false
}, async (t) => {
  const prefix = `iocv-test-rl-${process.pid}-${Date.now()}:`
  // Both instances know the key through one PostgreSQL store (each has its own data directory, as it must).
  const services = pgServices(t, kDb as string, `iocv_rl_${randomBytes(4).toString('hex')}`, { IOC_REDIS_URL: kRedis as string, IOC_REDIS_PREFIX: prefix })
  const a = await services.build()
  const limited = (await a.app.inject({ method: 'POST', url: kKeys, headers: { 'x-api-key': a.key }, payload: { permissions: ['verdict'], rate_limit: 2 } })).json() as Json
  const b = await services.build()
  const headers = { 'x-api-key': limited.key }
  assert.equal((await a.app.inject({ method: 'POST', url: kSingle, headers, payload: kBody })).statusCode, 200)
  assert.equal((await b.app.inject({ method: 'POST', url: kSingle, headers, payload: kBody })).statusCode, 200)
  assertError(await a.app.inject({ method: 'POST', url: kSingle, headers, payload: kBody }), 429, 'RATE_LIMITED')
  assertError(await b.app.inject({ method: 'POST', url: kSingle, headers, payload: kBody }), 429, 'RATE_LIMITED')
})

test('a restricted admin key creates keys within its own bounds only: left-out bounds are its own, wider ones are refused', async () => {
  const parentExpiry = new Date(Date.now() + 3_000).toISOString()
  const parent = (await svc.store.createKey({ tenant: 't1', permissions: ['admin'], quota: 5, rateLimit: 50, expiresAt: parentExpiry, allowedCidrs: ['127.0.0.1/32'] })).key
  const child = await create({ permissions: ['admin'] }, parent)
  assert.equal(child.statusCode, 201, child.body)
  const record = (child.json() as Json).record
  assert.deepEqual([record.quota, record.rate_limit, record.expires_at, record.allowed_cidrs], [5, 50, parentExpiry, ['127.0.0.1/32']])
  for (const body of [
    { permissions: ['verdict'], quota: 6 }, { permissions: ['verdict'], quota: null },
    { permissions: ['verdict'], rate_limit: 51 }, { permissions: ['verdict'], rate_limit: null },
    { permissions: ['verdict'], expires_at: new Date(Date.now() + 3_600_000).toISOString() }, { permissions: ['verdict'], expires_at: null },
    { permissions: ['verdict'], allowed_cidrs: ['127.0.0.0/8'] }, { permissions: ['verdict'], allowed_cidrs: ['10.0.0.1'] },
    { permissions: ['verdict'], allowed_cidrs: null }
  ]) {
    const res = await create(body, parent)
    assertError(res, 400, 'INVALID_REQUEST')
    assert.match(res.json().message, new RegExp(Object.keys(body)[1] as string))
  }
  const narrower = await create({ permissions: ['verdict'], quota: 2, rate_limit: 10, allowed_cidrs: ['127.0.0.1'], expires_at: new Date(Date.now() + 1_000).toISOString() }, parent)
  assert.equal(narrower.statusCode, 201, narrower.body)
  // The child does not outlive its parent: once the parent's expiry passes, both are refused.
  const childKey = (child.json() as Json).key as string
  assert.equal((await svc.app.inject({ method: 'POST', url: kSingle, headers: { 'x-api-key': childKey }, payload: kBody })).statusCode, 200)
  await new Promise((resolve) => setTimeout(resolve, Date.parse(parentExpiry) - Date.now() + 50))
  for (const key of [parent, childKey]) assertError(await svc.app.inject({ method: 'POST', url: kSingle, headers: { 'x-api-key': key }, payload: kBody }), 401, 'INVALID_API_KEY')
})

test('a key without a rate limit of its own creates keys within the operator\'s default limit', async (t) => {
  const limited = await build(t, { IOC_RATE_LIMIT: '100' })
  const res = await limited.app.inject({ method: 'POST', url: kKeys, headers: { 'x-api-key': limited.key }, payload: { permissions: ['verdict'], rate_limit: 1000 } })
  assertError(res, 400, 'INVALID_REQUEST')
  const inherited = await limited.app.inject({ method: 'POST', url: kKeys, headers: { 'x-api-key': limited.key }, payload: { permissions: ['verdict'] } })
  assert.equal(inherited.statusCode, 201)
  assert.equal((inherited.json() as Json).record.rate_limit, 100)
})
