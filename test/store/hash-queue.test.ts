/**
 * The password hash queue (src/store/hash-queue.ts): bounded, and fair between keys (clients' addresses) when full.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { HashQueue, HashQueueDisplaced } from '../../src/store/hash-queue.ts'

test('a full queue turns a newcomer away unless another key holds two or more places; then its newest gives way', async () => {
  const q = new HashQueue(1, 3)
  const ran: string[] = []
  let release: () => void = () => {}
  const holding = q.run(async () => { await new Promise<void>((resolve) => { release = resolve }) }, ['a'])
  const job = (name: string) => async (): Promise<string> => { ran.push(name); return name }
  const a1 = q.tryRun(job('a1'), ['a'])
  const a2 = q.tryRun(job('a2'), ['a'])
  const a3 = q.tryRun(job('a3'), ['a'])
  assert.ok(a1 !== null && a2 !== null && a3 !== null)
  assert.equal(q.full, true)
  // Another key takes the place of a's newest waiter, then of its next newest; a keeps one.
  const b = q.tryRun(job('b'), ['b'])
  assert.ok(b !== null)
  await assert.rejects(a3, HashQueueDisplaced)
  const c = q.tryRun(job('c'), ['c'])
  assert.ok(c !== null)
  await assert.rejects(a2, HashQueueDisplaced)
  // Now every key holds one place: a newcomer of any key, a's included, is turned away.
  assert.equal(q.tryRun(job('d'), ['d']), null)
  assert.equal(q.tryRun(job('a4'), ['a']), null)
  // A key that holds the most places is not displaced by itself.
  release()
  await holding
  assert.deepEqual(await Promise.all([a1, b, c]), ['a1', 'b', 'c'])
  assert.deepEqual(ran, ['a1', 'b', 'c'], 'the rest ran in arrival order')
  assert.equal(q.full, false)
})

test('one key filling the queue alone keeps its places: its next attempt is turned away, as before', async () => {
  const q = new HashQueue(1, 2)
  let release: () => void = () => {}
  const holding = q.run(async () => { await new Promise<void>((resolve) => { release = resolve }) }, ['x'])
  const x1 = q.tryRun(async () => 1, ['x'])
  const x2 = q.tryRun(async () => 2, ['x'])
  assert.equal(q.tryRun(async () => 3, ['x']), null)
  release()
  await holding
  assert.deepEqual(await Promise.all([x1, x2]), [1, 2])
})

test('an attempt waits under each of its keys: one username from many addresses gives its places up to another user', async () => {
  const q = new HashQueue(1, 3)
  let release: () => void = () => {}
  const holding = q.run(async () => { await new Promise<void>((resolve) => { release = resolve }) }, ['a:1', 'u:mallory'])
  const m = ['a:2', 'a:3', 'a:4'].map((a) => q.tryRun(async () => a, [a, 'u:mallory']))
  assert.ok(m.every((p) => p !== null))
  // Each address holds one place, the username three: another user's attempt takes the newest of them.
  assert.equal(q.refuses(['a:9', 'u:alice']), false)
  const alice = q.tryRun(async () => 'alice', ['a:9', 'u:alice'])
  assert.ok(alice !== null)
  await assert.rejects(m[2] as Promise<string>, HashQueueDisplaced)
  // The same user from yet another address is one of the key's own: turned away, as before.
  assert.equal(q.refuses(['a:10', 'u:mallory']), true)
  assert.equal(q.tryRun(async () => 'again', ['a:10', 'u:mallory']), null)
  release()
  await holding
  assert.deepEqual(await Promise.all([m[0], m[1], alice]), ['a:2', 'a:3', 'alice'])
})
