/**
 * `ioc-verdict retro-hunt run`: one pass by hand against the current snapshot finds a tenant's earlier query of an
 * indicator the sample feeds list, prints the hit as a JSON line and records it once; in a PostgreSQL fleet it hunts
 * with the fleet's published generation, whatever its own data directory holds; bad arguments exit 2.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { loadConfig } from '../../src/config.ts'
import { HistoryItems } from '../../src/history/block.ts'
import { startService } from '../../src/service.ts'
import { SqliteStore } from '../../src/store/index.ts'
import { kTestIntelCache, pgSchemaCleanups, smallRegistries } from '../helper.ts'
import { waitFor } from '../fixtures/read-history.ts'
import { feedHost, writeFeedManifest } from '../fixtures/retro-feed.ts'
import { runCli } from '../fixtures/serve-process.ts'

const kDataDir = mkdtempSync(join(tmpdir(), 'iocv-retro-cli-'))
after(() => rmSync(kDataDir, { recursive: true, force: true }))

/** Runs the CLI with this file's data dir and the shared test intel cache. */
async function cli (args: string[], env: Record<string, string> = {}): Promise<{ code: number | null, stdout: string, stderr: string }> {
  return await runCli(args, { env: { IOC_DATA_DIR: kDataDir, IOC_LOG_LEVEL: 'warn', IOC_INTEL_CACHE_DIR: kTestIntelCache, ...env } })
}

test('retro-hunt run records and prints a hit for an earlier query that the current snapshot now convicts, once', { timeout: 180_000 }, async () => {
  // A day ago tenant acme was told "unknown, 10" about a domain the sample feeds list (data/feeds/README.md).
  const store = new SqliteStore({ path: join(kDataDir, 'ioc-verdict.db') })
  await store.migrate()
  const items = new HistoryItems(2)
  items.addVerdict('domain', 'malware-c2.example', 'malware-c2.example', '"risk":{"score":10,"strength":"weak","category":"unknown","evidence_saturation":"none"},"scores":null,"labels":[],"label_count":0,"action_taken":"allowed","action_source":"proxy"')
  items.addVerdict('domain', 'quiet-retro.example', 'quiet-retro.example', '"risk":{"score":50,"strength":"weak","category":"unknown","evidence_saturation":"none"},"scores":null,"labels":[],"label_count":0,"action_taken":null,"action_source":null')
  const ts = Date.now() - 86_400_000
  const date = new Date(ts).toISOString()
  const id = randomUUID()
  store.writeHistoryPartsSync([{
    uid: id,
    ts,
    date,
    day: date.slice(0, 10),
    tenant: 'acme',
    requestId: id,
    bulkRequestId: null,
    httpStatus: 200,
    authType: 'api_key',
    apikey: 'kacme',
    userId: null,
    envelope: JSON.stringify({ date, request_id: id, tenant: 'acme' }),
    count: 2,
    part: items.encode()
  }])
  await store.close()

  const first = await cli(['retro-hunt', 'run'])
  assert.equal(first.code, 0, first.stderr)
  const hits = first.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, any>)
  assert.equal(hits.length, 1, first.stdout)
  const hit = hits[0] as Record<string, any>
  assert.equal(hit.tenant, 'acme')
  assert.deepEqual(hit.indicator, { type: 'domain', value: 'malware-c2.example' })
  assert.deepEqual(hit.then, { score: 10, category: 'unknown' })
  assert.ok(hit.now.score >= 20)
  assert.deepEqual(hit.queried.key_ids, ['kacme'])
  assert.deepEqual(hit.queried.action_sources, ['proxy'])
  assert.equal(hit.cause.match, 'exact')
  assert.match(first.stderr, /1 new hits/)

  const again = await cli(['retro-hunt', 'run', '--since', new Date(Date.now() - 7 * 86_400_000).toISOString()])
  assert.equal(again.code, 0, again.stderr)
  assert.equal(again.stdout, '', 'a hit is recorded once per tenant, indicator and cause')
  const later = await cli(['retro-hunt', 'run', '--since', new Date(Date.now() - 3_600_000).toISOString()])
  assert.equal(later.code, 0)
  assert.match(later.stderr, /0 new hits; 0 tenants, 0 blocks, 0 history records/, 'history older than the window is not read')
})

test('retro-hunt with a bad command, a bad --since, or the lookback off and no --since exits 2', async () => {
  const [sub, since, off] = await Promise.all([
    cli(['retro-hunt', 'frob']),
    cli(['retro-hunt', 'run', '--since', 'yesterday']),
    cli(['retro-hunt', 'run'], { IOC_RETRO_HUNT_DAYS: '0' })
  ])
  for (const r of [sub, since, off]) {
    assert.equal(r.code, 2, r.stderr)
    assert.equal(r.stdout, '')
  }
  assert.match(off.stderr, /IOC_RETRO_HUNT_DAYS=0/)
})

const kPg = process.env.IOC_TEST_DATABASE_URL
test('retro-hunt run in a PostgreSQL fleet hunts with the generation the leader published, not its own folder\'s feeds', { timeout: 240_000, skip: kPg === undefined ? 'IOC_TEST_DATABASE_URL is not set' : false }, async (t) => {
  const schema = `retro_cli_${process.pid}_${Date.now()}`
  const cleanups = pgSchemaCleanups(t, kPg as string, schema)
  const host = await feedHost(t, 'unrelated-cli-entry.example\n')
  const dir = mkdtempSync(join(tmpdir(), 'iocv-retro-cli-fleet-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const manifest = join(dir, 'manifest.json')
  writeFeedManifest(manifest, 'cli_feed', host.url)
  // The leader's passes are off, so only the CLI can find the hit.
  const fleet = { IOC_STORE: 'postgres', IOC_DATABASE_URL: kPg as string, IOC_DATABASE_SCHEMA: schema, IOC_FEEDS: manifest, ...smallRegistries() }
  const svc = await startService(loadConfig({
    ...fleet, IOC_DATA_DIR: join(dir, 'leader'), IOC_POOL_SIZE: '0', IOC_BOOTSTRAP_KEY: '0', IOC_LOG_LEVEL: 'silent', IOC_HISTORY_FLUSH_MS: '20', IOC_RETRO_HUNT_DAYS: '0', IOC_FEED_MIN_SHRINK_PERCENT: '0'
  }))
  cleanups.after(async () => { await svc.app.close() })
  const key = (await svc.store.createKey({ tenant: 'fleet-acme', permissions: ['verdict', 'mgmt', 'admin'], quota: null })).key
  const call = async (method: 'GET' | 'POST', url: string, payload?: object): Promise<{ status: number, body: Record<string, any> }> => {
    const res = await svc.app.inject({ method, url, headers: { 'x-api-key': key }, ...(payload === undefined ? {} : { payload }) })
    return { status: res.statusCode, body: res.json() }
  }
  await waitFor('the lead', () => svc.fleet.leading ? true : undefined, 60_000)
  assert.equal((await call('POST', '/api/v2/ioc/verdict', { indicator: { value: 'cli-fleet.example' } })).status, 200)
  await waitFor('the query in history', async () => (await call('GET', '/api/v2/mgmt/enrich-logs/search-history?indicator_value=cli-fleet.example')).body.results?.length > 0 ? true : undefined, 90_000)
  host.set('unrelated-cli-entry.example\ncli-fleet.example\n')
  assert.equal((await call('POST', '/api/v2/mgmt/intel/sources/refresh')).status, 200)
  const generation = svc.fleet.status()?.generation

  // Another folder, as on another host: it holds no copy of the fetched feed.
  const r = await runCli(['retro-hunt', 'run', '--since', new Date(Date.now() - 86_400_000).toISOString()], {
    env: { ...fleet, IOC_DATA_DIR: join(dir, 'elsewhere'), IOC_LOG_LEVEL: 'warn', IOC_INTEL_CACHE_DIR: join(dir, 'cache') }
  })
  assert.equal(r.code, 0, r.stderr)
  assert.match(r.stderr, new RegExp(`the fleet's generation ${String(generation)}\\)`))
  const hits = r.stdout.trim().split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, any>)
  assert.deepEqual(hits.map((h) => [h.tenant, h.indicator.value, h.cause.source]), [['fleet-acme', 'cli-fleet.example', 'cli_feed']], r.stderr)
})
