/**
 * End to end over a real socket (127.0.0.1 only) with the crash-on-score worker fixture: a scoring worker that dies
 * fails only the request it was scoring, is replaced, and nothing of that request is recorded; a request held on a
 * worker keeps the in-flight bound full, so others get 503 OVERLOADED with Retry-After.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { BroadcastChannel } from 'node:worker_threads'
import type { FastifyInstance } from 'fastify'
import { request } from 'undici'
import { loadConfig } from '../../src/config.ts'
import type { HistoryClient } from '../../src/history/client.ts'
import { startService } from '../../src/service.ts'
import { utcDayOf, type Store } from '../../src/store/index.ts'
import { kCrashOnScoreEntry, kCrashValue, kHoldChannel, kHoldValue } from '../fixtures/crash-on-score.ts'
import { kTestIntelCache } from '../helper.ts'

type Json = Record<string, any>

interface Running {
  app: FastifyInstance
  store: Store
  history: HistoryClient
  url: string
  key: string
  makeKey: (tenant: string) => Promise<string>
}

const cleanups: Array<() => Promise<void>> = []

/**
 * The service as startService wires it, with the scoring pool running the given worker entry.
 */
async function startWithEntry (env: Record<string, string>, entry: string): Promise<Running> {
  const dataDir = mkdtempSync(join(tmpdir(), 'ioc-verdict-e2e-'))
  const config = loadConfig({
    IOC_DATA_DIR: dataDir,
    IOC_LOG_LEVEL: 'silent',
    IOC_BOOTSTRAP_KEY: '0',
    IOC_INTEL_CACHE_DIR: kTestIntelCache,
    IOC_HISTORY_FLUSH_MS: '20',
    ...env
  })
  const { app, store, history } = await startService(config, { scoringEntry: entry })
  cleanups.push(async () => {
    await app.close()
    rmSync(dataDir, { recursive: true, force: true })
  })
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  const makeKey = async (tenant: string): Promise<string> => (await store.createKey({ tenant, permissions: ['verdict', 'verdict_bulk'], quota: 1_000_000 })).key
  return { app, store, history, url, key: await makeKey('t1'), makeKey }
}

let crashy: Running
let held: Running
before(async () => {
  crashy = await startWithEntry({ IOC_POOL_SIZE: '2' }, kCrashOnScoreEntry)
  held = await startWithEntry({ IOC_POOL_SIZE: '2', IOC_MAX_INFLIGHT: '4' }, kCrashOnScoreEntry)
})
after(async () => {
  for (const fn of cleanups.reverse()) await fn()
})

async function post (svc: Running, path: string, body: unknown, key = svc.key): Promise<{ status: number, body: Json, headers: Record<string, unknown> }> {
  const res = await request(`${svc.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify(body)
  })
  return { status: res.statusCode, body: await res.body.json() as Json, headers: res.headers }
}

function batch (tag: number, n: number): Array<{ value: string }> {
  return Array.from({ length: n }, (_, i) => ({ value: i % 2 === 0 ? `10.${tag}.${i >> 8}.${i & 255}` : `h${i}-${tag}.example` }))
}

async function recordedFor (svc: Running, tenant: string): Promise<{ rows: number, usage: number }> {
  await svc.history.flush()
  const page = await svc.store.searchHistory(tenant, {}, 1000, null)
  const usage = await svc.store.usage(tenant, null, utcDayOf(Date.now()))
  return { rows: page.results.length, usage: usage.total }
}

test('a worker that dies fails only the request it was scoring, with a clean 503 SCORING_FAILED, and is replaced', async () => {
  const crashKey = await crashy.makeKey('crash-tenant')
  const bulks = Array.from({ length: 6 }, (_, j) => batch(j, 400))
  bulks[3]?.splice(200, 0, { value: kCrashValue })
  const results = await Promise.all(bulks.map(async (indicators, j) => await post(crashy, '/api/v2/ioc/verdict/bulk', { indicators }, j === 3 ? crashKey : crashy.key)))
  results.forEach((res, j) => {
    if (j === 3) return
    assert.equal(res.status, 200, `bulk ${j}: ${JSON.stringify(res.body).slice(0, 200)}`)
    assert.equal(res.body.meta.record_count, 400)
    res.body.results.forEach((r: Json, i: number) => assert.equal(r.indicator.value, bulks[j]?.[i]?.value))
  })
  const failed = results[3]
  assert.ok(failed !== undefined)
  assert.ok(failed.status === 503 || failed.status === 500, `the crashed request fails cleanly (${failed.status})`)
  assert.deepEqual(Object.keys(failed.body).sort(), ['code', 'error', 'message', 'statusCode'])
  assert.equal(failed.body.statusCode, failed.status)
  if (failed.status === 503) {
    assert.equal(failed.body.code, 'SCORING_FAILED')
    assert.match(String(failed.headers['retry-after']), /^[1-9][0-9]*$/)
  }
  assert.doesNotMatch(JSON.stringify(failed.body), /exited|worker|\/work\/|node_modules|\n\s+at /, 'no internals in the body')

  // Nothing of the failed request is recorded or counted.
  assert.deepEqual(await recordedFor(crashy, 'crash-tenant'), { rows: 0, usage: 0 })

  // The service still answers on every shard (the dead worker was replaced), single and bulk.
  const again = await post(crashy, '/api/v2/ioc/verdict/bulk', { indicators: batch(9, 400) })
  assert.equal(again.status, 200)
  for (const value of ['192.0.2.1', 'crash-neighbour.example', 'h1-3.example', '10.3.0.0']) {
    const res = await post(crashy, '/api/v2/ioc/verdict', { indicator: { value } })
    assert.equal(res.status, 200, value)
  }
  // Single calls are scored on the main thread: the fixture's value is just a domain there.
  assert.equal((await post(crashy, '/api/v2/ioc/verdict', { indicator: { value: kCrashValue } }, crashKey)).status, 200)
  // A second crash is survived the same way.
  const second = await post(crashy, '/api/v2/ioc/verdict/bulk', { indicators: [{ value: kCrashValue }] }, crashKey)
  assert.equal(second.status, 503)
  assert.equal(second.body.code, 'SCORING_FAILED')
  const after = await post(crashy, '/api/v2/ioc/verdict/bulk', { indicators: batch(10, 50) }, crashKey)
  assert.equal(after.status, 200)
  assert.deepEqual(await recordedFor(crashy, 'crash-tenant'), { rows: 51, usage: 51 })
})

test('while the in-flight bound is full, other requests get 503 OVERLOADED with Retry-After, and pass once it drains', async () => {
  const channel = new BroadcastChannel(kHoldChannel)
  try {
    const holding = new Promise<void>((resolve) => {
      channel.onmessage = (ev) => {
        if ((ev as MessageEvent).data === 'holding') resolve()
      }
    })
    const heldBulk = post(held, '/api/v2/ioc/verdict/bulk', { indicators: [{ value: kHoldValue }, { value: '192.0.2.1' }, { value: '192.0.2.2' }, { value: '192.0.2.3' }] })
    await holding
    const single = await post(held, '/api/v2/ioc/verdict', { indicator: { value: '192.0.2.50' } })
    assert.equal(single.status, 503)
    assert.deepEqual(Object.keys(single.body).sort(), ['code', 'error', 'message', 'statusCode'])
    assert.equal(single.body.code, 'OVERLOADED')
    assert.match(String(single.headers['retry-after']), /^[1-9][0-9]*$/)
    const bulk = await post(held, '/api/v2/ioc/verdict/bulk', { indicators: [{ value: '192.0.2.51' }] })
    assert.equal(bulk.status, 503)
    assert.equal(bulk.body.code, 'OVERLOADED')
    const health = await request(`${held.url}/api/v2/ioc/health`)
    assert.equal(health.statusCode, 200, 'health does not count against the bound')
    await health.body.dump()

    channel.postMessage('release')
    const done = await heldBulk
    assert.equal(done.status, 200)
    assert.equal(done.body.meta.record_count, 4)
    assert.equal((await post(held, '/api/v2/ioc/verdict', { indicator: { value: '192.0.2.50' } })).status, 200)
  } finally {
    channel.close()
  }
})
