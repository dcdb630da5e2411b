/**
 * IntelService leases: a request holds the pool it leased across a reload, the replaced pool closes only after its
 * last lease is released, and close() / destroy() end every pool.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { IntelService } from '../../src/pool/intel-service.ts'
import { kSampleManifest, kTestIntelCache, sampleSnapshotData } from '../helper.ts'

const kSource = { manifest: kSampleManifest, cacheDir: kTestIntelCache, asnDir: null, countryDir: null }
const kParams = { mode: 'single', format: 'json', scoringVersion: null, signalDetails: 'none', evidenceDetails: 'none' } as const

test('a lease taken before a reload keeps scoring on its pool until released; then that pool closes', async () => {
  const intel = new IntelService(await sampleSnapshotData(), { size: 0, cacheSize: 100 }, kSource)
  await intel.ready()
  const lease = intel.lease()
  await intel.reload()
  const fresh = intel.lease()
  assert.notEqual(fresh.pool, lease.pool, 'new leases get the new pool')
  fresh.release()
  const out = await lease.pool.runSingle([null, '192.0.2.1', null, null], kParams)
  assert.equal(out.type, 'ip', 'the old pool still scores for its lease holder')
  lease.release()
  lease.release() // idempotent
  await new Promise((resolve) => setImmediate(resolve))
  await assert.rejects(lease.pool.runSingle([null, '192.0.2.1', null, null], kParams), { code: 'POOL_CLOSED' })
  await intel.close()
})

test('close() is idempotent, waits for held leases and then refuses new ones with POOL_CLOSED', async () => {
  const intel = new IntelService(await sampleSnapshotData(), { size: 0, cacheSize: 100 }, kSource)
  const lease = intel.lease()
  let closed = false
  const closing = intel.close().then(() => { closed = true })
  await new Promise((resolve) => setTimeout(resolve, 20))
  assert.equal(closed, false, 'close waits for the held lease')
  assert.throws(() => intel.lease(), { code: 'POOL_CLOSED' })
  lease.release()
  await closing
  await intel.close()
  await assert.rejects(intel.reload(), { code: 'POOL_CLOSED' })
})

test('destroy() stops the pools now, held leases or not', async () => {
  const intel = new IntelService(await sampleSnapshotData(), { size: 1, cacheSize: 100 }, kSource)
  await intel.ready()
  const lease = intel.lease()
  await intel.destroy()
  await assert.rejects(lease.pool.runSingle([null, '192.0.2.1', null, null], kParams), { code: 'POOL_CLOSED' })
  assert.throws(() => intel.lease(), { code: 'POOL_CLOSED' })
})
