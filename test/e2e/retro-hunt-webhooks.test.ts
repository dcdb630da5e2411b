/**
 * Retro-hunt webhooks end to end (receivers on 127.0.0.1, allowed by IOC_WEBHOOK_ALLOW_PRIVATE=1): a new hit is
 * delivered once, signed so that a receiver verifies it with the secret shown at creation; a receiver that fails
 * twice gets the same delivery on the third attempt; the secret is in no log line and no listing. Without the
 * setting, URLs on private addresses and http:// are refused.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { createHmac, timingSafeEqual } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { test, type TestContext } from 'node:test'
import pino from 'pino'
import { request } from 'undici'
import { loadConfig, storeOptions } from '../../src/config.ts'
import { newWebhookSecret, signatureOf } from '../../src/pool/webhook-sender.ts'
import { startService, type Service } from '../../src/service.ts'
import { openStore } from '../../src/store/index.ts'
import { waitFor } from '../fixtures/read-history.ts'
import { writeFeedManifest } from '../fixtures/retro-feed.ts'
import { newHit } from '../fixtures/retro-hits.ts'
import { kTestIntelCache, serviceEnv, smallRegistries } from '../helper.ts'

type Json = Record<string, any>

interface Received { headers: IncomingHttpHeaders, raw: string }

/** A receiver on 127.0.0.1 answering each request with the next status of `statuses` (then 200). */
async function receiver (t: TestContext, statuses: number[] = []): Promise<{ url: string, got: Received[] }> {
  const got: Received[] = []
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      got.push({ headers: req.headers, raw: Buffer.concat(chunks).toString('utf8') })
      res.statusCode = statuses.shift() ?? 200
      res.end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, got }
}

/** Waits bound for hits and deliveries: a refresh answers before its rebuild, and a pass runs at the lowest priority. */
const kHitsMs = 150_000

/** How a receiver checks a delivery: HMAC-SHA256 of "<timestamp>.<raw body>", compared in constant time. */
function verifies (secret: string, r: Received): boolean {
  const ts = String(r.headers['x-ioc-timestamp'])
  const expected = Buffer.from(`sha256=${createHmac('sha256', secret).update(`${ts}.${r.raw}`).digest('hex')}`)
  const got = Buffer.from(String(r.headers['x-ioc-signature']))
  return got.length === expected.length && timingSafeEqual(got, expected)
}

async function service (t: TestContext, env: Record<string, string>): Promise<Service & { logs: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'ioc-retro-hooks-'))
  let svc: Service | null = null
  // One hook, the service closed before its folder goes (node:test runs after hooks in the order they were added).
  t.after(async () => {
    await svc?.app.close()
    rmSync(dir, { recursive: true, force: true })
  })
  const logs: string[] = []
  const sink = new Writable({ write (chunk, _enc, cb) { logs.push(String(chunk)); cb() } })
  const config = loadConfig({ IOC_DATA_DIR: dir, IOC_POOL_SIZE: '0', IOC_BOOTSTRAP_KEY: '0', IOC_LOG_LEVEL: 'debug', IOC_HISTORY_FLUSH_MS: '20', ...env })
  svc = await startService(config, { logger: pino({ level: 'debug' }, sink) })
  return { ...svc, logs }
}

test('a new hit is delivered signed, and a receiver failing twice gets it on the third attempt', { timeout: 400_000 }, async (t) => {
  let feedBody = 'unrelated-hook-entry.example\n'
  const feed = createServer((_req, res) => { res.end(feedBody) })
  await new Promise<void>((resolve) => feed.listen(0, '127.0.0.1', resolve))
  t.after(async () => { feed.closeAllConnections(); await new Promise((resolve) => feed.close(resolve)) })
  const dir = mkdtempSync(join(tmpdir(), 'ioc-retro-hooks-feeds-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  writeFeedManifest(join(dir, 'manifest.json'), 'hook_feed', `http://127.0.0.1:${(feed.address() as AddressInfo).port}/list.txt`)
  const svc = await service(t, {
    IOC_FEEDS: join(dir, 'manifest.json'),
    IOC_WEBHOOK_ALLOW_PRIVATE: '1',
    IOC_WEBHOOK_RETRY_BASE_MS: '50',
    IOC_FEED_MIN_SHRINK_PERCENT: '0',
    IOC_RETRO_HUNT_DUTY_PERCENT: '100',
    // Normal priority: at nice 19 on a machine kept busy (CI, other tests) a pass can wait minutes for a core.
    IOC_RETRO_HUNT_LOW_PRIORITY: '0',
    ...smallRegistries()
  })
  const key = (await svc.store.createKey({ tenant: 'hooked', permissions: ['verdict', 'mgmt', 'admin'], quota: null })).key
  const other = (await svc.store.createKey({ tenant: 'other', permissions: ['verdict', 'mgmt', 'admin'], quota: null })).key
  const call = async (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: unknown, k = key): Promise<{ status: number, body: Json }> => {
    const res = await svc.app.inject({ method, url, headers: { 'x-api-key': k }, ...(payload === undefined ? {} : { payload: payload as Json }) })
    return { status: res.statusCode, body: res.body === '' ? {} : res.json() }
  }
  const refresh = async (): Promise<void> => { assert.equal((await call('POST', '/api/v2/mgmt/intel/sources/refresh')).status, 200) }
  await refresh()
  await svc.retroHunt.idle()

  const good = await receiver(t)
  const flaky = await receiver(t, [500, 503])
  const quiet = await receiver(t)
  const created = await call('POST', '/api/v2/mgmt/webhooks', { url: good.url, min_score: 0, description: 'SIEM' })
  assert.equal(created.status, 201)
  const secret = created.body.secret as string
  assert.match(secret, /^whsec_/)
  const flakyHook = await call('POST', '/api/v2/mgmt/webhooks', { url: flaky.url, min_score: 0 })
  assert.equal(flakyHook.status, 201)
  // Another tenant's webhook: never sent this tenant's hits.
  assert.equal((await call('POST', '/api/v2/mgmt/webhooks', { url: quiet.url, min_score: 0 }, other)).status, 201)

  const listed = await call('GET', '/api/v2/mgmt/webhooks')
  assert.equal(listed.status, 200)
  assert.deepEqual(listed.body.webhooks.map((h: Json) => h.url), [good.url, flaky.url])
  assert.ok(!JSON.stringify(listed.body).includes(secret), 'a listing never shows a secret')

  const asked = await call('POST', '/api/v2/ioc/verdict', { indicator: { value: 'hooked-domain.example' } })
  assert.equal(asked.status, 200)
  await waitFor('history stored', async () => {
    const r = await call('GET', '/api/v2/mgmt/enrich-logs/search-history?indicator_value=hooked-domain.example')
    return r.status === 200 && r.body.results.length > 0 ? true : undefined
  }, kHitsMs)
  feedBody = 'unrelated-hook-entry.example\nhooked-domain.example\n'
  await refresh()
  await svc.retroHunt.idle()

  const delivered = await waitFor('a delivery', () => good.got.length > 0 ? good.got : undefined, kHitsMs)
  const first = delivered[0] as Received
  assert.ok(verifies(secret, first), 'the signature verifies with the secret')
  assert.ok(!verifies(secret.slice(0, -1) + (secret.endsWith('A') ? 'B' : 'A'), first), 'and not with another')
  const body = JSON.parse(first.raw) as Json
  assert.equal(body.event, 'retro_hunt.hits')
  assert.equal(first.headers['x-ioc-delivery'], body.delivery_id)
  assert.ok(Math.abs(Number(first.headers['x-ioc-timestamp']) - Date.now() / 1000) < 600)
  assert.deepEqual(body.hits.map((h: Json) => h.indicator.value), ['hooked-domain.example'])
  assert.equal(body.hits[0].then.score, asked.body.risk.score)

  const tries = await waitFor('three attempts', () => flaky.got.length >= 3 ? flaky.got : undefined, kHitsMs)
  assert.equal(new Set(tries.map((r) => r.headers['x-ioc-delivery'])).size, 1, 'every attempt is the same delivery')
  assert.ok(tries.every((r) => r.raw === tries[0]?.raw), 'with the same body')
  const deliveries = await waitFor('the flaky delivery recorded', async () => {
    const r = await call('GET', `/api/v2/mgmt/webhooks/${flakyHook.body.id as string}/deliveries`)
    return r.body.deliveries?.[0]?.status === 'delivered' ? r.body.deliveries : undefined
  }, kHitsMs)
  assert.equal(deliveries.length, 1)
  assert.equal(deliveries[0].attempts, 3)
  assert.equal(deliveries[0].hits, 1)
  const goodDeliveries = (await call('GET', `/api/v2/mgmt/webhooks/${created.body.id as string}/deliveries`)).body.deliveries
  assert.deepEqual(goodDeliveries.map((d: Json) => [d.status, d.attempts]), [['delivered', 1]])
  assert.equal(good.got.length, 1, 'delivered once')
  assert.equal(quiet.got.length, 0, 'another tenant\'s webhook gets nothing')

  // Another tenant can neither see nor delete these; the owner can.
  assert.equal((await call('GET', `/api/v2/mgmt/webhooks/${created.body.id as string}/deliveries`, undefined, other)).status, 404)
  assert.equal((await call('DELETE', `/api/v2/mgmt/webhooks/${created.body.id as string}`, undefined, other)).status, 404)
  assert.equal((await call('DELETE', `/api/v2/mgmt/webhooks/${created.body.id as string}`)).status, 204)
  assert.equal((await call('DELETE', `/api/v2/mgmt/webhooks/${created.body.id as string}`)).status, 404)

  const metrics = (await svc.app.inject({ url: '/metrics' })).body
  assert.match(metrics, /^iocv_retro_hunt_deliveries_total [2-9]$/m)
  assert.match(metrics, /^iocv_retro_hunt_delivery_retries_total [2-9]$/m)
  assert.ok(!svc.logs.join('').includes(secret), 'no log line holds the secret')
  assert.ok(!svc.logs.join('').includes(String(first.headers['x-ioc-signature'])), 'nor a signature')
})

test('hits recorded but not handed on when the service stopped (a crash mid-pass, the CLI) are delivered after the next start, once', { timeout: 200_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ioc-retro-hooks-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const env = { IOC_DATA_DIR: dir, IOC_POOL_SIZE: '0', IOC_BOOTSTRAP_KEY: '0', IOC_LOG_LEVEL: 'silent', IOC_INTEL_CACHE_DIR: kTestIntelCache, IOC_WEBHOOK_ALLOW_PRIVATE: '1' }
  const hook = await receiver(t)
  let svc: Service | null = await startService(loadConfig(env))
  t.after(async () => { await svc?.app.close() })
  const key = (await svc.store.createKey({ tenant: 'crashed', permissions: ['mgmt', 'admin'], quota: null })).key
  const created = await svc.app.inject({ method: 'POST', url: '/api/v2/mgmt/webhooks', headers: { 'x-api-key': key }, payload: { url: hook.url, min_score: 80 } })
  assert.equal(created.statusCode, 201)
  await svc.app.close()
  svc = null
  // What a pass leaves when its process dies between recording hits and handing them on.
  const store = await openStore(storeOptions(loadConfig(env)))
  const recorded = await store.retroHunt.addHits([newHit('crashed', 'left-behind.example', 90, 'malware'), newHit('crashed', 'below-min.example', 70, 'malware')])
  await store.close()
  assert.equal(recorded.length, 2)

  svc = await startService(loadConfig(env))
  const got = await waitFor('the delivery after the restart', () => hook.got.length > 0 ? hook.got : undefined, kHitsMs)
  const body = JSON.parse((got[0] as Received).raw) as Json
  assert.deepEqual(body.hits.map((h: Json) => h.indicator.value), ['left-behind.example'], 'at the webhook\'s min_score')
  assert.equal(body.hits[0].id, recorded[0]?.id)
  await svc.app.close()
  svc = await startService(loadConfig(env))
  const again = await svc.app.inject({ method: 'GET', url: `/api/v2/mgmt/webhooks/${created.json().id as string}/deliveries`, headers: { 'x-api-key': key } })
  assert.equal(again.json().deliveries.length, 1, 'handed on once, not again at the next start')
  assert.equal(hook.got.length, 1)
})

test('webhook URLs on private addresses, http:// and bad input are refused; only admins create', { timeout: 120_000 }, async (t) => {
  const svc = await service(t, { IOC_INTEL_CACHE_DIR: kTestIntelCache })
  const admin = (await svc.store.createKey({ tenant: 't', permissions: ['mgmt', 'admin'], quota: null })).key
  const mgmt = (await svc.store.createKey({ tenant: 't', permissions: ['mgmt'], quota: null })).key
  const post = async (payload: Json, k = admin): Promise<{ status: number, code: string | undefined }> => {
    const res = await svc.app.inject({ method: 'POST', url: '/api/v2/mgmt/webhooks', headers: { 'x-api-key': k }, payload })
    return { status: res.statusCode, code: res.json().code }
  }
  for (const url of ['https://127.0.0.1/hook', 'https://localhost/hook', 'https://10.1.2.3/x', 'https://169.254.169.254/latest', 'https://[::1]/x',
    'https://[::ffff:127.0.0.1]/x', 'https://192.168.0.1/', 'https://0.0.0.0/', 'http://example.com/hook', 'ftp://example.com/', 'not a url',
    'https://user:pass@example.com/', 'https://[::127.0.0.1]/x', 'https://[::a9fe:a9fe]/x', 'https://1.1.1.1:0/',
    'https://1.1.1.1/\r\nX-Injected: 1', 'https://1.1.1.1/a b', 'https://1.1.1.1/hook#frag', 'https://1.1.1.1/hook#', 'https://8.8.8.8\\@127.0.0.1/h', 'https://1.1.1.1\\hook']) {
    assert.deepEqual(await post({ url }), { status: 400, code: 'INVALID_REQUEST' }, url)
  }
  assert.deepEqual(await post({ url: 'https://example.com/', min_score: 101 }), { status: 400, code: 'INVALID_REQUEST' })
  assert.deepEqual(await post({ url: 'https://example.com/', extra: 1 }), { status: 400, code: 'INVALID_REQUEST' })
  const control = await svc.app.inject({ method: 'POST', url: '/api/v2/mgmt/webhooks', headers: { 'x-api-key': admin }, payload: { url: 'https://example.com/', description: 'a\u001b[31mred' } })
  assert.equal(control.statusCode, 400)
  assert.match(control.json().message, /description/, 'refused for its description, before the URL is resolved')
  assert.deepEqual(await post({ url: 'https://example.com/' }, mgmt), { status: 403, code: 'PERMISSION_DENIED' })
  const list = await svc.app.inject({ method: 'GET', url: '/api/v2/mgmt/webhooks', headers: { 'x-api-key': mgmt } })
  assert.deepEqual(list.json(), { webhooks: [] })
  const withParameter = await svc.app.inject({ method: 'GET', url: '/api/v2/mgmt/webhooks?limit=5', headers: { 'x-api-key': mgmt } })
  assert.deepEqual([withParameter.statusCode, withParameter.json().code], [400, 'INVALID_REQUEST'], 'the listing takes no parameter')
  const missing = await svc.app.inject({ method: 'GET', url: '/api/v2/mgmt/webhooks/wh_000000000ffffffffff/deliveries', headers: { 'x-api-key': mgmt } })
  assert.equal(missing.json().code, 'NOT_FOUND')
})

test('the receiver example (examples/retro-hunt-receiver.mjs) accepts a signed delivery once and refuses a bad signature', { timeout: 60_000 }, async (t) => {
  const secret = newWebhookSecret()
  const child = spawn(process.execPath, [join(import.meta.dirname, '..', '..', 'examples', 'retro-hunt-receiver.mjs')], {
    env: serviceEnv({ IOCV_WEBHOOK_SECRET: secret, PORT: '0' }),
    stdio: ['ignore', 'pipe', 'pipe']
  })
  t.after(() => { child.kill() })
  let out = ''
  let err = ''
  child.stdout.on('data', (c: Buffer) => { out += String(c) })
  child.stderr.on('data', (c: Buffer) => { err += String(c) })
  const url = await waitFor('the receiver listening', () => /listening on (\S+)/.exec(err)?.[1], kHitsMs)
  const body = JSON.stringify({ event: 'retro_hunt.hits', delivery_id: 'dl_000000001aaaaaaaaaa', hits: [{ id: 'rh_x', indicator: { type: 'domain', value: 'a.example' } }] })
  const send = async (signature: string, ts = Math.floor(Date.now() / 1000)): Promise<number> => {
    const res = await request(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-ioc-timestamp': String(ts), 'x-ioc-signature': signature, 'x-ioc-delivery': 'dl_000000001aaaaaaaaaa' }, body })
    await res.body.dump()
    return res.statusCode
  }
  const ts = Math.floor(Date.now() / 1000)
  assert.equal(await send(signatureOf(secret, ts, body), ts), 204)
  assert.equal(await send(signatureOf(secret, ts, body), ts), 204, 'a retry is accepted')
  assert.equal(await send(signatureOf(`${secret}x`, ts, body), ts), 401)
  assert.equal(await send(signatureOf(secret, ts - 3600, body), ts - 3600), 401, 'a stale timestamp is refused')
  await waitFor('the hit printed', () => out.includes('a.example') ? true : undefined, kHitsMs)
  assert.equal(out.trim().split('\n').length, 1, 'printed once')
})
