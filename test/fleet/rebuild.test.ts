/**
 * Fleet.rebuild: a change that arrives while a rebuild runs gets a rebuild of its own after it (the running one may
 * have read the feeds' copies before the change), shared by every call made meanwhile. Run on an instance alone
 * (no PostgreSQL), where a rebuild is the snapshot service's reload.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Fleet } from '../../src/fleet/fleet.ts'
import type { FeedRefresher } from '../../src/intel/refresher.ts'
import type { IntelService } from '../../src/pool/intel-service.ts'

test('a rebuild asked for while one runs runs after it, once for every call made meanwhile', async () => {
  const fleet = new Fleet({ url: null, schema: 'public', instance: 'alone', logger: { info: () => {}, warn: () => {} } })
  await fleet.start()
  const started: Array<() => void> = []
  let reloads = 0
  // A reload that finishes when the test says so, and names itself by its number.
  const intel = {
    reload: async () => {
      const n = ++reloads
      await new Promise<void>((resolve) => started.push(resolve))
      return { version: `v${n}`, data_timestamp: '2026-11-27T00:00:00.000Z', warm: true, build_ms: 0 }
    }
  }
  fleet.attach(intel as unknown as IntelService, {} as unknown as FeedRefresher)
  /** Lets pending callbacks run until `n` reloads started (a bounded number of turns, not a timer). */
  const reloadsStarted = async (n: number): Promise<number> => {
    for (let turn = 0; turn < 1000 && started.length < n; turn++) await new Promise((resolve) => setImmediate(resolve))
    return started.length
  }
  const first = fleet.rebuild()
  const second = fleet.rebuild()
  const third = fleet.rebuild()
  await reloadsStarted(2)
  assert.equal(reloads, 1, 'one rebuild at a time')
  started[0]?.()
  assert.equal((await first).version, 'v1')
  assert.equal(await reloadsStarted(2), 2, 'the calls made during the first get a rebuild after it')
  assert.equal(reloads, 2, 'one, shared by all of them')
  started[1]?.()
  assert.deepEqual([(await second).version, (await third).version], ['v2', 'v2'])
  // Nothing waits any more: the next call runs at once.
  const fourth = fleet.rebuild()
  assert.equal(await reloadsStarted(3), 3)
  started[2]?.()
  assert.equal((await fourth).version, 'v3')
  assert.equal(reloads, 3)
  await fleet.close()
})
