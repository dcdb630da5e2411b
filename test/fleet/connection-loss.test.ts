/**
 * The fleet when PostgreSQL ends its connections (a restart, a network cut, an operator's pg_terminate_backend): a
 * leader whose lock session ends stops leading and another leads; an instance whose notification connection ends
 * listens again and applies the next change. Runs only when IOC_TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { test } from 'node:test'
import pg from 'pg'
import { pgServices, type Built } from '../helper.ts'

type Json = Record<string, any>

const kDb = process.env.IOC_TEST_DATABASE_URL
/** Listed by three sample feeds: malicious on its own (data/feeds/README.md). */
const kListed = '198.51.100.23'

async function waitFor (what: string, probe: () => Promise<boolean> | boolean, ms = 30_000): Promise<void> {
  const until = Date.now() + ms
  for (;;) {
    if (await probe()) return
    if (Date.now() > until) assert.fail(`${what}: not seen within ${ms} ms`)
    await new Promise((resolve) => setImmediate(resolve))
  }
}

async function score (s: Built, key: string): Promise<number> {
  const res = await s.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'x-api-key': key }, payload: { indicator: { value: kListed } } })
  assert.equal(res.statusCode, 200, res.body)
  return (res.json() as Json).risk.score as number
}

test('a leader whose lock session is ended stops leading and the other leads; a lost notification connection comes back', { timeout: 240_000 }, async (t) => {
  if (kDb === undefined) {
    t.skip('IOC_TEST_DATABASE_URL not set')
    return
  }
  const { build } = pgServices(t, kDb, `iocv_fleet_loss_${randomBytes(4).toString('hex')}`)
  const a = await build()
  const b = await build()
  await waitFor('one leader', () => a.fleet.leading !== b.fleet.leading)
  const [leader, follower] = a.fleet.leading ? [a, b] : [b, a]
  const admin = new pg.Client({ connectionString: kDb })
  await admin.connect()
  t.after(async () => { await admin.end() })

  // The leader's lock session ended by the server: the follower is granted the lock; the former leader waits again.
  await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [`ioc-verdict leader ${leader.fleet.instance}`.slice(0, 63)])
  await waitFor('the follower leading', () => follower.fleet.leading)
  await waitFor('the former leader following', () => !leader.fleet.leading)
  assert.equal(follower.fleet.status()?.leader, follower.fleet.instance)

  // The former leader's notification connection ended: it listens again, then applies a change made on the other.
  const key = await follower.makeKey(['verdict', 'mgmt'], { tenant: 'fleet-loss' })
  const listed = await score(leader, key)
  await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [`ioc-verdict fleet ${leader.fleet.instance}`.slice(0, 63)])
  await waitFor('the connection seen lost', () => leader.fleet.listening === false)
  await waitFor('listening again', () => leader.fleet.listening === true)
  const before = leader.fleet.changes.applied
  const added = await follower.app.inject({ method: 'POST', url: '/api/v2/mgmt/allowlist', headers: { 'x-api-key': key }, payload: { kind: 'ip', value: kListed, reason: 'red team host' } })
  assert.equal(added.statusCode, 201, added.body)
  await waitFor('the change announced to the former leader', () => leader.fleet.changes.applied > before)
  assert.equal(await score(leader, key), 0)
  assert.ok(listed > 0)
})
