/**
 * Daily quota boundaries (docs/API.md "Auth, quotas, history"): one increment per indicator, single and bulk alike;
 * a bulk is admitted only when all of it fits; a refusal is 429 QUOTA_EXCEEDED with Retry-After (seconds to the
 * next UTC midnight) and counts nothing.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { secondsUntilNextUtcMidnight } from '../../src/store/index.ts'
import { buildForFile, type Built } from '../helper.ts'
import { keyParts, readHistory, today } from '../fixtures/read-history.ts'

interface Answer { status: number, code?: string, retryAfter?: string | undefined }

async function single (b: Built, key: string, value = '198.51.100.1'): Promise<Answer> {
  const res = await b.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'x-api-key': key }, payload: { indicator: { value } } })
  return { status: res.statusCode, code: res.json().code, retryAfter: res.headers['retry-after'] as string | undefined }
}

async function bulk (b: Built, key: string, n: number): Promise<Answer> {
  const indicators = Array.from({ length: n }, (_, i) => ({ value: i === 0 ? 'not valid!' : `198.51.100.${i}` }))
  const res = await b.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict/bulk', headers: { 'x-api-key': key }, payload: { indicators } })
  return { status: res.statusCode, code: res.json().code, retryAfter: res.headers['retry-after'] as string | undefined }
}

/** What the key has used today: the usage endpoint's view, the store's rows and the store's counter. */
async function used (b: Built, key: string): Promise<{ endpoint: number, remaining: number, rows: number, counter: number }> {
  await b.history.flush()
  const res = await b.app.inject({ method: 'GET', url: '/api/v2/mgmt/usage', headers: { 'x-api-key': key } })
  assert.equal(res.statusCode, 200)
  const id = keyParts(key).id
  return {
    endpoint: res.json().key.used,
    remaining: res.json().key.remaining,
    rows: readHistory(b.config.dataDir).filter((r) => r.record.apikey === id).length,
    counter: await b.store.usageForKey(id, today())
  }
}

function assertRefused (a: Answer, before: number, after: number): void {
  assert.equal(a.status, 429)
  assert.equal(a.code, 'QUOTA_EXCEEDED')
  const s = Number(a.retryAfter)
  assert.ok(Number.isInteger(s) && s > 0, `Retry-After is whole seconds: ${a.retryAfter}`)
  // Between the seconds to midnight measured just before and just after the request.
  assert.ok(s <= before && s >= after, `Retry-After ${s} is the time to the next UTC midnight`)
}

/** One service for the file: each test uses keys of its own, and the per-key test a tenant of its own. */
const svc = buildForFile()

async function refusedNow (send: () => Promise<Answer>): Promise<void> {
  const before = secondsUntilNextUtcMidnight(Date.now())
  const a = await send()
  assertRefused(a, before, secondsUntilNextUtcMidnight(Date.now()))
}

test('a quota of 5 admits five single calls and refuses the sixth without counting it', async () => {
  const b = svc
  const key = await b.makeKey(['verdict', 'verdict_bulk'], { quota: 5 })
  for (let i = 0; i < 4; i++) assert.equal((await single(b, key)).status, 200)
  // An invalid indicator is answered (400, logged), so it counts like any other.
  assert.equal((await single(b, key, 'not valid!')).code, 'INVALID_INDICATOR')
  await refusedNow(() => single(b, key))
  await refusedNow(() => bulk(b, key, 1))
  assert.deepEqual(await used(b, key), { endpoint: 5, remaining: 0, rows: 5, counter: 5 })
})

test('a bulk of exactly the quota is admitted, and nothing more fits after it', async () => {
  const b = svc
  const key = await b.makeKey(['verdict', 'verdict_bulk'], { quota: 5 })
  assert.equal((await bulk(b, key, 5)).status, 200)
  await refusedNow(() => single(b, key))
  assert.deepEqual(await used(b, key), { endpoint: 5, remaining: 0, rows: 5, counter: 5 })
})

test('a bulk larger than a fresh quota is refused whole and counts nothing', async () => {
  const b = svc
  const key = await b.makeKey(['verdict', 'verdict_bulk'], { quota: 5 })
  await refusedNow(() => bulk(b, key, 6))
  assert.deepEqual(await used(b, key), { endpoint: 0, remaining: 5, rows: 0, counter: 0 })
  // The refusal left the whole quota: a bulk of 5 still fits.
  assert.equal((await bulk(b, key, 5)).status, 200)
  assert.deepEqual(await used(b, key), { endpoint: 5, remaining: 0, rows: 5, counter: 5 })
})

test('after a bulk of 3 on a quota of 5, a bulk of 3 is refused and a bulk of 2 admitted', async () => {
  const b = svc
  const key = await b.makeKey(['verdict', 'verdict_bulk'], { quota: 5 })
  assert.equal((await bulk(b, key, 3)).status, 200)
  assert.deepEqual(await used(b, key), { endpoint: 3, remaining: 2, rows: 3, counter: 3 })
  await refusedNow(() => bulk(b, key, 3))
  assert.deepEqual(await used(b, key), { endpoint: 3, remaining: 2, rows: 3, counter: 3 })
  assert.equal((await bulk(b, key, 2)).status, 200)
  assert.deepEqual(await used(b, key), { endpoint: 5, remaining: 0, rows: 5, counter: 5 })
})

test('requests rejected as a whole (schema, media type, bad JSON, limits, quota) are neither logged nor use quota', async () => {
  const b = svc
  const key = await b.makeKey(['verdict', 'verdict_bulk'], { quota: 2 })
  const reject = async (url: string, payload: object, code: string): Promise<void> => {
    const res = await b.app.inject({ method: 'POST', url, headers: { 'x-api-key': key }, payload })
    assert.equal(res.statusCode, 400)
    assert.equal(res.json().code, code)
  }
  await reject('/api/v2/ioc/verdict', { indicator: { value: '1.1.1.1', action_source: 'x'.repeat(65) } }, 'INVALID_ACTION_SOURCE')
  await reject('/api/v2/ioc/verdict/bulk', { indicators: [{ value: '1.1.1.1', action_source: 'x'.repeat(65) }] }, 'INVALID_ACTION_SOURCE')
  await reject('/api/v2/ioc/verdict/bulk', { indicators: Array.from({ length: 10_001 }, () => ({ value: '1.1.1.1' })) }, 'TOO_MANY_INDICATORS')
  await reject('/api/v2/ioc/verdict/bulk', { indicators: 'nope' }, 'INVALID_REQUEST')
  await reject('/api/v2/ioc/verdict', { indicator: { value: '1.1.1.1' }, extra: 1 }, 'INVALID_REQUEST')
  const raw = async (type: string, payload: string, status: number, code: string): Promise<void> => {
    const res = await b.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'x-api-key': key, 'content-type': type }, payload })
    assert.equal(res.statusCode, status)
    assert.equal(res.json().code, code)
  }
  await raw('text/plain', '1.1.1.1', 415, 'UNSUPPORTED_MEDIA_TYPE')
  await raw('application/json', '{bad', 400, 'INVALID_REQUEST')
  await refusedNow(() => bulk(b, key, 3)) // over the quota of 2
  const empty = await b.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict/bulk', headers: { 'x-api-key': key }, payload: { indicators: [] } })
  assert.equal(empty.statusCode, 200, 'an empty bulk is answered and uses nothing')
  assert.deepEqual(await used(b, key), { endpoint: 0, remaining: 2, rows: 0, counter: 0 })
  assert.equal((await bulk(b, key, 2)).status, 200)
  await refusedNow(() => single(b, key))
})

test('quotas are per key: one key running out leaves another key of the tenant untouched', async () => {
  const b = svc
  const a = await b.makeKey(['verdict', 'verdict_bulk'], { tenant: 'per-key', quota: 1 })
  const c = await b.makeKey(['verdict', 'verdict_bulk'], { tenant: 'per-key', quota: 1 })
  assert.equal((await single(b, a)).status, 200)
  await refusedNow(() => single(b, a))
  assert.equal((await single(b, c)).status, 200)
  await b.history.flush()
  const usage = await b.store.usage('per-key', null, today())
  assert.equal(usage.total, 2)
})
