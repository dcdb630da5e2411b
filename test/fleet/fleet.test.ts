/**
 * The fleet (docs/OPERATIONS.md "Run N instances"): two instances on one PostgreSQL schema. A key or allowlist write
 * on one is applied by the other's next request through PostgreSQL's change notifications, sessions are read from the
 * store on every request. One instance leads: it alone fetches the feeds and publishes the snapshot, which the other
 * adopts, so both report one identity; when it goes, the other leads. Runs only when IOC_TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test, type TestContext } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import pg from 'pg'
import { pgServices, smallRegistries, type Built } from '../helper.ts'

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

test('instances starting together on an empty schema make one bootstrap key between them', async (t) => {
  if (kDb === undefined) {
    t.skip('IOC_TEST_DATABASE_URL not set')
    return
  }
  const { build } = pgServices(t, kDb, schemaName('boot'), { IOC_BOOTSTRAP_KEY: '1' })
  const started = await Promise.all([build(), build(), build()])
  assert.equal(started.filter((s) => s.bootstrapKey !== null).length, 1, 'one instance printed a bootstrap key')
  const keys = await (started[0] as Built).store.listKeys()
  assert.equal(keys.filter((k) => k.tenant === 'default').length, 1, 'and the store holds one')
  // A later start finds a key and makes none.
  assert.equal((await build()).bootstrapKey, null)
})

test('adds on two instances at once never take a tenant past 1,000 active allowlist entries', async (t) => {
  if (kDb === undefined) {
    t.skip('IOC_TEST_DATABASE_URL not set')
    return
  }
  const { build } = pgServices(t, kDb, schemaName('cap'))
  const a = await build()
  const b = await build()
  const key = await a.makeKey(['mgmt'], { tenant: 'fleet-cap' })
  for (let i = 0; i < 990; i++) {
    await a.store.addAllowEntry({ tenant: 'fleet-cap', kind: 'domain', value: `pre-${i}.example`, reason: 'seed', createdBy: 'test', expiresAt: null })
  }
  const answers = await Promise.all(Array.from({ length: 40 }, async (_, i) => await call(i % 2 === 0 ? a : b, 'POST', '/api/v2/mgmt/allowlist', key, { kind: 'domain', value: `race-${i}.example`, reason: 'race' })))
  const accepted = answers.filter((r) => r.statusCode === 201).length
  for (const r of answers.filter((x) => x.statusCode !== 201)) assert.equal(r.statusCode, 400, r.body)
  let stored = 0
  for (let cursor: string | null = null; ;) {
    const page = (await call(b, 'GET', `/api/v2/mgmt/allowlist?limit=500${cursor === null ? '' : `&cursor=${cursor}`}`, key)).json() as Json
    stored += (page.entries as unknown[]).length
    cursor = page.next_cursor as string | null
    if (cursor === null) break
  }
  assert.equal(stored, 1000, 'the bound, exactly: adds of the tenant take turns on every instance')
  assert.equal(accepted, 10, 'every entry answered 201 is stored, and only those')
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

/** A feed host on 127.0.0.1 serving a netset the test sets; it counts requests. */
async function feedHost (t: TestContext): Promise<{ url: string, requests: IncomingMessage[], serve: (body: string) => void }> {
  let body = ''
  const requests: IncomingMessage[] = []
  const server = createServer((req, res) => {
    requests.push(req)
    res.writeHead(200, { 'content-type': 'text/plain' })
    res.end(body)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/feed`, requests, serve: (b) => { body = b } }
}

/** n public addresses of 45.(100 + seed).0.0/16, one a line (private ranges are scored as such, whatever lists them). */
function netset (n: number, seed: number): string {
  const lines = ['# fleet test feed']
  for (let i = 0; i < n; i++) lines.push(`45.${100 + seed}.${i >> 8}.${i & 255}`)
  return lines.join('\n') + '\n'
}

/**
 * Services on one fresh schema fetching one feed from `url` every second; each compiles into its own data dir's cache
 * with cut-down registries (no assertion reads them).
 */
function fleetOf (t: TestContext, url: string, what: string): { build: () => Promise<Built> } {
  const dir = mkdtempSync(join(tmpdir(), 'ioc-fleet-test-'))
  t.after(() => { rmSync(dir, { recursive: true, force: true }) })
  const manifest = join(dir, 'manifest.json')
  writeFileSync(manifest, JSON.stringify({
    feeds: [{ name: 'fleet_list', format: 'netset', url, refresh_seconds: 1, timeout_seconds: 5, direction: 'malicious', group: 'threat_feed', subgroup: 'attack_source', category: 'abuse', confidence: 0.8, half_life_days: 0 }]
  }))
  return pgServices(t, kDb as string, schemaName(what), { IOC_FEEDS: manifest, IOC_INTEL_CACHE_DIR: '', ...smallRegistries(), IOC_FEED_ATTEMPTS: '1' })
}

async function json (s: Built, url: string): Promise<Json> {
  const res = await s.app.inject({ method: 'GET', url, headers: { 'x-api-key': s.key } })
  return res.json() as Json
}

/** What a client sees of an instance's snapshot: health's identity and the sources route's. */
async function identity (s: Built): Promise<{ version: string, data_timestamp: string, sources: string }> {
  const health = await json(s, '/api/v2/ioc/health')
  const sources = await json(s, '/api/v2/mgmt/intel/sources')
  return { version: health.checks.intel.version, data_timestamp: health.checks.intel.data_timestamp, sources: sources.snapshot.version }
}

test('one instance leads: it alone fetches, publishes each snapshot, and both serve one identity; the other leads when it goes', async (t) => {
  if (kDb === undefined) {
    t.skip('IOC_TEST_DATABASE_URL not set')
    return
  }
  const host = await feedHost(t)
  host.serve(netset(50, 1))
  const { build } = fleetOf(t, host.url, 'lead')
  const a = await build()
  const b = await build()
  // Started before any fetch, the leader publishes a snapshot without the feed, then one with it after its first fetch.
  const unlisted = await score(a, a.key, '45.109.0.7')
  await waitFor('one leader, and both serving its generation with the feed', async () => {
    const [sa, sb] = [a.fleet.status(), b.fleet.status()]
    return sa !== null && sb !== null && a.fleet.leading !== b.fleet.leading && sa.generation !== null && sa.generation === sb.generation &&
      await score(a, a.key, '45.101.0.7') > unlisted && await score(b, b.key, '45.101.0.7') > unlisted && sa.generation === b.fleet.status()?.generation
  }, 60_000)
  const [leader, follower] = a.fleet.leading ? [a, b] : [b, a]
  assert.equal(follower.feeds.fetches, 0, 'a follower never fetches')
  // Every request the host saw is one the leader made (one fetch per refresh for the whole fleet).
  await waitFor('the leader\'s third fetch', async () => leader.feeds.fetches >= 3)
  await waitFor('the host\'s count meeting the leader\'s', async () => host.requests.length === leader.feeds.fetches)
  assert.equal(follower.feeds.fetches, 0)
  assert.deepEqual(await identity(follower), await identity(leader))
  const sources = await json(follower, '/api/v2/mgmt/intel/sources')
  assert.equal(sources.fleet.role, 'follower')
  assert.equal(sources.fleet.leader, leader.fleet.instance)
  assert.equal(sources.fleet.generation, leader.fleet.status()?.generation)

  // A changed feed: the leader rebuilds and publishes, the follower adopts; a newly listed address scores the same on both.
  const first = leader.fleet.status()?.generation as number
  assert.equal(await score(follower, follower.key, '45.102.0.7'), unlisted)
  host.serve(netset(60, 2))
  await waitFor('the next generation, on both', async () => {
    const g = leader.fleet.status()?.generation ?? 0
    return g > first && follower.fleet.status()?.generation === g
  }, 60_000)
  assert.ok(await score(follower, follower.key, '45.102.0.7') > unlisted)
  assert.equal(await score(follower, follower.key, '45.102.0.7'), await score(leader, leader.key, '45.102.0.7'))
  assert.deepEqual(await identity(follower), await identity(leader))
  assert.equal(follower.feeds.fetches, 0)

  // The leader goes: the follower leads, fetches from now on, and a third instance starts on the published generation.
  const generation = follower.fleet.status()?.generation
  await leader.app.close()
  await waitFor('the follower leading', async () => follower.fleet.leading)
  await waitFor('the new leader fetching', async () => follower.feeds.fetches > 0)
  const c = await build()
  assert.equal(c.fleet.status()?.generation, generation, 'the published generation, loaded at start')
  assert.equal(c.fleet.adopted, 1)
  assert.equal(c.fleet.leading, false)
  assert.deepEqual(await identity(c), await identity(follower))
  assert.equal(c.feeds.fetches, 0)
})

test('a follower that cannot verify the published snapshot keeps serving its own and reports degraded', async (t) => {
  if (kDb === undefined) {
    t.skip('IOC_TEST_DATABASE_URL not set')
    return
  }
  const host = await feedHost(t)
  host.serve(netset(50, 1))
  const schema = schemaName('bad')
  const dir = mkdtempSync(join(tmpdir(), 'ioc-fleet-test-'))
  t.after(() => { rmSync(dir, { recursive: true, force: true }) })
  const manifest = join(dir, 'manifest.json')
  writeFileSync(manifest, JSON.stringify({
    feeds: [{ name: 'fleet_list', format: 'netset', url: host.url, refresh_seconds: 3600, timeout_seconds: 5, direction: 'malicious', group: 'threat_feed', subgroup: 'attack_source', category: 'abuse', confidence: 0.8, half_life_days: 0 }]
  }))
  const { build } = pgServices(t, kDb, schema, { IOC_FEEDS: manifest, IOC_INTEL_CACHE_DIR: '', ...smallRegistries() })
  const a = await build()
  const b = await build()
  // Started before any fetch, the leader publishes a snapshot without the feed, then one with it after its first fetch
  // (and no other: the feed is fetched again in an hour).
  const unlisted = await score(a, a.key, '45.109.0.7')
  await waitFor('both serving one generation, with the feed', async () => {
    const g = a.fleet.status()?.generation
    return g != null && g === b.fleet.status()?.generation && a.fleet.leading !== b.fleet.leading &&
      await score(a, a.key, '45.101.0.7') > unlisted && await score(b, b.key, '45.101.0.7') > unlisted
  }, 60_000)
  const follower = a.fleet.leading ? b : a
  const before = await identity(follower)
  assert.equal((await json(follower, '/api/v2/ioc/health')).status, 'ok')

  // A next generation whose bytes do not match its digest (one byte changed), announced as the leader would.
  const admin = new pg.Client({ connectionString: kDb })
  await admin.connect()
  t.after(async () => { await admin.end() })
  const s = `"${schema}"`
  await admin.query('BEGIN')
  const { rows } = await admin.query(`SELECT max(generation) AS g FROM ${s}.intel_generations`)
  const g = Number(rows[0].g)
  await admin.query(`INSERT INTO ${s}.intel_generations SELECT generation + 1, digest, bytes, chunks, version, data_timestamp, published_by, now() FROM ${s}.intel_generations WHERE generation = $1`, [g])
  await admin.query(`INSERT INTO ${s}.intel_chunks SELECT generation + 1, seq, CASE WHEN seq = 0 THEN overlay(data placing '\\x00'::bytea from 100) ELSE data END FROM ${s}.intel_chunks WHERE generation = $1`, [g])
  await admin.query('SELECT pg_notify($1, $2)', ['ioc_verdict_intel', `${schema}|${g + 1}`])
  await admin.query('COMMIT')

  await waitFor('the follower degraded', async () => follower.fleet.error !== null)
  const health = await json(follower, '/api/v2/ioc/health')
  assert.equal(health.status, 'degraded')
  assert.equal(health.checks.intel.fleet.generation, g)
  assert.equal(health.checks.intel.fleet.published_generation, g + 1)
  assert.match(health.reasons.join(' '), /published snapshot/)
  const after = await identity(follower)
  assert.deepEqual(after, before, 'the snapshot it served before')
  assert.ok(await score(follower, follower.key, '45.101.0.7') > unlisted, 'and it keeps answering from it')
})

test('health goes degraded while no instance has led for 30 s (a leader that holds its lock but is gone), ok once one leads', { timeout: 180_000 }, async (t) => {
  if (kDb === undefined) {
    t.skip('IOC_TEST_DATABASE_URL not set')
    return
  }
  const schema = schemaName('leaderless')
  // A session that holds the leader lock and never heartbeats: as a leader process stopped with SIGSTOP.
  const holder = new pg.Client({ connectionString: kDb })
  await holder.connect()
  t.after(async () => { await holder.end().catch(() => {}) })
  await holder.query('SELECT pg_advisory_lock(hashtext($1))', [`ioc-verdict:leader:${schema}`])
  const { build } = pgServices(t, kDb, schema, { IOC_INTEL_CACHE_DIR: '', ...smallRegistries() })
  const started = Date.now()
  const a = await build()
  const health = async (): Promise<Json> => await json(a, '/api/v2/ioc/health')
  const reason = 'no instance of the fleet leads: feeds are not fetched'
  let h = await health()
  assert.equal(h.checks.intel.fleet.role, 'follower')
  assert.ok(!(h.reasons as string[]).includes(reason), 'not at once: a failover takes a heartbeat or two')
  for (;;) {
    h = await health()
    if ((h.reasons as string[]).includes(reason)) break
    assert.ok(Date.now() - started < 120_000, `no leader for two minutes, yet health says ${JSON.stringify(h)}`)
    await new Promise((resolve) => setTimeout(resolve, 500))
  }
  assert.equal(h.status, 'degraded')
  assert.ok(Date.now() - started >= 30_000, 'only after 30 s without a leader')
  assert.equal((await score(a, a.key, '198.51.100.23') >= 0), true, 'verdicts are still answered')
  // The holder goes: the instance takes the lead, and health is ok again.
  await holder.end()
  for (;;) {
    h = await health()
    if (h.status === 'ok' && h.checks.intel.fleet.role === 'leader') break
    assert.ok(Date.now() - started < 170_000, `not ok after the lock was freed: ${JSON.stringify(h)}`)
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  assert.ok(!(h.reasons as string[]).includes(reason))
})
