/**
 * Quota counter contract: the same tests against MemoryQuota and (with IOC_TEST_REDIS_URL) RedisQuota.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { test } from 'node:test'
import { Redis } from 'ioredis'
import { RedisQuota, type UsageSource } from '../../src/store/quota.ts'
import { stallRelay } from '../fixtures/stall-relay.ts'
import { quotaBackends } from './backends.ts'

const kRedisUrl = process.env.IOC_TEST_REDIS_URL

const kDay = '2024-04-10'

/** A usage source with fixed counts, recording how often it is asked. */
function source (counts: Record<string, number> = {}, delayMs = 0): UsageSource & { calls: number } {
  const s = {
    calls: 0,
    async usageForKey (keyId: string, day: string): Promise<number> {
      s.calls++
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs))
      return counts[`${keyId}/${day}`] ?? 0
    }
  }
  return s
}

for (const backend of quotaBackends) {
  test(`${backend.name} contract`, async (t) => {
    if (backend.skip !== null) {
      t.skip(backend.skip)
      return
    }
    const h = await backend.open()
    t.after(() => h.cleanup())

    await t.test('with limit 5, reserving 5 is admitted and one more is refused until the next UTC day', async () => {
      const now = Date.UTC(2024, 3, 10, 23, 59, 30)
      const q = h.open(source(), () => now)
      assert.deepEqual(await q.reserve('key-five', kDay, 5, 5), { ok: true, used: 5 })
      assert.deepEqual(await q.reserve('key-five', kDay, 1, 5), { ok: false, used: 5, retryAfterSeconds: 30 })
      assert.equal(await q.used('key-five', kDay), 5)
      assert.deepEqual(await q.reserve('key-five', '2024-04-11', 1, 5), { ok: true, used: 1 }, 'another day counts apart')
    })

    await t.test('a reservation that does not fit counts nothing', async () => {
      const q = h.open(source())
      assert.deepEqual(await q.reserve('key-33', kDay, 3, 5), { ok: true, used: 3 })
      const refused = await q.reserve('key-33', kDay, 3, 5)
      assert.equal(refused.ok, false)
      assert.equal(refused.used, 3)
      assert.equal(await q.used('key-33', kDay), 3)
      assert.deepEqual(await q.reserve('key-33', kDay, 2, 5), { ok: true, used: 5 })
      assert.equal((await q.reserve('key-big', kDay, 6, 5)).ok, false, 'a batch larger than the whole quota is refused')
      assert.deepEqual(await q.reserve('key-zero', kDay, 0, 0), { ok: true, used: 0 })
    })

    await t.test('refusals carry a Retry-After of at least one second and at most a day', async () => {
      const q = h.open(source())
      await q.reserve('key-retry', kDay, 1, 1)
      const r = await q.reserve('key-retry', kDay, 1, 1)
      assert.ok(!r.ok && r.retryAfterSeconds >= 1 && r.retryAfterSeconds <= 86_400)
    })

    await t.test('release gives a reservation back and never goes below zero', async () => {
      const q = h.open(source())
      await q.reserve('key-rel', kDay, 4, 5)
      await q.release('key-rel', kDay, 4)
      assert.equal(await q.used('key-rel', kDay), 0)
      assert.deepEqual(await q.reserve('key-rel', kDay, 5, 5), { ok: true, used: 5 })
      await q.release('key-rel', kDay, 50)
      assert.equal(await q.used('key-rel', kDay), 0)
      await q.release('key-never', kDay, 3)
      assert.equal(await q.used('key-never', kDay), 0)
    })

    await t.test('counters start from the usage the store already holds', async () => {
      const store = source({ [`key-seed/${kDay}`]: 4 })
      const q = h.open(store)
      assert.equal((await q.reserve('key-seed', kDay, 2, 5)).ok, false)
      assert.deepEqual(await q.reserve('key-seed', kDay, 1, 5), { ok: true, used: 5 })
      assert.equal(store.calls, 1, 'the store is read once per key and day')
    })

    await t.test('concurrent reservations never admit more than the limit', async () => {
      const store = source({}, 10) // slow seed: every caller arrives while it loads
      const counters = backend.shared ? [h.open(store), h.open(store)] : [h.open(store)]
      const results = await Promise.all(Array.from({ length: 100 }, (_, i) =>
        (counters[i % counters.length] as typeof counters[number]).reserve('key-race', kDay, 1, 20)))
      assert.equal(results.filter((r) => r.ok).length, 20)
      assert.equal(await counters[0]?.used('key-race', kDay), 20)
      const batches = await Promise.all(Array.from({ length: 10 }, (_, i) =>
        (counters[i % counters.length] as typeof counters[number]).reserve('key-race-3', kDay, 3, 10)))
      assert.equal(batches.filter((r) => r.ok).length, 3)
      assert.equal(await counters[0]?.used('key-race-3', kDay), 9)
    })

    await t.test('invalid arguments are rejected with INVALID_REQUEST', async () => {
      const q = h.open(source())
      await assert.rejects(q.reserve('', kDay, 1, 5), { code: 'INVALID_REQUEST' })
      await assert.rejects(q.reserve('k', '2024-4-10', 1, 5), { code: 'INVALID_REQUEST' })
      await assert.rejects(q.reserve('k', kDay, -1, 5), { code: 'INVALID_REQUEST' })
      await assert.rejects(q.reserve('k', kDay, 1.5, 5), { code: 'INVALID_REQUEST' })
      await assert.rejects(q.reserve('k', kDay, 1, -5), { code: 'INVALID_REQUEST' })
      await assert.rejects(q.release('k', kDay, -1), { code: 'INVALID_REQUEST' })
    })

    await t.test('a closed counter rejects with STORE_CLOSED and closing twice is harmless', async () => {
      const q = h.open(source())
      await q.ping()
      await q.close()
      await q.close()
      await assert.rejects(q.reserve('k', kDay, 1, 5), { code: 'STORE_CLOSED' })
    })

    if (h.redis !== null) {
      const redis = h.redis
      await t.test('a Redis counter expires two days after its day ends', async () => {
        const q = h.open(source())
        const day = '2099-01-01'
        await q.reserve('key-ttl', day, 1, 5)
        const expireAt = Number(await redis.client.call('EXPIRETIME', redis.key('key-ttl', day)))
        assert.equal(expireAt, Date.UTC(2099, 0, 4) / 1000)
      })

      await t.test('a Redis counter lost by Redis is seeded again from the store', async () => {
        const store = source({ [`key-lost/${kDay}`]: 7 })
        const q = h.open(store)
        await q.reserve('key-lost', kDay, 1, 100)
        await redis.client.del(redis.key('key-lost', kDay))
        assert.equal(await q.used('key-lost', kDay), 7)
        assert.equal(store.calls, 2)
      })
    }
  })
}

test('an unreachable Redis rejects with QUOTA_UNAVAILABLE and never reveals the URL or its password', async () => {
  const url = 'redis://quota-user:Sup3rSecretPw@127.0.0.1:1/0'
  const q = new RedisQuota({ url, store: source(), connectTimeoutMs: 200 })
  try {
    const err = await q.reserve('k', kDay, 1, 5).then(() => null, (e: unknown) => e)
    assert.equal((err as { code?: string } | null)?.code, 'QUOTA_UNAVAILABLE')
    let e: unknown = err
    while (e !== null && e !== undefined) {
      for (const text of [(e as Error).message, (e as Error).stack, JSON.stringify(e)]) {
        assert.ok(!String(text).includes('Sup3rSecretPw') && !String(text).includes(url), String(text))
      }
      e = (e as { cause?: unknown }).cause
    }
  } finally {
    await q.close()
  }
})

test('a Redis that stops answering on an open connection fails reservations with QUOTA_UNAVAILABLE; then they pass', {
  skip: kRedisUrl === undefined || kRedisUrl === '' ? 'IOC_TEST_REDIS_URL not set' : false,
  timeout: 60_000
}, async (t) => {
  const target = new URL(kRedisUrl as string)
  const relay = await stallRelay(target.hostname, Number(target.port === '' ? 6379 : target.port))
  t.after(() => { relay.close() })
  const url = new URL(kRedisUrl as string)
  url.hostname = '127.0.0.1'
  url.port = String(relay.port)
  const prefix = `iocv_test_${randomBytes(6).toString('hex')}:`
  const q = new RedisQuota({ url: url.href, store: source(), prefix, commandTimeoutMs: 300 })
  const cleanup = new Redis(kRedisUrl as string)
  t.after(async () => {
    await q.close()
    const keys = await cleanup.keys(`${prefix}*`)
    if (keys.length > 0) await cleanup.del(...keys)
    cleanup.disconnect()
  })
  assert.equal((await q.reserve('k', kDay, 1, 100)).ok, true)
  relay.stall()
  // Without a bound this would wait for as long as Redis is silent: the test's own timeout.
  const err = await q.reserve('k', kDay, 1, 100).then(() => null, (e: unknown) => e)
  assert.equal((err as { code?: string } | null)?.code, 'QUOTA_UNAVAILABLE')
  relay.resume()
  let ok = false
  for (let i = 0; i < 100 && !ok; i++) {
    ok = await q.reserve('k', kDay, 1, 100).then((r) => r.ok, () => false)
    if (!ok) await new Promise((resolve) => setTimeout(resolve, 50))
  }
  assert.ok(ok, 'reservations pass again once Redis answers')
})
