/**
 * Retro-hunt end to end, on both stores: tenants ask about a domain, a host and an address; a feed served from
 * 127.0.0.1 then starts listing that domain, the host's parent domain and a block holding the address; after one
 * refresh, exactly the tenants that asked get hits, with `then` what each was answered and `now` today's verdict.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test, type TestContext } from 'node:test'
import { loadConfig } from '../../src/config.ts'
import { startService, type Service } from '../../src/service.ts'
import { waitFor } from '../fixtures/read-history.ts'
import { feedHost, retroEnv, writeFeedManifest } from '../fixtures/retro-feed.ts'
import { CleanupList, kTestIntelCache, pgSchemaCleanups, type Cleanups } from '../helper.ts'

type Json = Record<string, any>

const kDomain = 'retro-exact.example'
const kHost = 'www.retro-parent.example'
const kParent = 'retro-parent.example'
const kAddress = '91.92.93.77'
const kBlock = '91.92.93.0/24'

async function scenario (t: TestContext, cleanups: Cleanups, env: Record<string, string>): Promise<void> {
  const host = await feedHost(t)
  host.set('unrelated-retro-entry.example\n')
  const dir = mkdtempSync(join(tmpdir(), 'ioc-retro-test-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const manifest = join(dir, 'manifest.json')
  writeFeedManifest(manifest, 'retro_feed', host.url)
  const config = loadConfig({ ...retroEnv(dir, manifest), ...env })
  const svc: Service = await startService(config)
  cleanups.after(async () => { await svc.app.close() })
  const keyOf = async (tenant: string, permissions = ['verdict', 'verdict_bulk', 'mgmt']): Promise<string> =>
    (await svc.store.createKey({ tenant, permissions, quota: null })).key
  const keys = { a: await keyOf('tenant-a'), b: await keyOf('tenant-b'), c: await keyOf('tenant-c') }
  const admin = await keyOf('ops', ['verdict', 'mgmt', 'admin'])

  const refresh = async (): Promise<void> => {
    const res = await svc.app.inject({ method: 'POST', url: '/api/v2/mgmt/intel/sources/refresh', headers: { 'x-api-key': admin } })
    assert.equal(res.statusCode, 200)
  }
  await refresh()
  await svc.retroHunt.idle()

  const verdict = async (key: string, value: string): Promise<{ score: number, category: string }> => {
    const res = await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'x-api-key': key }, payload: { indicator: { value } } })
    assert.equal(res.statusCode, 200, res.body)
    const v = res.json()
    return { score: v.risk.score, category: v.risk.category }
  }
  const bulk = async (key: string, values: string[]): Promise<Array<{ score: number, category: string }>> => {
    const res = await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict/bulk', headers: { 'x-api-key': key }, payload: { indicators: values.map((value) => ({ value })) } })
    assert.equal(res.statusCode, 200, res.body)
    return res.json().results.map((r: Json) => ({ score: r.risk.score, category: r.risk.category }))
  }
  // What each tenant was answered before the feed listed anything.
  const thenA = { domain: await verdict(keys.a, kDomain), address: (await bulk(keys.a, [kAddress, 'quiet-a.example']))[0] }
  const thenB = { host: await verdict(keys.b, kHost), address: await verdict(keys.b, kAddress) }
  await verdict(keys.c, 'quiet-c.example')
  // Until the history writer has stored them, a pass would not see these queries.
  const searched = async (key: string, value: string): Promise<boolean> => {
    const res = await svc.app.inject({ method: 'GET', url: `/api/v2/mgmt/enrich-logs/search-history?indicator_value=${encodeURIComponent(value)}`, headers: { 'x-api-key': key } })
    return res.statusCode === 200 && res.json().results.length > 0
  }
  for (const [key, value] of [[keys.a, kDomain], [keys.a, kAddress], [keys.b, kHost], [keys.b, kAddress], [keys.c, 'quiet-c.example']] as const) {
    await waitFor(`history of ${value}`, async () => (await searched(key, value)) ? true : undefined, 90_000)
  }

  host.set(`unrelated-retro-entry.example\n${kDomain}\n${kParent}\n${kBlock}\n`)
  await refresh()
  await svc.retroHunt.idle()

  const hitsOf = async (key: string, query = ''): Promise<Json> => {
    const res = await svc.app.inject({ method: 'GET', url: `/api/v2/mgmt/retro-hunt/hits${query}`, headers: { 'x-api-key': key } })
    assert.equal(res.statusCode, 200, res.body)
    return res.json()
  }
  // The refresh answers before its rebuild, and a pass runs at the lowest CPU priority: on a busy machine the hits
  // can take a while (a bound, not a timing assertion).
  const a = await waitFor('hits of tenant a', async () => { const h = await hitsOf(keys.a); return h.hits.length >= 2 ? h : undefined }, 150_000)
  const b = await waitFor('hits of tenant b', async () => { const h = await hitsOf(keys.b); return h.hits.length >= 2 ? h : undefined }, 60_000)
  assert.deepEqual((await hitsOf(keys.c)).hits, [], 'a tenant that asked about none of them has no hit')
  assert.deepEqual((await hitsOf(admin)).hits, [], 'nor does a tenant that asked nothing')

  const byValue = (page: Json): Map<string, Json> => new Map(page.hits.map((h: Json) => [h.indicator.value, h]))
  const ha = byValue(a)
  const hb = byValue(b)
  assert.deepEqual([...ha.keys()].sort(), [kAddress, kDomain].sort())
  assert.deepEqual([...hb.keys()].sort(), [kAddress, kHost].sort())

  const domainHit = ha.get(kDomain) as Json
  assert.deepEqual(domainHit.cause, { signal_id: 'retro_feed:exact', source: 'retro_feed', match: 'exact', listed_value: kDomain })
  assert.deepEqual(domainHit.then, thenA.domain)
  assert.deepEqual({ score: domainHit.now.score, category: domainHit.now.category }, await verdict(keys.a, kDomain))
  assert.equal(domainHit.indicator.type, 'domain')
  assert.equal(domainHit.queried.count, 1)
  assert.ok(domainHit.queried.key_ids.length === 1)

  const hostHit = hb.get(kHost) as Json
  assert.deepEqual(hostHit.cause, { signal_id: 'retro_feed:parent_domain', source: 'retro_feed', match: 'parent_domain', listed_value: kParent })
  assert.deepEqual(hostHit.then, thenB.host)
  assert.deepEqual({ score: hostHit.now.score, category: hostHit.now.category }, await verdict(keys.b, kHost))

  for (const [hit, then] of [[ha.get(kAddress), thenA.address], [hb.get(kAddress), thenB.address]] as const) {
    assert.deepEqual(hit?.cause, { signal_id: 'retro_feed:supernet', source: 'retro_feed', match: 'containing_network', listed_value: kBlock })
    assert.deepEqual(hit?.then, then)
    assert.ok(hit.now.score >= (hit.then as Json).score + 10 || ((hit.then as Json).score < 65 && hit.now.score >= 65))
  }

  // Newest first, by cursor; filters.
  const page1 = await hitsOf(keys.a, '?limit=1')
  assert.equal(page1.hits.length, 1)
  assert.equal(typeof page1.next_cursor, 'string')
  const page2 = await hitsOf(keys.a, `?limit=1&cursor=${page1.next_cursor as string}`)
  assert.equal(page2.hits.length, 1)
  assert.equal(page2.next_cursor, null)
  assert.ok(page1.hits[0].id > page2.hits[0].id)
  const atLeast = Math.max(...a.hits.map((h: Json) => h.now.score as number))
  const strong = await hitsOf(keys.a, `?min_score=${atLeast}`)
  assert.ok(strong.hits.length >= 1 && strong.hits.every((h: Json) => h.now.score >= atLeast))
  assert.equal((await hitsOf(keys.a, `?category=${encodeURIComponent(domainHit.now.category as string)}`)).hits.some((h: Json) => h.id === domainHit.id), true)
  assert.equal((await hitsOf(keys.a, '?category=no-such-category')).hits.length, 0)
  assert.equal((await hitsOf(keys.a, `?since=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`)).hits.length, 0)

  // A second refresh with the same listings records nothing new: once per (tenant, indicator, cause).
  const before = (await hitsOf(keys.a)).hits.length
  const res = await svc.app.inject({ method: 'POST', url: '/api/v2/mgmt/intel/reload', headers: { 'x-api-key': admin } })
  assert.equal(res.statusCode, 200)
  await svc.retroHunt.idle()
  assert.equal((await hitsOf(keys.a)).hits.length, before)

  const metrics = (await svc.app.inject({ url: '/metrics' })).body
  assert.match(metrics, /^iocv_retro_hunt_hits_total [1-9][0-9]*$/m)
  assert.match(metrics, /^iocv_retro_hunt_passes_total [1-9][0-9]*$/m)
  assert.equal(svc.retroHunt.state().last?.lowPriority, false, 'IOC_RETRO_HUNT_LOW_PRIORITY=0 reaches the pass\'s thread')
}

test('a feed that starts listing what tenants asked about gives hits to exactly those tenants (SQLite)', { timeout: 400_000 }, async (t) => {
  const cleanups = new CleanupList()
  t.after(async () => { await cleanups.run() })
  await scenario(t, cleanups, {})
})

const kPg = process.env.IOC_TEST_DATABASE_URL
test('a feed that starts listing what tenants asked about gives hits to exactly those tenants (PostgreSQL)', { timeout: 400_000, skip: kPg === undefined ? 'IOC_TEST_DATABASE_URL is not set' : false }, async (t) => {
  const schema = `retro_${process.pid}_${Date.now()}`
  const cleanups = pgSchemaCleanups(t, kPg as string, schema)
  await scenario(t, cleanups, { IOC_STORE: 'postgres', IOC_DATABASE_URL: kPg as string, IOC_DATABASE_SCHEMA: schema })
})

test('the hits route refuses bad filters, cursors and callers', { timeout: 120_000 }, async (t) => {
  const cleanups = new CleanupList()
  t.after(async () => { await cleanups.run() })
  const dir = mkdtempSync(join(tmpdir(), 'ioc-retro-test-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const svc = await startService(loadConfig({ IOC_DATA_DIR: dir, IOC_POOL_SIZE: '0', IOC_BOOTSTRAP_KEY: '0', IOC_LOG_LEVEL: 'silent', IOC_INTEL_CACHE_DIR: kTestIntelCache }))
  cleanups.after(async () => { await svc.app.close() })
  const key = (await svc.store.createKey({ tenant: 't', permissions: ['verdict', 'mgmt'], quota: null })).key
  const noMgmt = (await svc.store.createKey({ tenant: 't', permissions: ['verdict'], quota: null })).key
  const get = async (query: string, headers: Record<string, string> = { 'x-api-key': key }): Promise<{ status: number, code: string | undefined }> => {
    const res = await svc.app.inject({ method: 'GET', url: `/api/v2/mgmt/retro-hunt/hits${query}`, headers })
    return { status: res.statusCode, code: res.statusCode === 200 ? undefined : res.json().code }
  }
  assert.deepEqual(await get(''), { status: 200, code: undefined })
  for (const q of ['?limit=0', '?limit=1001', '?limit=x', '?min_score=101', '?min_score=-1', '?since=yesterday', '?cursor=not-a-cursor', '?other=1']) {
    assert.deepEqual(await get(q), { status: 400, code: 'INVALID_REQUEST' }, q)
  }
  assert.deepEqual(await get('', {}), { status: 401, code: 'MISSING_API_KEY' })
  assert.deepEqual(await get('', { 'x-api-key': noMgmt }), { status: 403, code: 'PERMISSION_DENIED' })
})
