/**
 * The fleet (docs/OPERATIONS.md "Run N instances"): two instances on one PostgreSQL schema. A key or allowlist write
 * on one is applied by the other's next request through PostgreSQL's change notifications, sessions are read from the
 * store on every request. Runs only when IOC_TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { test } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { pgServices, type Built } from '../helper.ts'

type Json = Record<string, any>

const kDb = process.env.IOC_TEST_DATABASE_URL
/** Listed by three sample feeds: malicious on its own (data/feeds/README.md). */
const kListed = '198.51.100.23'

/** Calls `probe` until it returns true; fails after `ms` (a generous bound: the machine may be busy). */
async function waitFor (what: string, probe: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const until = Date.now() + ms
  for (;;) {
    if (await probe()) return
    if (Date.now() > until) assert.fail(`${what}: not seen within ${ms} ms`)
    await new Promise((resolve) => setImmediate(resolve))
  }
}

async function call (s: Built, method: 'GET' | 'POST' | 'DELETE', url: string, key: string | null, payload?: unknown, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return await s.app.inject({ method, url, headers: { ...headers, ...(key === null ? {} : { 'x-api-key': key }) }, ...(payload === undefined ? {} : { payload: payload as object }) })
}

async function score (s: Built, key: string, value: string): Promise<number> {
  const res = await call(s, 'POST', '/api/v2/ioc/verdict', key, { indicator: { value } })
  assert.equal(res.statusCode, 200, res.body)
  return (res.json() as Json).risk.score as number
}

function schemaName (what: string): string {
  return `iocv_fleet_${what}_${randomBytes(4).toString('hex')}`
}

test('a key revoked and an allowlist entry added or deleted on one instance are applied by the other\'s next requests', async (t) => {
  if (kDb === undefined) {
    t.skip('IOC_TEST_DATABASE_URL not set')
    return
  }
  const { build } = pgServices(t, kDb, schemaName('inv'))
  const a = await build()
  const b = await build()
  const key = await a.makeKey(['verdict', 'verdict_bulk', 'mgmt'], { tenant: 'fleet-t' })
  const id = key.slice(5, 17)

  // B verifies the key and caches the tenant's (empty) allowlist.
  const listed = await score(b, key, kListed)
  assert.ok(listed > 0)
  // Each change is applied by the first request B answers after the notification reached it (not by B's re-read
  // interval, which is longer than the notification takes: the cached answer would stay until then).
  const applied = async (what: string, before: number): Promise<void> => {
    await waitFor(what, async () => b.fleet.changes.applied > before)
  }
  let before = b.fleet.changes.applied
  const added = await call(a, 'POST', '/api/v2/mgmt/allowlist', key, { kind: 'ip', value: kListed, reason: 'red team host' })
  assert.equal(added.statusCode, 201, added.body)
  await applied('the entry added on A, announced to B', before)
  assert.equal(await score(b, key, kListed), 0)
  before = b.fleet.changes.applied
  const deleted = await call(a, 'DELETE', `/api/v2/mgmt/allowlist/${(added.json() as Json).id as string}`, key)
  assert.equal(deleted.statusCode, 204)
  await applied('the entry deleted on A, announced to B', before)
  assert.equal(await score(b, key, kListed), listed)

  // The revocation is made by A's admin; B keeps answering the key until the notification arrives, then refuses it.
  const admin = await a.makeKey(['admin'], { tenant: 'fleet-t' })
  assert.equal(await score(b, key, kListed), listed)
  before = b.fleet.changes.applied
  const revoke = await call(a, 'DELETE', `/api/v2/mgmt/keys/${id}`, admin)
  assert.equal(revoke.statusCode, 200, revoke.body)
  await applied('the key revoked on A, announced to B', before)
  assert.equal((await call(b, 'POST', '/api/v2/ioc/verdict', key, { indicator: { value: kListed } })).json().code, 'INVALID_API_KEY')
})

test('a session signed out or a user disabled on one instance is refused by the other\'s next request', async (t) => {
  if (kDb === undefined) {
    t.skip('IOC_TEST_DATABASE_URL not set')
    return
  }
  const { build } = pgServices(t, kDb, schemaName('ses'))
  const a = await build()
  const b = await build()
  const password = 'a long analyst password'
  const signIn = async (username: string): Promise<{ cookie: string, csrf: string }> => {
    const res = await a.app.inject({ method: 'POST', url: '/dashboard/api/session', payload: { username, password } })
    assert.equal(res.statusCode, 200, res.body)
    const set = res.headers['set-cookie']
    const line = (Array.isArray(set) ? set : [set ?? '']).find((c) => c.startsWith('iocv_session=')) ?? ''
    return { cookie: line.split(';')[0] as string, csrf: (res.json() as Json).csrf as string }
  }
  const usage = async (cookie: string): Promise<number> => (await call(b, 'GET', '/api/v2/mgmt/usage', null, undefined, { cookie })).statusCode

  await a.store.accounts.createUser({ tenant: 'fleet-s', username: 'out.fleet', role: 'analyst', password })
  const out = await signIn('out.fleet')
  assert.equal(await usage(out.cookie), 200)
  const signOut = await a.app.inject({ method: 'DELETE', url: '/dashboard/api/session', headers: { cookie: out.cookie, 'x-csrf-token': out.csrf } })
  assert.ok(signOut.statusCode < 300, signOut.body)
  assert.equal(await usage(out.cookie), 401)

  await a.store.accounts.createUser({ tenant: 'fleet-s', username: 'off.fleet', role: 'analyst', password })
  const off = await signIn('off.fleet')
  assert.equal(await usage(off.cookie), 200)
  assert.equal(await a.store.accounts.disableUser('off.fleet'), true)
  assert.equal(await usage(off.cookie), 401)
})
