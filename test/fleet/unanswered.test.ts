/**
 * The fleet against a PostgreSQL address that accepts connections and never answers (a hung server, a proxy whose
 * backend is gone): starting fails with a clear error within the connection timeout, campaigning keeps retrying
 * without holding close, and nothing names the password. Needs no PostgreSQL: the "server" is a socket on 127.0.0.1.
 */
import assert from 'node:assert/strict'
import { createServer, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'
import { test, type TestContext } from 'node:test'
import pino from 'pino'
import { StoreError } from '../../src/errors.ts'
import { Election } from '../../src/fleet/election.ts'
import { Fleet } from '../../src/fleet/fleet.ts'

const kPassword = 'fleet-secret-pw'
const kTimeoutMs = 300

/** A listener on 127.0.0.1 that accepts every connection and never writes a byte; it counts the connections. */
async function unanswered (t: TestContext): Promise<{ url: string, accepted: () => number }> {
  const sockets: Socket[] = []
  const server = createServer((socket) => {
    sockets.push(socket)
    socket.on('error', () => {})
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(async () => {
    for (const s of sockets) s.destroy()
    await new Promise((resolve) => server.close(resolve))
  })
  const { port } = server.address() as AddressInfo
  return { url: `postgres://iocv:${kPassword}@127.0.0.1:${port}/test`, accepted: () => sockets.length }
}

test('a fleet whose PostgreSQL never answers fails to start with a clear error, not a hang', { timeout: 30_000 }, async (t) => {
  const server = await unanswered(t)
  const fleet = new Fleet({ url: server.url, schema: 'iocv_unanswered', instance: 'unanswered-a', logger: pino({ level: 'silent' }), connectionTimeoutMs: kTimeoutMs })
  const started = Date.now()
  const err = await fleet.start().then(() => null, (e: unknown) => e)
  assert.ok(err instanceof StoreError, `expected a StoreError, got ${String(err)}`)
  assert.equal(err.code, 'STORE_UNAVAILABLE')
  assert.match(err.message, /cannot listen for fleet notifications/)
  assert.doesNotMatch(`${err.message} ${String((err as Error & { cause?: unknown }).cause)}`, new RegExp(kPassword))
  assert.ok(Date.now() - started < 20_000, 'start waited far past its connection timeout')
  assert.ok(server.accepted() >= 1)
  await fleet.close()
})

test('an election whose connection is never answered retries, reports it, and closes at once', { timeout: 30_000 }, async (t) => {
  const server = await unanswered(t)
  const errors: StoreError[] = []
  let leads = 0
  const election = new Election({
    url: server.url,
    schema: 'iocv_unanswered',
    applicationName: 'ioc-verdict leader unanswered-b',
    connectionTimeoutMs: kTimeoutMs,
    onLead: () => { leads++ },
    onLose: () => {},
    onError: (e) => { errors.push(e) }
  })
  election.start()
  // Two attempts timed out and reported: the loop goes on after a connection that never came up.
  const until = Date.now() + 20_000
  while (errors.length < 2 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20))
  assert.ok(errors.length >= 2, `attempts reported: ${errors.length}`)
  for (const e of errors) {
    assert.equal(e.code, 'STORE_UNAVAILABLE')
    assert.match(e.message, /leader election/)
    assert.doesNotMatch(e.message, new RegExp(kPassword))
  }
  assert.ok(server.accepted() >= 2)
  // Closing while an attempt hangs (one is under way or starts within the retry wait) ends it.
  while (server.accepted() === errors.length && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 5))
  await election.close()
  assert.equal(election.leading, false)
  assert.equal(leads, 0)
})
