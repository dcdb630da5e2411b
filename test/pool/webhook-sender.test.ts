/**
 * The sender's own guard at each attempt, for what the connection-time lookup cannot see: a webhook stored while
 * IOC_WEBHOOK_ALLOW_PRIVATE was 1 (http://, or a host written as a private address, which is connected to without a
 * lookup) is not sent to once the setting is 0; a receiver that never answers holds up neither the other deliveries nor
 * the hand-on of new hits. A real SQLite store and receivers on 127.0.0.1.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test, type TestContext } from 'node:test'
import { refusedAtSend, WebhookSender } from '../../src/pool/webhook-sender.ts'
import { SqliteStore } from '../../src/store/index.ts'
import { waitFor } from '../fixtures/read-history.ts'
import { newHit } from '../fixtures/retro-hits.ts'

const kSilent = { info: () => {}, warn: () => {}, error: () => {} }

test('refusedAtSend: with private addresses not allowed, only https:// to a name or a public address passes', () => {
  for (const url of ['http://127.0.0.1:8080/x', 'http://example.com/x']) assert.match(refusedAtSend(url, false) ?? '', /not https/, url)
  for (const url of ['https://127.0.0.1/x', 'https://10.1.2.3/x', 'https://[::1]/x', 'https://[::ffff:127.0.0.1]/x', 'https://0x7f.1/x', 'https://2130706433/x', 'https://169.254.169.254/x']) {
    assert.equal(refusedAtSend(url, false), 'the host is a non-public address', url)
  }
  for (const url of ['https://example.com/x', 'https://93.184.216.34/x', 'https://[2606:2800:220:1::1]/x']) assert.equal(refusedAtSend(url, false), null, url)
  for (const url of ['http://127.0.0.1:8080/x', 'https://10.1.2.3/x']) assert.equal(refusedAtSend(url, true), null, url)
})

async function receiver (t: TestContext): Promise<{ port: number, got: number }> {
  const state = { port: 0, got: 0 }
  const server = createServer((req, res) => { state.got++; req.resume(); res.end() })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(async () => { server.closeAllConnections(); await new Promise((resolve) => server.close(resolve)) })
  state.port = (server.address() as AddressInfo).port
  return state
}

test('webhooks stored with private addresses allowed are not sent to once they are not', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-sender-'))
  const store = new SqliteStore({ path: join(dir, 'db.sqlite') })
  t.after(async () => { await store.close(); rmSync(dir, { recursive: true, force: true }) })
  await store.migrate()
  const target = await receiver(t)
  const sender = new WebhookSender({ store, key: Buffer.alloc(32, 7), allowPrivate: false, retryBaseMs: 60_000, timeoutMs: 2_000, logger: kSilent })
  t.after(async () => { await sender.close() })
  const hooks: Array<{ id: string }> = []
  for (const url of [`http://127.0.0.1:${target.port}/plain`, `https://127.0.0.1:${target.port}/tls`]) {
    const hook = await store.webhooks.create({ tenant: 'lab', url, minScore: 0, description: '', secretSealed: sender.seal('whsec_test') })
    await store.webhooks.enqueue({ id: store.webhooks.newDeliveryId(), webhookId: hook.id, tenant: 'lab', body: '{"event":"retro_hunt.hits","hits":[]}', hits: 0 })
    hooks.push(hook)
  }
  sender.start()
  const errors = await waitFor('an attempt of each delivery', async () => {
    const out: Array<string | null> = []
    for (const hook of hooks) out.push((await store.webhooks.deliveries('lab', hook.id, 5))[0]?.lastError ?? null)
    return out.every((e) => e !== null) ? out : undefined
  }, 30_000)
  assert.match(errors[0] ?? '', /not https/)
  assert.equal(errors[1], 'the host is a non-public address')
  assert.equal(target.got, 0, 'the receiver on 127.0.0.1 got nothing')
  assert.equal(sender.state().delivered, 0)
})

test('a receiver that never answers holds up one delivery, not the others, nor the hand-on of new hits', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-sender-'))
  const store = new SqliteStore({ path: join(dir, 'db.sqlite') })
  t.after(async () => { await store.close(); rmSync(dir, { recursive: true, force: true }) })
  await store.migrate()
  // A receiver that reads the request and never answers, until the test ends.
  let hung = 0
  const silent = createServer((req) => { hung++; req.resume() })
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
  t.after(async () => { silent.closeAllConnections(); await new Promise((resolve) => silent.close(resolve)) })
  const healthy = await receiver(t)
  // An attempt may wait a minute for the silent receiver: far longer than anything below waits.
  const sender = new WebhookSender({ store, key: Buffer.alloc(32, 7), allowPrivate: true, retryBaseMs: 50, timeoutMs: 60_000, logger: kSilent })
  t.after(async () => { await sender.destroy() })
  const hook = async (tenant: string, port: number): Promise<{ id: string }> =>
    await store.webhooks.create({ tenant, url: `http://127.0.0.1:${port}/hook`, minScore: 0, description: '', secretSealed: sender.seal('whsec_test') })
  const stuck = await hook('slow', (silent.address() as AddressInfo).port)
  const fine = await hook('lab', healthy.port)
  await store.webhooks.enqueue({ id: store.webhooks.newDeliveryId(), webhookId: stuck.id, tenant: 'slow', body: '{"event":"retro_hunt.hits","hits":[]}', hits: 0 })
  sender.start()
  await waitFor('the silent receiver holding an attempt', () => hung > 0 ? true : undefined, 30_000)

  // A delivery queued while that attempt hangs is sent in the meantime.
  await store.webhooks.enqueue({ id: store.webhooks.newDeliveryId(), webhookId: fine.id, tenant: 'lab', body: '{"event":"retro_hunt.hits","hits":[]}', hits: 0 })
  await waitFor('the queued delivery sent beside the hanging one', () => healthy.got >= 1 ? true : undefined, 30_000)
  // A hit recorded meanwhile (as by the CLI, or a pass whose process died) is handed on and sent too.
  await store.retroHunt.addHits([newHit('lab', 'recorded-meanwhile.example', 90, 'malware')])
  await waitFor('the new hit handed on and sent', () => healthy.got >= 2 ? true : undefined, 30_000)
  // The receiver counts a request as it arrives; the sender counts it once the answer is back and recorded.
  const statuses = await waitFor('both deliveries recorded as delivered', async () => {
    const st = (await store.webhooks.deliveries('lab', fine.id, 5)).map((d) => d.status)
    return st.length === 2 && st.every((x) => x === 'delivered') ? st : undefined
  }, 30_000)
  assert.deepEqual(statuses, ['delivered', 'delivered'])
  assert.equal(sender.state().retried + sender.state().failed, 0, 'the hanging attempt has not ended')
  assert.equal(hung, 1)
  assert.equal(sender.state().delivered, 2)
  assert.equal(await store.webhooks.handOnHits(10, 10, () => '{}'), 0, 'nothing left to hand on')
})

test('a store that cannot be read is logged once per outage, not at every poll, and its end once', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-sender-'))
  const store = new SqliteStore({ path: join(dir, 'db.sqlite') })
  t.after(async () => { await store.close(); rmSync(dir, { recursive: true, force: true }) })
  await store.migrate()
  const lines: Array<{ level: string, msg: string }> = []
  const logger = { info: (_: object, msg: string) => { lines.push({ level: 'info', msg }) }, warn: (_: object, msg: string) => { lines.push({ level: 'warn', msg }) }, error: (_: object, msg: string) => { lines.push({ level: 'error', msg }) } }
  // The store's deliveries fail to be read, as in a database outage, for a number of polls.
  const claimDue = store.webhooks.claimDue.bind(store.webhooks)
  let failures = 0
  let down = true
  store.webhooks.claimDue = async (...args) => {
    if (down) {
      failures++
      throw new Error('PostgreSQL unavailable: connect ECONNREFUSED')
    }
    return await claimDue(...args)
  }
  const sender = new WebhookSender({ store, key: Buffer.alloc(32, 7), allowPrivate: true, retryBaseMs: 10, timeoutMs: 2_000, logger })
  t.after(async () => { await sender.close() })
  sender.start()
  await waitFor('several failed polls', () => failures >= 5 ? true : undefined, 30_000)
  down = false
  await waitFor('the store read again', () => lines.some((l) => l.msg === 'webhook deliveries are read again') ? true : undefined, 30_000)
  assert.deepEqual(lines.filter((l) => l.msg.startsWith('webhook deliveries')), [
    { level: 'error', msg: 'webhook deliveries could not be read (tried again every poll)' },
    { level: 'info', msg: 'webhook deliveries are read again' }
  ])
})
