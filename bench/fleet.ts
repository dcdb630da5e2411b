/**
 * Fleet bench: two real instances (child processes running `ioc-verdict serve`) on one PostgreSQL schema, fetching one
 * feed from a host on 127.0.0.1, measured from outside as a load balancer's clients see them.
 *
 *   npm run bench:fleet -- [--database-url URL] [--rounds 20] [--refresh 2] [--window 10] [--pool 1]
 *
 * The URL defaults to IOC_TEST_DATABASE_URL; a fresh schema is made and dropped. Measured:
 * - invalidation delay: a write answered by A (allowlist entry added, deleted; key revoked) until B's answers change,
 *   B being called back to back from the moment A answered. Reported per kind over --rounds rounds (median, p95, max),
 *   with the requests B answered the old way meanwhile; against the re-read intervals each instance relied on before
 *   (2 s for allowlists, 5 s for keys), still there as the backstop.
 * - fetches per refresh: requests the feed host saw over --window seconds, divided by the refresh periods in it
 *   (one instance fetching alone is 1.0; every instance fetching for itself would be 2.0).
 * - identity: health's version and data_timestamp on both, and the time during which the two answer a newly listed
 *   address differently after the feed changed (A and B called in turn).
 * - failover: the leader killed (SIGKILL), until the other reports itself leader, and until the host sees its fetch.
 *
 * Results are printed and written to bench/results/fleet.json.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import pg from 'pg'
import { request } from 'undici'

const kRoot = join(import.meta.dirname, '..')

const { values } = parseArgs({
  options: {
    'database-url': { type: 'string' },
    rounds: { type: 'string', default: '20' },
    refresh: { type: 'string', default: '2' },
    window: { type: 'string', default: '10' },
    pool: { type: 'string', default: '1' }
  }
})
const kDb = values['database-url'] ?? process.env.IOC_TEST_DATABASE_URL
if (kDb === undefined) {
  process.stderr.write('error: pass --database-url or set IOC_TEST_DATABASE_URL\n')
  process.exit(2)
}
const kRounds = Number(values.rounds)
const kRefresh = Number(values.refresh)
const kWindow = Number(values.window)
const kSchema = `iocv_bench_fleet_${randomBytes(4).toString('hex')}`

/** n public addresses of 45.(100 + seed).0.0/16 (private ranges are scored as such, whatever lists them). */
function netset (n: number, seed: number): string {
  const lines = ['# fleet bench feed']
  for (let i = 0; i < n; i++) lines.push(`45.${100 + seed}.${i >> 8}.${i & 255}`)
  return lines.join('\n') + '\n'
}

let feedBody = netset(1000, 1)
const hostRequests: number[] = []
const host = createServer((_req, res) => {
  hostRequests.push(performance.now())
  res.writeHead(200, { 'content-type': 'text/plain' })
  res.end(feedBody)
})
await new Promise<void>((resolve) => host.listen(0, '127.0.0.1', resolve))
const feedUrl = `http://127.0.0.1:${(host.address() as AddressInfo).port}/feed`

const work = mkdtempSync(join(tmpdir(), 'ioc-verdict-bench-fleet-'))
const manifest = join(work, 'manifest.json')
writeFileSync(manifest, JSON.stringify({
  feeds: [{ name: 'bench_list', format: 'netset', url: feedUrl, refresh_seconds: kRefresh, timeout_seconds: 5, direction: 'malicious', group: 'threat_feed', subgroup: 'attack_source', category: 'abuse', confidence: 0.8, half_life_days: 0 }]
}))

interface Server { name: string, proc: ChildProcess, base: string, key: string | null }

async function start (name: string): Promise<Server> {
  const dir = join(work, name)
  mkdirSync(dir)
  const proc = spawn(process.execPath, ['--import', 'tsx', join(kRoot, 'src', 'main.ts'), 'serve'], {
    cwd: kRoot,
    env: {
      PATH: process.env.PATH,
      IOC_STORE: 'postgres',
      IOC_DATABASE_URL: kDb,
      IOC_DATABASE_SCHEMA: kSchema,
      IOC_INSTANCE_NAME: name,
      IOC_DATA_DIR: dir,
      IOC_FEEDS: manifest,
      IOC_PORT: '0',
      IOC_POOL_SIZE: values.pool,
      IOC_LOG_LEVEL: 'info'
    },
    stdio: ['ignore', openSync(join(work, `${name}.log`), 'w'), 'pipe']
  })
  let err = ''
  return await new Promise((resolve, reject) => {
    const timer = setTimeout(() => { reject(new Error(`${name} did not start:\n${err}`)) }, 180_000)
    const onData = (d: Buffer): void => {
      err += d.toString()
      const url = /listening on (http:\/\/\S+)/.exec(err)?.[1]
      if (url === undefined) return
      // The first instance prints the bootstrap key after its URL; the others find keys already there.
      const key = /^\s+(iocv_\S+)$/m.exec(err)?.[1] ?? null
      if (servers.length === 0 && key === null) return
      clearTimeout(timer)
      proc.stderr?.off('data', onData)
      proc.stderr?.resume()
      resolve({ name, proc, base: url, key })
    }
    proc.stderr?.on('data', onData)
    proc.once('exit', (code) => { reject(new Error(`${name} exited with ${code}:\n${err}`)) })
  })
}

async function call (s: Server, method: 'GET' | 'POST' | 'DELETE', path: string, key: string, body?: unknown): Promise<{ status: number, json: any }> {
  const res = await request(s.base + path, {
    method,
    headers: { 'x-api-key': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await res.body.text()
  return { status: res.statusCode, json: text === '' ? null : JSON.parse(text) }
}

async function score (s: Server, key: string, value: string): Promise<number> {
  const r = await call(s, 'POST', '/api/v2/ioc/verdict', key, { indicator: { value } })
  if (r.status !== 200) throw new Error(`verdict on ${s.name}: ${r.status} ${JSON.stringify(r.json)}`)
  return r.json.risk.score as number
}

/** Calls `probe` back to back until it returns true: the ms from `since`, and how many calls returned false. */
async function until (since: number, probe: () => Promise<boolean>, limitMs = 30_000): Promise<{ ms: number, stale: number }> {
  let stale = 0
  for (;;) {
    if (await probe()) return { ms: performance.now() - since, stale }
    stale++
    if (performance.now() - since > limitMs) throw new Error('not seen within the limit')
  }
}

async function sleep (ms: number): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, ms))
}

function summary (xs: number[]): { median: number, p95: number, max: number } {
  const s = [...xs].sort((a, b) => a - b)
  const at = (p: number): number => Math.round((s[Math.min(s.length - 1, Math.floor(p * s.length))] as number) * 10) / 10
  return { median: at(0.5), p95: at(0.95), max: Math.round((s[s.length - 1] as number) * 10) / 10 }
}

async function role (s: Server, key: string): Promise<{ role: string, generation: number | null }> {
  const r = await call(s, 'GET', '/api/v2/mgmt/intel/sources', key)
  return { role: r.json.fleet.role, generation: r.json.fleet.generation }
}

const servers: Server[] = []
try {
  const a = await start('a')
  servers.push(a)
  const key = a.key as string
  const b = await start('b')
  servers.push(b)
  process.stderr.write(`instances a ${a.base} and b ${b.base} on schema ${kSchema}\n`)
  // Both serving the leader's generation with the feed in it.
  const unlisted = await score(a, key, '45.150.0.7')
  await until(performance.now(), async () => {
    const [ra, rb] = [await role(a, key), await role(b, key)]
    return ra.generation !== null && ra.generation === rb.generation && ra.role !== rb.role &&
      await score(a, key, '45.101.0.7') > unlisted && await score(b, key, '45.101.0.7') > unlisted
  }, 120_000)
  const listed = await score(b, key, '45.101.0.9')

  // Invalidation delays.
  const delays = { allowlist_add: [] as number[], allowlist_delete: [] as number[], key_revoke: [] as number[] }
  const stale = { allowlist_add: 0, allowlist_delete: 0, key_revoke: 0 }
  for (let i = 0; i < kRounds; i++) {
    await score(b, key, '45.101.0.9') // B has the tenant's list loaded
    const added = await call(a, 'POST', '/api/v2/mgmt/allowlist', key, { kind: 'ip', value: '45.101.0.9', reason: 'bench' })
    let t0 = performance.now()
    if (added.status !== 201) throw new Error(`allowlist add: ${added.status}`)
    let r = await until(t0, async () => await score(b, key, '45.101.0.9') === 0)
    delays.allowlist_add.push(r.ms)
    stale.allowlist_add += r.stale
    const deleted = await call(a, 'DELETE', `/api/v2/mgmt/allowlist/${added.json.id as string}`, key)
    t0 = performance.now()
    if (deleted.status !== 204) throw new Error(`allowlist delete: ${deleted.status}`)
    r = await until(t0, async () => await score(b, key, '45.101.0.9') === listed)
    delays.allowlist_delete.push(r.ms)
    stale.allowlist_delete += r.stale

    const made = await call(a, 'POST', '/api/v2/mgmt/keys', key, { permissions: ['verdict'] })
    if (made.status !== 201) throw new Error(`key create: ${made.status} ${JSON.stringify(made.json)}`)
    const victim = made.json.key as string
    await score(b, victim, '45.101.0.9') // B has the key verified
    const revoked = await call(a, 'DELETE', `/api/v2/mgmt/keys/${made.json.record.id as string}`, key)
    t0 = performance.now()
    if (revoked.status !== 200) throw new Error(`key revoke: ${revoked.status}`)
    r = await until(t0, async () => (await call(b, 'POST', '/api/v2/ioc/verdict', victim, { indicator: { value: '45.101.0.9' } })).status === 401)
    delays.key_revoke.push(r.ms)
    stale.key_revoke += r.stale
  }

  // Fetches per refresh over the window.
  const from = hostRequests.length
  const t1 = performance.now()
  await sleep(kWindow * 1000)
  const fetched = hostRequests.length - from
  const periods = (performance.now() - t1) / 1000 / kRefresh
  const leader = (await role(a, key)).role === 'leader' ? a : b
  const follower = leader === a ? b : a

  // Identity, and the window during which A and B answer a newly listed address differently.
  const ha = await call(a, 'GET', '/api/v2/ioc/health', key)
  const hb = await call(b, 'GET', '/api/v2/ioc/health', key)
  const sameIdentity = ha.json.checks.intel.version === hb.json.checks.intel.version && ha.json.checks.intel.data_timestamp === hb.json.checks.intel.data_timestamp
  const before = await score(a, key, '45.102.0.7')
  feedBody = netset(1000, 2)
  const changedAt = performance.now()
  let firstFlip: number | null = null
  let bothFlipped: number | null = null
  const flipped = new Set<string>()
  while (bothFlipped === null) {
    for (const s of [a, b]) {
      if (!flipped.has(s.name) && await score(s, key, '45.102.0.7') !== before) {
        flipped.add(s.name)
        firstFlip ??= performance.now()
      }
    }
    if (flipped.size === 2) bothFlipped = performance.now()
    if (performance.now() - changedAt > 120_000) throw new Error('the changed feed never reached both instances')
  }
  const disagreementMs = bothFlipped - (firstFlip as number)
  const changeToBothMs = bothFlipped - changedAt

  // Failover: SIGKILL the leader.
  const killedAt = performance.now()
  const fetchesBefore = hostRequests.length
  leader.proc.kill('SIGKILL')
  const takeover = await until(killedAt, async () => (await role(follower, key)).role === 'leader', 120_000)
  const firstFetch = await until(killedAt, async () => { await sleep(5); return hostRequests.length > fetchesBefore }, 120_000)

  // What the follower's adoptions took (its log): reading and verifying the generation, starting its pool on it.
  const adoptions = readFileSync(join(work, `${follower.name}.log`), 'utf8').split('\n').filter((l) => l.includes('snapshot of the fleet adopted'))
    .map((l) => JSON.parse(l) as { read_ms: number, swap_ms: number })
  const published = readFileSync(join(work, `${leader.name}.log`), 'utf8').split('\n').filter((l) => l.includes('published to the fleet')).length

  const result = {
    date: new Date().toISOString(),
    command: `npm run bench:fleet -- --rounds ${kRounds} --refresh ${kRefresh} --window ${kWindow} --pool ${values.pool}`,
    invalidation_ms: {
      allowlist_add: { ...summary(delays.allowlist_add), stale_answers: stale.allowlist_add, backstop_ms: 2000 },
      allowlist_delete: { ...summary(delays.allowlist_delete), stale_answers: stale.allowlist_delete, backstop_ms: 2000 },
      key_revoke: { ...summary(delays.key_revoke), stale_answers: stale.key_revoke, backstop_ms: 5000 }
    },
    fetches: { window_s: kWindow, refresh_s: kRefresh, host_requests: fetched, per_refresh: Math.round(fetched / periods * 100) / 100 },
    follower_adoptions: { read_ms: adoptions.map((x) => x.read_ms), swap_ms: adoptions.map((x) => x.swap_ms), leader_publications: published },
    identity: { same: sameIdentity, version: ha.json.checks.intel.version, feed_change_to_both_ms: Math.round(changeToBothMs), disagreement_ms: Math.round(disagreementMs) },
    failover: { killed: leader.name, takeover_ms: Math.round(takeover.ms), first_fetch_ms: Math.round(firstFetch.ms) }
  }
  process.stdout.write(JSON.stringify(result, null, 2) + '\n')
  mkdirSync(join(kRoot, 'bench', 'results'), { recursive: true })
  writeFileSync(join(kRoot, 'bench', 'results', 'fleet.json'), JSON.stringify(result, null, 2) + '\n')
} finally {
  for (const s of servers) {
    if (s.proc.exitCode === null && s.proc.signalCode === null) {
      const exited = new Promise((resolve) => s.proc.once('exit', resolve))
      s.proc.kill('SIGTERM')
      await exited
    }
  }
  host.closeAllConnections()
  host.close()
  const admin = new pg.Client({ connectionString: kDb })
  await admin.connect()
  await admin.query(`DROP SCHEMA IF EXISTS "${kSchema}" CASCADE`)
  await admin.end()
  rmSync(work, { recursive: true, force: true })
}
