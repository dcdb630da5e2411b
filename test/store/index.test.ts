/**
 * openStore and openQuota: the entry points the service uses.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { openQuota, openStore, PERMISSIONS, type StoreOptions } from '../../src/store/index.ts'

test('openStore returns a migrated SQLite store ready for keys and history', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-open-'))
  const store = await openStore({ kind: 'sqlite', path: join(dir, 'store.db') })
  t.after(async () => {
    await store.close()
    rmSync(dir, { recursive: true, force: true })
  })
  assert.equal(await store.countKeys(), 0)
  const { key, record } = await store.createKey({ tenant: 'acme', permissions: [...PERMISSIONS], quota: 10 })
  assert.deepEqual(await store.verifyKey(key), record)

  const quota = await openQuota({ kind: 'memory', store })
  t.after(() => quota.close())
  assert.deepEqual(await quota.reserve(record.id, '2024-01-01', 10, 10), { ok: true, used: 10 })
})

test('openStore refuses an unknown kind with INVALID_OPTIONS', async () => {
  await assert.rejects(openStore({ kind: 'mysql' } as unknown as StoreOptions), { code: 'INVALID_OPTIONS' })
})

test('openQuota with Redis pings the server at startup', async (t) => {
  const url = process.env.IOC_TEST_REDIS_URL
  if (url === undefined || url === '') {
    t.skip('IOC_TEST_REDIS_URL not set')
    return
  }
  const quota = await openQuota({ kind: 'redis', url, prefix: `iocv_test_open_${process.pid}:`, store: { usageForKey: async () => 0 } })
  await quota.ping()
  await quota.close()
  await assert.rejects(openQuota({ kind: 'redis', url: 'redis://127.0.0.1:1', store: { usageForKey: async () => 0 } }), { code: 'QUOTA_UNAVAILABLE' })
})
