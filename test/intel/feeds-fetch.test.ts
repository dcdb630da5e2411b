import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { test, type TestContext } from 'node:test'
import { gzipSync } from 'node:zlib'
import pino from 'pino'
import { request } from 'undici'
import { loadConfig } from '../../src/config.ts'
import { FeedFetchError } from '../../src/errors.ts'
import { fetchFeed } from '../../src/intel/fetcher.ts'
import { startService, type Service } from '../../src/service.ts'
import { serviceEnv, smallRegistries } from '../helper.ts'
import { zipArchive } from '../fixtures/zip-archive.ts'

const kRoot = join(import.meta.dirname, '..', '..')
type Handler = (req: IncomingMessage, res: ServerResponse) => void

/** A feed host on 127.0.0.1 whose answer the test sets; it counts and records requests. */
interface FeedHost { url: string, set: (h: Handler) => void, requests: IncomingMessage[], server: Server }

async function feedHost (t: TestContext): Promise<FeedHost> {
  let handler: Handler = (_req, res) => { res.statusCode = 404; res.end() }
  const requests: IncomingMessage[] = []
  const server = createServer((req, res) => { requests.push(req); handler(req, res) })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, set: (h) => { handler = h }, requests, server }
}

/** n IPv4 lines of a netset, distinct per `seed`. */
function netset (n: number, seed = 1): string {
  const lines = ['# test feed']
  for (let i = 0; i < n; i++) lines.push(`10.${seed}.${i >> 8}.${i & 255}`)
  return lines.join('\n') + '\n'
}

function writeManifest (dir: string, feed: Record<string, unknown>): string {
  const path = join(dir, 'manifest.json')
  writeFileSync(path, JSON.stringify({
    feeds: [{
      name: 'remote_list',
      format: 'netset',
      direction: 'malicious',
      group: 'threat_feed',
      subgroup: 'attack_source',
      category: 'abuse',
      confidence: 0.8,
      half_life_days: 0,
      refresh_seconds: 3600,
      timeout_seconds: 2,
      ...feed
    }]
  }))
  return path
}

interface Started extends Service { key: string, dataDir: string, logs: string[] }

/**
 * Starts a service on `dataDir` fetching the manifest's feeds; pino output is captured in `logs`. Every snapshot here
 * is compiled from this test's own feeds: they go to the data dir's cache (not the shared one, where they would push
 * out the sample snapshot other tests load) and use cut-down ASN and country registries, which no assertion reads.
 */
async function start (t: TestContext, dataDir: string, manifest: string, env: Record<string, string> = {}): Promise<Started> {
  const logs: string[] = []
  const sink = new Writable({ write (chunk, _enc, cb) { logs.push(String(chunk)); cb() } })
  const config = loadConfig({
    IOC_DATA_DIR: dataDir,
    IOC_FEEDS: manifest,
    IOC_POOL_SIZE: '0',
    IOC_BOOTSTRAP_KEY: '0',
    ...smallRegistries(),
    IOC_HISTORY_FLUSH_MS: '20',
    IOC_FEED_ATTEMPTS: '2',
    IOC_FEED_RETRY_BASE_MS: '5',
    IOC_LOG_LEVEL: 'info',
    ...env
  })
  const svc = await startService(config, { logger: pino({ level: 'info' }, sink) })
  let closed = false
  const started = testServices.get(t) ?? []
  testServices.set(t, started)
  started.push(async () => { if (!closed) await svc.app.close() })
  t.after(async () => { await closeServices(t) })
  const key = (await svc.store.createKey({ tenant: 't1', permissions: ['verdict', 'verdict_bulk', 'mgmt', 'admin'], quota: null })).key
  const close = svc.app.close.bind(svc.app)
  svc.app.close = (async () => { closed = true; await close() }) as typeof svc.app.close
  return { ...svc, key, dataDir, logs }
}

/**
 * Services each test started, closed before its folders are removed: node:test runs after hooks in the order they
 * were added, and a folder's comes first. Removed under a running service, a folder could gain a file mid-removal
 * (ENOTEMPTY), which failed the hook and skipped the ones after it, so the service was never closed and its threads
 * kept the test process from exiting.
 */
const testServices = new WeakMap<TestContext, Array<() => Promise<void>>>()

async function closeServices (t: TestContext): Promise<void> {
  const list = testServices.get(t) ?? []
  testServices.delete(t)
  for (const close of list.reverse()) await close()
}

function tempDir (t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'ioc-feeds-test-'))
  t.after(async () => {
    await closeServices(t)
    rmSync(dir, { recursive: true, force: true })
  })
  return dir
}

interface Row { name: string, status: string, records: number, error: string | null, last_success_at: string | null, url: string }

async function refresh (svc: Started): Promise<{ sources: Row[], snapshot: { version: string } }> {
  const res = await svc.app.inject({ method: 'POST', url: '/api/v2/mgmt/intel/sources/refresh', headers: { 'x-api-key': svc.key } })
  assert.equal(res.statusCode, 200)
  return res.json()
}

async function sources (svc: Started): Promise<{ sources: Row[], snapshot: { version: string } }> {
  const res = await svc.app.inject({ method: 'GET', url: '/api/v2/mgmt/intel/sources', headers: { 'x-api-key': svc.key } })
  assert.equal(res.statusCode, 200)
  return res.json()
}

async function verdictSources (svc: Started, value: string): Promise<string[]> {
  const res = await svc.app.inject({
    method: 'POST',
    url: '/api/v2/ioc/verdict',
    headers: { 'x-api-key': svc.key, 'content-type': 'application/json' },
    payload: { indicator: { value }, signal_details: 'all' }
  })
  assert.equal(res.statusCode, 200)
  return JSON.stringify(res.json()).includes('remote_list') ? ['remote_list'] : []
}

async function health (svc: Started): Promise<{ status: string, reasons: string[] }> {
  return (await svc.app.inject({ method: 'GET', url: '/api/v2/ioc/health' })).json()
}

test('a fetched feed is listed after its first download and refreshed with a 304 while unchanged', async (t) => {
  const host = await feedHost(t)
  const body = netset(50)
  host.set((req, res) => {
    if (req.headers['if-none-match'] === '"v1"') { res.statusCode = 304; res.end(); return }
    res.setHeader('etag', '"v1"')
    res.end(body)
  })
  const dir = tempDir(t)
  const svc = await start(t, dir, writeManifest(dir, { url: `${host.url}/list.netset` }))
  const first = await refresh(svc)
  assert.equal(first.sources[0]?.status, 'ok')
  assert.equal(first.sources[0]?.records, 50)
  assert.deepEqual(await verdictSources(svc, '10.1.0.7'), ['remote_list'])
  const version = first.snapshot.version
  const second = await refresh(svc)
  assert.equal(second.sources[0]?.status, 'ok')
  assert.equal(second.snapshot.version, version, 'an unchanged feed does not rebuild the snapshot')
  assert.equal(host.requests.at(-1)?.headers['if-none-match'], '"v1"')
  assert.equal((await health(svc)).status, 'ok')
  const metrics = (await svc.app.inject({ url: '/metrics' })).body
  assert.match(metrics, /^iocv_feed_up\{feed="remote_list"\} 1$/m)
  assert.match(metrics, /^iocv_feed_age_seconds\{feed="remote_list"\} [0-9.e-]+$/m)
})

test('Last-Modified is sent back as If-Modified-Since', async (t) => {
  const host = await feedHost(t)
  const stamp = 'Wed, 21 Oct 2015 07:28:00 GMT'
  host.set((req, res) => {
    if (req.headers['if-modified-since'] === stamp) { res.statusCode = 304; res.end(); return }
    res.setHeader('last-modified', stamp)
    res.end(netset(10))
  })
  const dir = tempDir(t)
  const svc = await start(t, dir, writeManifest(dir, { url: `${host.url}/x` }))
  await refresh(svc)
  await refresh(svc)
  assert.equal(host.requests.at(-1)?.headers['if-modified-since'], stamp)
  assert.equal((await sources(svc)).sources[0]?.status, 'ok')
})

test('a gzip body (content-encoding or a .gz file) is decoded', async (t) => {
  const host = await feedHost(t)
  host.set((req, res) => {
    if (req.url === '/enc') { res.setHeader('content-encoding', 'gzip'); res.end(gzipSync(netset(20, 3))); return }
    res.setHeader('content-type', 'application/gzip')
    res.end(gzipSync(netset(20, 4)))
  })
  const dir = tempDir(t)
  const svc = await start(t, dir, writeManifest(dir, { url: `${host.url}/enc` }))
  assert.equal((await refresh(svc)).sources[0]?.records, 20)
  assert.deepEqual(await verdictSources(svc, '10.3.0.1'), ['remote_list'])
  const dir2 = tempDir(t)
  const svc2 = await start(t, dir2, writeManifest(dir2, { url: `${host.url}/list.netset.gz` }))
  assert.equal((await refresh(svc2)).sources[0]?.records, 20)
  assert.deepEqual(await verdictSources(svc2, '10.4.0.1'), ['remote_list'])
})

test('a zip body is unpacked: its only file, or the member the manifest names', async (t) => {
  const host = await feedHost(t)
  host.set((req, res) => {
    res.setHeader('content-type', 'application/zip')
    if (req.url === '/one.zip') res.end(zipArchive([{ name: 'export/list.netset', data: Buffer.from(netset(25, 5)) }]))
    else res.end(zipArchive([{ name: 'README.txt', data: Buffer.from('terms of use\n') }, { name: 'b.netset', data: Buffer.from(netset(12, 6)), method: 0 }]))
  })
  const dir = tempDir(t)
  const svc = await start(t, dir, writeManifest(dir, { url: `${host.url}/one.zip` }))
  const r = await refresh(svc)
  assert.equal(r.sources[0]?.status, 'ok')
  assert.equal(r.sources[0]?.records, 25)
  assert.deepEqual(await verdictSources(svc, '10.5.0.24'), ['remote_list'])
  const dir2 = tempDir(t)
  const svc2 = await start(t, dir2, writeManifest(dir2, { url: `${host.url}/two.zip`, zip_member: 'b.netset' }))
  assert.equal((await refresh(svc2)).sources[0]?.records, 12)
  assert.deepEqual(await verdictSources(svc2, '10.6.0.11'), ['remote_list'])
})

test('a zip bomb, an ambiguous or missing member, a corrupt archive and a non-zip with zip_member are refused; the last good copy stays', async (t) => {
  const host = await feedHost(t)
  let mode = 'good'
  const zeros = Buffer.alloc(20 * 1024 * 1024, 0x30)
  host.set((_req, res) => {
    switch (mode) {
      case 'good': res.end(zipArchive([{ name: 'list.netset', data: Buffer.from(netset(100, 8)) }])); break
      // Honest about its 20 MiB: refused before inflating.
      case 'bomb': res.end(zipArchive([{ name: 'list.netset', data: zeros }])); break
      // Claims 1 KiB and inflates to 20 MiB: stopped while inflating.
      case 'liar': res.end(zipArchive([{ name: 'list.netset', data: zeros, declaredSize: 1024 }])); break
      case 'two': res.end(zipArchive([{ name: 'a.netset', data: Buffer.from(netset(100, 8)) }, { name: 'b.netset', data: Buffer.from(netset(100, 8)) }])); break
      case 'corrupt': res.end(zipArchive([{ name: 'list.netset', data: Buffer.from(netset(100, 8)) }]).subarray(0, 200)); break
    }
  })
  const dir = tempDir(t)
  const svc = await start(t, dir, writeManifest(dir, { url: `${host.url}/feed.zip`, max_bytes: 200_000 }))
  assert.equal((await refresh(svc)).sources[0]?.status, 'ok')
  const version = (await sources(svc)).snapshot.version
  for (const [m, pattern] of [
    ['bomb', /larger than max_bytes \(200000\) uncompressed/],
    ['liar', /not the size it declares/],
    ['two', /holds 2 files; name the one to read with "zip_member"/],
    ['corrupt', /not a valid zip archive/]
  ] as const) {
    mode = m
    const r = await refresh(svc)
    assert.equal(r.sources[0]?.status, 'failed', m)
    assert.match(r.sources[0]?.error ?? '', pattern, m)
    assert.equal(r.sources[0]?.records, 100, `${m}: the last good copy's records`)
    assert.equal(r.snapshot.version, version, `${m}: the snapshot is unchanged`)
    assert.deepEqual(await verdictSources(svc, '10.8.0.42'), ['remote_list'], `${m}: still listed`)
  }
  mode = 'good'
  assert.equal((await refresh(svc)).sources[0]?.status, 'ok')
  // A named member that the archive lacks, and a plain body where a zip was announced.
  const dir2 = tempDir(t)
  const svc2 = await start(t, dir2, writeManifest(dir2, { url: `${host.url}/feed.zip`, zip_member: 'other.csv' }))
  assert.match((await refresh(svc2)).sources[0]?.error ?? '', /no member "other.csv"/)
  host.set((_req, res) => { res.end(netset(10)) })
  assert.match((await refresh(svc2)).sources[0]?.error ?? '', /not a zip archive/)
})

test('500s, an HTML error page, garbage, a timeout, an oversize body, a redirect loop and a shrunken list are refused and the last good copy stays in use', async (t) => {
  const host = await feedHost(t)
  let mode = 'good'
  host.set((req, res) => {
    switch (mode) {
      case 'good': res.end(netset(100)); break
      case '500': res.statusCode = 500; res.end('oops'); break
      case 'html': res.setHeader('content-type', 'text/html'); res.end('<!DOCTYPE html><html><body>Service Unavailable</body></html>'); break
      case 'garbage': res.end(Array.from({ length: 100 }, (_v, i) => `not an address ${i}`).join('\n')); break
      case 'slow': setTimeout(() => { if (!res.destroyed) res.end(netset(100)) }, 5000).unref(); break
      case 'oversize': {
        // Streams without a content-length: the cap holds while reading.
        res.setHeader('transfer-encoding', 'chunked')
        const chunk = Buffer.from(netset(1000))
        let sent = 0
        const pump = (): void => {
          while (sent < 64 && !res.destroyed) { sent++; if (!res.write(chunk)) { res.once('drain', pump); return } }
          res.end()
        }
        pump()
        break
      }
      case 'loop': res.statusCode = 301; res.setHeader('location', '/feed'); res.end(); break
      // Redirects to ever new URLs: five are followed, the sixth is not.
      case 'chain': res.statusCode = 301; res.setHeader('location', `/hop/${Number(/\/hop\/(\d+)/.exec(req.url ?? '')?.[1] ?? 0) + 1}`); res.end(); break
      case 'shrunk': res.end(netset(10)); break
    }
  })
  const dir = tempDir(t)
  const svc = await start(t, dir, writeManifest(dir, { url: `${host.url}/feed`, max_bytes: 200_000, timeout_seconds: 1 }))
  assert.equal((await refresh(svc)).sources[0]?.status, 'ok')
  const version = (await sources(svc)).snapshot.version
  for (const [m, pattern] of [['500', /HTTP 500/], ['html', /HTML/], ['garbage', /no usable entries|rejected/], ['slow', /timed out/], ['oversize', /max_bytes/], ['loop', /redirect loop/], ['chain', /HTTP 301: redirect not followed/], ['shrunk', /shrank/]] as const) {
    mode = m
    const r = await refresh(svc)
    assert.equal(r.sources[0]?.status, 'failed', m)
    assert.match(r.sources[0]?.error ?? '', pattern, m)
    assert.equal(r.sources[0]?.records, 100, `${m}: the last good copy's records`)
    assert.equal(r.snapshot.version, version, `${m}: the snapshot is unchanged`)
    assert.deepEqual(await verdictSources(svc, '10.1.0.42'), ['remote_list'], `${m}: still listed`)
    const h = await health(svc)
    assert.equal(h.status, 'degraded', m)
    assert.ok(h.reasons.includes('feed remote_list is failed'))
  }
  mode = 'good'
  assert.equal((await refresh(svc)).sources[0]?.status, 'ok')
  assert.equal((await health(svc)).status, 'ok')
})

test('a body whose declared length passes max_bytes is refused before reading, and the process lives on', async (t) => {
  const host = await feedHost(t)
  let big = false
  host.set((_req, res) => {
    const body = Buffer.from(big ? netset(100) : netset(3))
    res.setHeader('content-length', body.length)
    res.end(body)
  })
  const uncaught: unknown[] = []
  const onUncaught = (err: unknown): void => { uncaught.push(err) }
  process.prependListener('uncaughtException', onUncaught)
  t.after(() => { process.removeListener('uncaughtException', onUncaught) })
  const dir = tempDir(t)
  const svc = await start(t, dir, writeManifest(dir, { url: `${host.url}/feed`, max_bytes: 200 }))
  assert.equal((await refresh(svc)).sources[0]?.status, 'ok')
  big = true
  const r = await refresh(svc)
  assert.equal(r.sources[0]?.status, 'failed')
  assert.match(r.sources[0]?.error ?? '', /body larger than max_bytes \(200\)/)
  assert.equal(r.sources[0]?.records, 3, 'the last good copy stays')
  // The abandoned response body errors after the refusal: it must not become an uncaught exception.
  await new Promise((resolve) => setTimeout(resolve, 200))
  assert.deepEqual(uncaught.map((e) => (e as Error).message), [])
  assert.deepEqual(await verdictSources(svc, '10.1.0.2'), ['remote_list'])
})

test('a 304 to a request that sent no validators is refused: the feed is failed, not ok with nothing', async (t) => {
  const host = await feedHost(t)
  host.set((_req, res) => { res.statusCode = 304; res.end() })
  const dir = tempDir(t)
  const svc = await start(t, dir, writeManifest(dir, { url: `${host.url}/feed` }))
  const r = await refresh(svc)
  assert.equal(r.sources[0]?.status, 'failed')
  assert.match(r.sources[0]?.error ?? '', /HTTP 304 \(not modified\) without a copy to keep/)
  assert.equal(r.sources[0]?.last_success_at, null)
  assert.ok(host.requests.every((q) => q.headers['if-none-match'] === undefined && q.headers['if-modified-since'] === undefined))
  assert.equal((await health(svc)).status, 'degraded')
  assert.match((await svc.app.inject({ url: '/metrics' })).body, /^iocv_feed_up\{feed="remote_list"\} 0$/m)
  assert.ok(svc.logs.some((l) => l.includes('feed download refused; no good copy yet')))
})

test('a last good copy missing from the data directory is fetched again in full, at the next start or refresh', async (t) => {
  const host = await feedHost(t)
  host.set((req, res) => {
    if (req.headers['if-none-match'] === '"a"') { res.statusCode = 304; res.end(); return }
    res.setHeader('etag', '"a"')
    res.end(netset(30, 9))
  })
  const dir = tempDir(t)
  const manifest = writeManifest(dir, { url: `${host.url}/feed` })
  const copy = join(dir, 'feeds', 'remote_list.feed')
  const first = await start(t, dir, manifest)
  await refresh(first)
  // Lost while running: the next refresh asks without validators and writes the copy again.
  rmSync(copy)
  const again = await refresh(first)
  assert.equal(host.requests.at(-1)?.headers['if-none-match'], undefined)
  assert.equal(again.sources[0]?.status, 'ok')
  assert.equal(readFileSync(copy, 'utf8'), netset(30, 9))
  await first.app.close()
  // Lost while stopped: the start says so and fetches it at once (refresh_seconds is an hour).
  rmSync(copy)
  const asked = host.requests.length
  const second = await start(t, dir, manifest)
  assert.ok(second.logs.some((l) => l.includes('last good copy of the feed is missing')))
  for (let i = 0; host.requests.length === asked || (await sources(second)).sources[0]?.status !== 'ok'; i++) {
    assert.ok(i < 200, 'fetched again at start')
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  assert.equal(host.requests.at(-1)?.headers['if-none-match'], undefined)
  for (let i = 0; (await verdictSources(second, '10.9.0.3')).length === 0; i++) {
    assert.ok(i < 200, 'the feed is in the snapshot again')
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
})

test('a restart with the feed host down serves the last good copy', async (t) => {
  const host = await feedHost(t)
  host.set((_req, res) => { res.setHeader('etag', '"a"'); res.end(netset(30, 7)) })
  const dir = tempDir(t)
  const manifest = writeManifest(dir, { url: `${host.url}/feed` })
  const first = await start(t, dir, manifest)
  await refresh(first)
  await first.app.close()
  host.server.closeAllConnections()
  await new Promise((resolve) => host.server.close(resolve))
  const second = await start(t, dir, manifest)
  assert.deepEqual(await verdictSources(second, '10.7.0.3'), ['remote_list'])
  const r = await refresh(second)
  assert.equal(r.sources[0]?.status, 'failed')
  assert.match(r.sources[0]?.error ?? '', /network error/)
  assert.equal(r.sources[0]?.records, 30)
  assert.ok(r.sources[0]?.last_success_at !== null)
})

test('a feed never fetched is pending, and its auth header comes from the environment without ever being shown', async (t) => {
  const host = await feedHost(t)
  const secret = 'S3cr3t-auth-key-value-0123456789'
  const querySecret = 'qkey-987654321'
  host.set((req, res) => {
    if (req.headers['auth-key'] !== secret) { res.statusCode = 401; res.end(`bad key ${String(req.headers['auth-key'])}`); return }
    res.end(netset(10, 9))
  })
  const dir = tempDir(t)
  const manifest = writeManifest(dir, { url: `http://user:pw-secret-1@127.0.0.1:${new URL(host.url).port}/feed?key=${querySecret}`, headers: { 'Auth-Key': '$' + '{TEST_FEED_KEY}' } })
  const svc = await start(t, dir, manifest, { TEST_FEED_KEY: secret })
  const before = await sources(svc)
  assert.ok(['pending', 'ok'].includes(before.sources[0]?.status ?? ''))
  const r = await refresh(svc)
  assert.equal(r.sources[0]?.status, 'ok')
  assert.equal(r.sources[0]?.url, `http://***@127.0.0.1:${new URL(host.url).port}/feed?key=***`)
  assert.equal(host.requests.at(-1)?.headers['auth-key'], secret)
  // The host refuses the key now, quoting it: the failure is reported without the value.
  host.set((req, res) => { res.statusCode = 401; res.end(`bad key ${String(req.headers['auth-key'])}; try another-secret-value-42`) })
  const failed = await refresh(svc)
  assert.equal(failed.sources[0]?.status, 'failed')
  const everything = svc.logs.join('') + JSON.stringify(failed) + JSON.stringify(await health(svc))
  for (const s of [secret, 'another-secret-value-42', querySecret, 'pw-secret-1']) assert.ok(!everything.includes(s), `leaked ${s}`)
  assert.match(svc.logs.join(''), /feed download refused/)
})

test('a header naming an unset variable makes the feed failed, naming the variable', async (t) => {
  const host = await feedHost(t)
  host.set((_req, res) => { res.end(netset(5)) })
  const dir = tempDir(t)
  const svc = await start(t, dir, writeManifest(dir, { url: `${host.url}/f`, headers: { 'Auth-Key': '$' + '{TEST_UNSET_VARIABLE}' } }))
  const r = await sources(svc)
  assert.equal(r.sources[0]?.status, 'failed')
  assert.match(r.sources[0]?.error ?? '', /TEST_UNSET_VARIABLE/)
  assert.equal((await health(svc)).status, 'degraded')
})

test('the sources route needs the admin permission', async (t) => {
  const dir = tempDir(t)
  const host = await feedHost(t)
  const svc = await start(t, dir, writeManifest(dir, { url: `${host.url}/f` }))
  const key = (await svc.store.createKey({ tenant: 't1', permissions: ['verdict', 'mgmt'], quota: null })).key
  for (const [method, url] of [['GET', '/api/v2/mgmt/intel/sources'], ['POST', '/api/v2/mgmt/intel/sources/refresh']] as const) {
    const res = await svc.app.inject({ method, url, headers: { 'x-api-key': key } })
    assert.equal(res.statusCode, 403)
    assert.equal(res.json().code, 'PERMISSION_DENIED')
    assert.equal((await svc.app.inject({ method, url })).statusCode, 401)
  }
})

test('a changed feed swaps in during a bulk load with zero failed requests', async (t) => {
  const host = await feedHost(t)
  let seed = 1
  host.set((_req, res) => { res.end(netset(500, seed)) })
  const dir = tempDir(t)
  const svc = await start(t, dir, writeManifest(dir, { url: `${host.url}/f` }), { IOC_POOL_SIZE: '2' })
  await refresh(svc)
  await svc.app.listen({ host: '127.0.0.1', port: 0 })
  const base = `http://127.0.0.1:${(svc.app.server.address() as AddressInfo).port}`
  const indicators = Array.from({ length: 400 }, (_v, i) => ({ value: `10.${(i % 2) + 1}.${i >> 8}.${i & 255}` }))
  const state = { stop: false }
  const statuses: number[] = []
  const client = async (): Promise<void> => {
    while (!state.stop) {
      const res = await request(`${base}/api/v2/ioc/verdict/bulk`, {
        method: 'POST', headers: { 'x-api-key': svc.key, 'content-type': 'application/json' }, body: JSON.stringify({ indicators })
      })
      // Read to the end (dump() drops a body over 128 KiB by resetting the connection, and the server's close then
      // waits for its keep-alive timeout).
      await res.body.arrayBuffer()
      statuses.push(res.statusCode)
    }
  }
  const clients = [client(), client(), client()]
  const before = (await sources(svc)).snapshot.version
  const versions = new Set<string>([before])
  for (const s of [2, 3, 4]) {
    seed = s
    versions.add((await refresh(svc)).snapshot.version)
  }
  state.stop = true
  await Promise.all(clients)
  assert.equal(versions.size, 4, 'three swaps happened')
  assert.ok(statuses.length > 0)
  assert.deepEqual(statuses.filter((s) => s !== 200), [])
})

test('a refresh where one feed changed re-parses that feed alone; the status shows which sources were parsed', async (t) => {
  const host = await feedHost(t)
  let seedA = 1
  host.set((req, res) => { res.end(req.url === '/a' ? netset(40, seedA) : netset(60, 20)) })
  const dir = tempDir(t)
  const manifest = join(dir, 'manifest.json')
  const feed = (name: string, url: string): object => ({
    name, format: 'netset', url, direction: 'malicious', group: 'threat_feed', subgroup: 'attack_source', category: 'abuse', confidence: 0.8, half_life_days: 0
  })
  writeFileSync(manifest, JSON.stringify({ feeds: [feed('feed_a', `${host.url}/a`), feed('feed_b', `${host.url}/b`)] }))
  const svc = await start(t, dir, manifest)
  await refresh(svc)
  seedA = 2
  const r = await refresh(svc) as unknown as { snapshot: { build: { warm: boolean, parsed: string[], reused: number }, sources: Array<{ name: string, parsed: boolean, parse_ms: number, indexed: number }> } }
  assert.equal(r.snapshot.build.warm, false)
  assert.deepEqual(r.snapshot.build.parsed, ['feed_a'])
  assert.ok(r.snapshot.build.reused >= 3, 'registries, built-in lists and feed_b were reused')
  const a = r.snapshot.sources.find((s) => s.name === 'feed_a')
  const b = r.snapshot.sources.find((s) => s.name === 'feed_b')
  assert.equal(a?.parsed, true)
  assert.equal(a?.indexed, 40)
  assert.equal(b?.parsed, false)
  assert.equal(b?.parse_ms, 0)
  assert.equal(b?.indexed, 60)
  assert.ok(r.snapshot.sources.filter((s) => s.name !== 'feed_a').every((s) => !s.parsed))
  const verdict = await svc.app.inject({
    method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'x-api-key': svc.key, 'content-type': 'application/json' }, payload: { indicator: { value: '10.20.0.5' }, signal_details: 'all' }
  })
  assert.match(verdict.body, /feed_b/, 'the reused feed still scores')
  assert.match(svc.logs.join(''), /"parsed":\["feed_a"\]/)
})

test('intel status prints the table from the status file the service writes', async (t) => {
  const host = await feedHost(t)
  host.set((_req, res) => { res.statusCode = 503; res.end() })
  const dir = tempDir(t)
  const svc = await start(t, dir, writeManifest(dir, { url: `${host.url}/f?token=abcdefsecret` }))
  await refresh(svc)
  const run = (args: string[]): { status: number | null, stdout: string, stderr: string } => {
    const r = spawnSync(process.execPath, [join(kRoot, 'bin', 'ioc-verdict.js'), 'intel', 'status', ...args], {
      env: serviceEnv({ IOC_DATA_DIR: dir, IOC_LOG_LEVEL: 'silent' }), encoding: 'utf8'
    })
    return { status: r.status, stdout: r.stdout, stderr: r.stderr }
  }
  const table = run([])
  assert.equal(table.status, 1, table.stderr)
  assert.match(table.stdout, /^NAME\s+STATUS\s+RECORDS/m)
  assert.match(table.stdout, /remote_list\s+failed\s+0/)
  assert.match(table.stdout, /HTTP 503/)
  const json = JSON.parse(run(['--json']).stdout) as { sources: Row[] }
  assert.equal(json.sources[0]?.status, 'failed')
  assert.ok(!JSON.stringify(json).includes('abcdefsecret'))
  const empty = spawnSync(process.execPath, [join(kRoot, 'bin', 'ioc-verdict.js'), 'intel', 'status'], {
    env: serviceEnv({ IOC_DATA_DIR: tempDir(t), IOC_LOG_LEVEL: 'silent' }), encoding: 'utf8'
  })
  assert.equal(empty.status, 1)
  assert.match(empty.stderr, /no feed status/)
})

test('a manifest entry with both path and url, or bad refresh settings, is a startup error', async (t) => {
  const dir = tempDir(t)
  for (const [feed, pattern] of [
    [{ url: 'http://127.0.0.1:1/x', path: 'x.txt' }, /either "path" or "url"/],
    [{ url: 'ftp://127.0.0.1/x' }, /"url" must be an absolute http/],
    [{ url: 'http://127.0.0.1:1/x', refresh_seconds: 0 }, /"refresh_seconds"/],
    [{ url: 'http://127.0.0.1:1/x', refresh_seconds: 1.5 }, /"refresh_seconds"/],
    [{ url: 'http://127.0.0.1:1/x', max_bytes: -1 }, /"max_bytes"/],
    [{ url: 'http://127.0.0.1:1/x', headers: { 'Bad Header': 'x' } }, /not a header name/],
    [{ url: 'http://127.0.0.1:1/x', headers: { Authorization: 'Bearer $' + '{IOC_DATABASE_URL}' } }, /names an IOC_\* setting/],
    [{ url: 'http://127.0.0.1:1/x', zip_member: '' }, /"zip_member"/],
    [{ path: 'x.txt', zip_member: 'a.csv' }, /"zip_member" applies only to a feed with a "url"/],
    [{ url: 'http://127.0.0.1:1/x?key=hidden-value', timeout_seconds: 'x' }, /"timeout_seconds"/]
  ] as const) {
    const err = await start(t, dir, writeManifest(dir, feed)).then(() => null, (e: Error) => e)
    assert.ok(err !== null)
    assert.match(err.message, pattern)
    assert.ok(!err.message.includes('hidden-value'))
  }
})

test('a body whose lines read but whose values are not indicators is refused; the last good copy stays', async (t) => {
  const host = await feedHost(t)
  let body = 'plain-good-1.example\nplain-good-2.example\n45.133.1.77\n'
  host.set((_req, res) => { res.end(body) })
  const dir = tempDir(t)
  const svc = await start(t, dir, writeManifest(dir, { url: `${host.url}/plain.txt`, format: 'plain' }))
  assert.equal((await refresh(svc)).sources[0]?.records, 3)
  assert.deepEqual(await verdictSources(svc, '45.133.1.77'), ['remote_list'])
  // Tokens the plain format reads, none of them an indicator: an address out of range, a label with a bad hyphen.
  body = Array.from({ length: 13 }, (_, i) => `999.1.1.${i + 1}`).concat(['-bad-.com', 'a..b.com']).join('\n') + '\n'
  const r = await refresh(svc)
  assert.equal(r.sources[0]?.status, 'failed')
  assert.equal(r.sources[0]?.error, 'body holds no usable entries')
  assert.equal(r.sources[0]?.records, 3, 'the last good copy\'s count')
  assert.deepEqual(await verdictSources(svc, '45.133.1.77'), ['remote_list'])
  // The count is of values that normalize: a copy with two of three usable is stored with 2.
  body = 'plain-good-3.example\n999.9.9.9\n45.133.1.78\n'
  host.set((_req, res) => { res.end(body) })
  const mixed = await refresh(svc)
  assert.equal(mixed.sources[0]?.status, 'ok')
  assert.equal(mixed.sources[0]?.records, 2)
})

test('a restart within refresh_seconds of the last fetch fetches nothing; a changed source is fetched at once', { timeout: 120_000 }, async (t) => {
  const host = await feedHost(t)
  host.set((_req, res) => { res.end(netset(10, 11)) })
  const dir = tempDir(t)
  const until = async (what: string, check: () => boolean | Promise<boolean>): Promise<void> => {
    for (let i = 0; !await check(); i++) {
      assert.ok(i < 600, `timed out waiting for ${what}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
  const manifest = writeManifest(dir, { url: `${host.url}/a`, refresh_seconds: 3600 })
  const first = await start(t, dir, manifest)
  await until('the first start\'s fetch', async () => (await sources(first)).sources[0]?.status === 'ok')
  assert.equal(host.requests.length, 1)
  await first.app.close()
  const second = await start(t, dir, manifest)
  // Fetched moments ago with an hour's interval: the restart serves the last good copy and fetches nothing.
  await new Promise((resolve) => setTimeout(resolve, 1500))
  assert.equal(host.requests.length, 1, 'no fetch at the restart')
  assert.equal((await sources(second)).sources[0]?.status, 'ok')
  assert.deepEqual(await verdictSources(second, '10.11.0.1'), ['remote_list'])
  await second.app.close()
  // The manifest now names another URL: that source was never fetched, so it is fetched at start.
  const third = await start(t, dir, writeManifest(dir, { url: `${host.url}/b`, refresh_seconds: 3600 }))
  await until('the moved feed\'s fetch', () => host.requests.length === 2)
  assert.equal(host.requests[1]?.url, '/b')
  await until('its copy', async () => (await sources(third)).sources[0]?.status === 'ok')
})

test('a manifest\'s headers and the validators follow a redirect within the feed\'s origin only', async (t) => {
  const other = await feedHost(t)
  other.set((_req, res) => { res.setHeader('etag', '"elsewhere"'); res.setHeader('last-modified', 'Sun, 06 Dec 2026 12:00:00 GMT'); res.end(netset(5, 9)) })
  const host = await feedHost(t)
  const otherPort = new URL(other.url).port
  host.set((req, res) => {
    if (req.url === '/start') { res.writeHead(302, { location: '/moved' }); res.end(); return }
    // Another origin: the same machine by another name and port.
    if (req.url === '/moved') { res.writeHead(301, { location: `http://localhost:${otherPort}/elsewhere` }); res.end(); return }
    res.statusCode = 404
    res.end()
  })
  const feed = { url: `${host.url}/start`, refreshSeconds: 3600, headers: { 'Auth-Key': 'feed-secret-1234' }, maxBytes: 1 << 20, timeoutSeconds: 5, zipMember: null }
  const out = await fetchFeed(feed, { etag: '"v1"', lastModified: null }, { variables: {}, retry: { attempts: 1, baseMs: 1, maxMs: 1 } })
  assert.equal(out.kind, 'body')
  assert.deepEqual(host.requests.map((r) => [r.url, r.headers['auth-key'], r.headers['if-none-match']]), [['/start', 'feed-secret-1234', '"v1"'], ['/moved', 'feed-secret-1234', '"v1"']])
  assert.equal(other.requests.length, 1)
  assert.equal(other.requests[0]?.headers['auth-key'], undefined, 'the key never reaches another origin')
  assert.equal(other.requests[0]?.headers['if-none-match'], undefined)
  // Its validators are another origin's, which the feed's origin would never match: not kept for the next fetch.
  assert.deepEqual(out.kind === 'body' ? [out.etag, out.lastModified] : null, [null, null])
})

test('timeout_seconds bounds the waits between body chunks, not a download that keeps moving', { timeout: 60_000 }, async (t) => {
  const host = await feedHost(t)
  const text = netset(4, 8) // about 50 bytes
  host.set((_req, res) => {
    res.writeHead(200)
    let at = 0
    // A byte every 100 ms: about 5 s in all, under a 1 s timeout_seconds.
    const drip = setInterval(() => {
      if (at >= text.length) { clearInterval(drip); res.end(); return }
      res.write(text[at++] as string)
    }, 100)
    res.once('close', () => { clearInterval(drip) })
  })
  const feed = { url: `${host.url}/drip`, refreshSeconds: 3600, headers: {}, maxBytes: 1 << 20, timeoutSeconds: 1, zipMember: null }
  const out = await fetchFeed(feed, { etag: null, lastModified: null }, { variables: {}, retry: { attempts: 1, baseMs: 1, maxMs: 1 } })
  assert.equal(out.kind, 'body')
  assert.equal(out.kind === 'body' ? out.body.toString() : '', text)
})

test('a graceful stop does not wait for a feed download in flight; the last good copy stays', { timeout: 60_000 }, async (t) => {
  const host = await feedHost(t)
  let serve = true
  let asked: () => void = () => {}
  const stalled = new Promise<void>((resolve) => { asked = resolve })
  // The first fetch gets the feed; later ones are never answered (no headers), within an hour-long timeout.
  host.set((_req, res) => {
    if (serve) { res.end(netset(30, 7)); return }
    asked()
  })
  const dir = tempDir(t)
  const svc = await start(t, dir, writeManifest(dir, { url: `${host.url}/x`, timeout_seconds: 3600 }))
  assert.equal((await refresh(svc)).sources[0]?.records, 30)
  serve = false
  // As a feed's timer starts a refresh (not through a request, which the stop would wait for as it drains).
  void svc.feeds.refreshAll().catch(() => {})
  await stalled
  await svc.app.close()
  // The copy the first fetch stored is still the feed's last good copy, for the next start.
  const again = await start(t, dir, writeManifest(dir, { url: `${host.url}/x`, timeout_seconds: 3600 }))
  assert.deepEqual(await verdictSources(again, '10.7.0.1'), ['remote_list'])
})

test('a gzip body inflating past max_bytes is refused as oversize every time, and never throws out of the fetch', { timeout: 120_000 }, async (t) => {
  const host = await feedHost(t)
  // 40 MiB of one line repeated: about 40 KiB of gzip, inflating past a 1 MiB max_bytes within its first chunks.
  const bomb = gzipSync(Buffer.alloc(40 * 1024 * 1024, '10.0.0.1\n'))
  host.set((req, res) => {
    if (req.url === '/enc') res.setHeader('content-encoding', 'gzip')
    if (req.url?.startsWith('/stall') === true) {
      // 8 KiB (inflating to about 8 MiB) and then nothing: the reader is waiting for a chunk when the inflater fails.
      res.write(bomb.subarray(0, 8192))
      return
    }
    // Written in small pieces, so that the inflater meets the bound between writes as well as within one.
    let at = 0
    const more = (): void => {
      while (at < bomb.length) {
        const piece = bomb.subarray(at, at + 1024)
        at += piece.length
        if (!res.write(piece)) { res.once('drain', more); return }
      }
      res.end()
    }
    more()
  })
  const uncaught: unknown[] = []
  const onUncaught = (err: unknown): void => { uncaught.push(err) }
  process.on('uncaughtException', onUncaught)
  t.after(() => { process.off('uncaughtException', onUncaught) })
  for (let i = 0; i < 12; i++) {
    const feed = { url: `${host.url}/${['enc', 'list.gz', 'stall.gz'][i % 3] as string}`, refreshSeconds: 3600, headers: {}, maxBytes: 1 << 20, timeoutSeconds: 30, zipMember: null }
    await assert.rejects(fetchFeed(feed, { etag: null, lastModified: null }, { variables: {}, retry: { attempts: 1, baseMs: 1, maxMs: 1 } }),
      (err: unknown) => err instanceof FeedFetchError && err.reason === 'oversize', `fetch ${i}`)
  }
  await new Promise((resolve) => setTimeout(resolve, 200))
  assert.deepEqual(uncaught, [])
})

test('a fetch whose signal aborts mid-download stops at once, with reason aborted, and is not retried', { timeout: 60_000 }, async (t) => {
  const host = await feedHost(t)
  let sent: () => void = () => {}
  const started = new Promise<void>((resolve) => { sent = resolve })
  // Headers and a first chunk, then nothing more: only the abort can end this download before its hour-long timeout.
  host.set((_req, res) => { res.writeHead(200); res.write('10.1.0.1\n', () => { sent() }) })
  const feed = { url: `${host.url}/slow`, refreshSeconds: 3600, headers: {}, maxBytes: 1 << 20, timeoutSeconds: 3600, zipMember: null }
  const stop = new AbortController()
  const fetching = fetchFeed(feed, { etag: null, lastModified: null }, { variables: {}, signal: stop.signal, retry: { attempts: 3, baseMs: 1, maxMs: 1 } })
  await started
  const cut = new Promise<void>((resolve) => { host.requests[0]?.socket.once('close', () => resolve()) })
  stop.abort()
  await assert.rejects(fetching, (err: unknown) => err instanceof FeedFetchError && err.reason === 'aborted')
  await cut
  assert.equal(host.requests.length, 1, 'no retry after an abort')
})

test('a refresh asked while a download is in flight fetches again after it, and answers with what the host serves now', { timeout: 60_000 }, async (t) => {
  const host = await feedHost(t)
  host.set((_req, res) => { res.end(netset(30, 1)) })
  const dir = tempDir(t)
  const svc = await start(t, dir, writeManifest(dir, { url: `${host.url}/x`, timeout_seconds: 3600 }))
  assert.equal((await refresh(svc)).sources[0]?.records, 30)
  // A download in flight (as a feed's timer starts one) is held before its answer.
  let held: ServerResponse | null = null
  let asked: () => void = () => {}
  const holding = new Promise<void>((resolve) => { asked = resolve })
  host.set((_req, res) => { held = res; asked() })
  const background = svc.feeds.refreshAll()
  await holding
  // The host now serves a new list, and an operator asks for a refresh.
  host.set((_req, res) => { res.end(netset(40, 2)) })
  const asking = refresh(svc)
  const first = host.requests.length
  ;(held as ServerResponse | null)?.end(netset(30, 1))
  const answer = await asking
  await background
  assert.equal(answer.sources[0]?.records, 40, 'the answer holds the list served after the call')
  assert.equal(host.requests.length, first + 1, 'one more download, after the one in flight')
  assert.deepEqual(await verdictSources(svc, '10.2.0.1'), ['remote_list'])
})
