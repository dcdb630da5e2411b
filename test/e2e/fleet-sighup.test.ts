/**
 * SIGHUP in a fleet: two `ioc-verdict serve` processes on one PostgreSQL schema, sharing a manifest whose one feed is a
 * local file. A SIGHUP reloads as `POST /api/v2/mgmt/intel/reload` does: the follower adopts the newest published
 * generation (it never builds its own), the leader rebuilds and publishes, and both then serve the same snapshot.
 * Runs only when IOC_TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { request } from 'undici'
import { pgSchemaCleanups, smallRegistries } from '../helper.ts'
import { spawnServe, type ServeProcess } from '../fixtures/serve-process.ts'

const kDb = process.env.IOC_TEST_DATABASE_URL

type Json = Record<string, any>

async function health (s: ServeProcess): Promise<Json> {
  const res = await request(`${s.base}/api/v2/ioc/health`)
  return await res.body.json() as Json
}

async function score (s: ServeProcess, key: string, value: string): Promise<number> {
  const res = await request(`${s.base}/api/v2/ioc/verdict`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({ indicator: { value } })
  })
  const body = await res.body.json() as Json
  assert.equal(res.statusCode, 200, JSON.stringify(body))
  return body.risk.score as number
}

async function until (what: string, check: () => Promise<boolean>, ms = 60_000): Promise<void> {
  const end = Date.now() + ms
  while (!await check()) {
    assert.ok(Date.now() < end, `timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

test('a SIGHUP reloads as the reload route does: a follower adopts, the leader publishes, both serve one snapshot', { timeout: 240_000 }, async (t) => {
  if (kDb === undefined) {
    t.skip('IOC_TEST_DATABASE_URL not set')
    return
  }
  const schema = `iocv_sighup_${randomBytes(4).toString('hex')}`
  const cleanups = pgSchemaCleanups(t, kDb, schema)
  const dir = mkdtempSync(join(tmpdir(), 'iocv-fleet-sighup-'))
  t.after(() => { rmSync(dir, { recursive: true, force: true }) })
  const feed = join(dir, 'listed.txt')
  writeFileSync(feed, 'first-listed.example\n')
  writeFileSync(join(dir, 'manifest.json'), JSON.stringify({
    feeds: [{ name: 'sighup_list', format: 'plain', path: 'listed.txt', direction: 'malicious', group: 'threat_feed', subgroup: 'malware', category: 'malware', confidence: 0.9, half_life_days: 0 }]
  }))
  const env = (name: string): Record<string, string> => ({
    IOC_STORE: 'postgres',
    IOC_DATABASE_URL: kDb,
    IOC_DATABASE_SCHEMA: schema,
    IOC_DATA_DIR: join(dir, name),
    IOC_FEEDS: join(dir, 'manifest.json'),
    IOC_INTEL_CACHE_DIR: join(dir, `${name}-cache`),
    IOC_POOL_SIZE: '1',
    IOC_LOG_LEVEL: 'info',
    IOC_INSTANCE_NAME: name,
    ...smallRegistries()
  })
  const a = await spawnServe({ env: { ...env('a'), IOC_BOOTSTRAP_KEY: '1' } })
  cleanups.after(async () => { await a.stop('SIGKILL') })
  const b = await spawnServe({ env: { ...env('b'), IOC_BOOTSTRAP_KEY: '0' } })
  cleanups.after(async () => { await b.stop('SIGKILL') })
  const key = a.key as string
  assert.ok(key !== null)

  const version = async (s: ServeProcess): Promise<string> => (await health(s)).checks.intel.version as string
  const role = async (s: ServeProcess): Promise<string | undefined> => (await health(s)).checks.intel.fleet?.role as string | undefined
  await until('one leader and one follower', async () => [await role(a), await role(b)].sort().join() === 'follower,leader')
  const [leader, follower] = await role(a) === 'leader' ? [a, b] : [b, a]
  await until('one snapshot on both', async () => await version(leader) === await version(follower))
  const before = await version(leader)
  const unlisted = await score(follower, key, 'second-listed.example')
  assert.ok(await score(follower, key, 'first-listed.example') > unlisted)

  // The feed file changes on both. The follower's SIGHUP adopts the newest generation: it builds nothing of its own.
  appendFileSync(feed, 'second-listed.example\n')
  const followerLines = follower.stdout().length
  follower.proc.kill('SIGHUP')
  await until('the follower\'s reload', async () => follower.stdout().slice(followerLines).includes('intel snapshot reloaded (SIGHUP)'))
  assert.equal(await version(follower), before, 'a follower serves the fleet\'s generation, not one of its own')
  assert.equal(await score(follower, key, 'second-listed.example'), unlisted)

  // The leader's SIGHUP rebuilds and publishes; the follower adopts it.
  leader.proc.kill('SIGHUP')
  await until('a new snapshot on both', async () => {
    const [l, f] = [await version(leader), await version(follower)]
    return l !== before && l === f
  })
  assert.ok(await score(follower, key, 'second-listed.example') > unlisted)
  assert.equal(await score(follower, key, 'second-listed.example'), await score(leader, key, 'second-listed.example'))
  assert.equal((await health(follower)).checks.intel.fleet.generation, (await health(leader)).checks.intel.fleet.generation)
})
