/**
 * Scale-out: two service instances share PostgreSQL (keys, history, usage) and Redis (quota counters), as several
 * stateless instances behind a load balancer would. Runs only when IOC_TEST_DATABASE_URL and IOC_TEST_REDIS_URL are set.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { test } from 'node:test'
import { Redis } from 'ioredis'
import { pgServices, type Built } from '../helper.ts'

const kDb = process.env.IOC_TEST_DATABASE_URL
const kRedis = process.env.IOC_TEST_REDIS_URL

test('two instances on one PostgreSQL and one Redis share keys, quota, history and usage', async (t) => {
  if (kDb === undefined || kRedis === undefined) {
    t.skip('IOC_TEST_DATABASE_URL and IOC_TEST_REDIS_URL not set')
    return
  }
  const suffix = randomBytes(4).toString('hex')
  const schema = `iocv_scale_${suffix}`
  const prefix = `iocv-test-${suffix}:`
  t.after(async () => {
    const redis = new Redis(kRedis)
    const keys = await redis.keys(`${prefix}*`)
    if (keys.length > 0) await redis.del(...keys)
    redis.disconnect()
  })
  const { build } = pgServices(t, kDb, schema, { IOC_REDIS_URL: kRedis, IOC_REDIS_PREFIX: prefix })
  const a: Built = await build()
  const b: Built = await build()

  // A key created through one instance works on the other; its quota is counted across both.
  const key = await a.makeKey(['verdict', 'verdict_bulk', 'mgmt'], { tenant: 'shared', quota: 5 })
  const bulk = async (app: Built['app'], values: string[]): Promise<{ statusCode: number, body: string }> =>
    await app.inject({ method: 'POST', url: '/api/v2/ioc/verdict/bulk', headers: { 'x-api-key': key }, payload: { indicators: values.map((value) => ({ value })) } })
  assert.equal((await bulk(a.app, ['192.0.2.1', '192.0.2.2', '192.0.2.3'])).statusCode, 200)
  assert.equal((await bulk(b.app, ['192.0.2.4', '192.0.2.5'])).statusCode, 200)
  const refused = await bulk(b.app, ['192.0.2.6'])
  assert.equal(refused.statusCode, 429)
  assert.equal((JSON.parse(refused.body) as { code: string }).code, 'QUOTA_EXCEEDED')
  const refusedOnA = await bulk(a.app, ['192.0.2.7'])
  assert.equal(refusedOnA.statusCode, 429)

  // History written by both instances is one tenant history, and usage equals rows.
  await Promise.all([a.history.flush(), b.history.flush()])
  const search = await b.app.inject({ method: 'GET', url: '/api/v2/mgmt/enrich-logs/search-history?limit=100', headers: { 'x-api-key': key } })
  assert.equal(search.statusCode, 200)
  const results = (JSON.parse(search.body) as { results: Array<{ indicator: { value: string } }> }).results
  assert.deepEqual(results.map((r) => r.indicator.value).sort(), ['192.0.2.1', '192.0.2.2', '192.0.2.3', '192.0.2.4', '192.0.2.5'])
  const usage = await a.app.inject({ method: 'GET', url: '/api/v2/mgmt/usage', headers: { 'x-api-key': key } })
  const report = JSON.parse(usage.body) as { total: number, key: { used: number, remaining: number } }
  assert.equal(report.total, 5)
  assert.equal(report.key.used, 5)
  assert.equal(report.key.remaining, 0)

  // Health names no URL, schema password or key.
  const health = await a.app.inject({ method: 'GET', url: '/api/v2/ioc/health' })
  assert.equal(health.statusCode, 200)
  assert.equal(health.body.includes('postgres://'), false)
  assert.equal(health.body.includes('redis://'), false)
})
