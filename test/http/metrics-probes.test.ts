/**
 * GET /metrics (Prometheus text) after traffic, and the orchestrator probes GET /livez and GET /readyz.
 */
import assert from 'node:assert/strict'
import fs from 'node:fs'
import { syncBuiltinESMExports } from 'node:module'
import { test } from 'node:test'
import { build, buildForFile } from '../helper.ts'

const svc = buildForFile()

/** The sum of every sample of a metric (all label values). */
function total (text: string, name: string): number {
  return text.split('\n').filter((l) => l.startsWith(`${name}{`)).reduce((a, l) => a + Number(l.slice(l.lastIndexOf(' ') + 1)), 0)
}

/** The value of one sample line `name{labels} value`, or undefined. */
function sample (text: string, name: string, labels: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(labels))
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1))
}

test('metrics count requests by route pattern and status, and indicators with cache hits by mode', async () => {
  const headers = { 'x-api-key': svc.key }
  const before = (await svc.app.inject({ url: '/metrics' })).body
  const bulkBefore = sample(before, 'iocv_indicators_scored_total', 'mode="bulk"') ?? 0
  const hitsBefore = sample(before, 'iocv_verdict_cache_hits_total', 'mode="bulk"') ?? 0
  const domainsBefore = sample(before, 'iocv_indicators_by_type_total', 'type="domain"') ?? 0
  const categorizedBefore = total(before, 'iocv_indicators_by_category_total')
  const indicators = [{ value: 'metrics-a.example' }, { value: 'metrics-a.example' }, { value: 'not valid!' }]
  for (let i = 0; i < 2; i++) {
    const res = await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict/bulk', headers, payload: { indicators } })
    assert.equal(res.statusCode, 200)
  }
  await svc.history.flush()
  await svc.app.inject({ url: '/api/v2/mgmt/enrich-logs/search-history?api_key=secret-in-query&limit=1', headers })
  await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', payload: {} })
  const res = await svc.app.inject({ url: '/metrics' })
  assert.equal(res.statusCode, 200)
  assert.match(String(res.headers['content-type']), /^text\/plain/)
  const text = res.body
  assert.equal((sample(text, 'iocv_indicators_scored_total', 'mode="bulk"') ?? 0) - bulkBefore, 6)
  assert.ok((sample(text, 'iocv_verdict_cache_hits_total', 'mode="bulk"') ?? 0) - hitsBefore >= 3, 'the second bulk and the repeat came from the cache')
  assert.ok((sample(text, 'iocv_indicators_invalid_total', 'mode="bulk"') ?? 0) >= 2)
  assert.equal((sample(text, 'iocv_indicators_by_type_total', 'type="domain"') ?? 0) - domainsBefore, 4, 'two valid domains per bulk; the invalid one has no type')
  assert.equal(total(text, 'iocv_indicators_by_category_total') - categorizedBefore, 4, 'every valid indicator has a risk category')
  assert.match(text, /^iocv_indicators_by_category_total\{category="[a-z_]+"\} \d+$/m)
  assert.ok(Number(/^iocv_history_store_writes_total (\d+)/m.exec(text)?.[1] ?? 0) >= 1, 'the flushed batch was counted')
  assert.match(text, /^iocv_history_store_write_seconds_total [0-9.e-]+$/m)
  assert.ok((sample(text, 'iocv_http_requests_total', 'route="/api/v2/ioc/verdict/bulk",status="200"') ?? 0) >= 2)
  assert.equal(sample(text, 'iocv_http_requests_total', 'route="/api/v2/ioc/verdict",status="401"'), 1)
  assert.ok(sample(text, 'iocv_http_request_duration_seconds_count', 'route="/api/v2/ioc/verdict/bulk"') !== undefined)
  assert.doesNotMatch(text, /secret-in-query/, 'label values are route patterns, never URLs')
  for (const gauge of ['iocv_indicators_in_flight', 'iocv_pool_queue_depth', 'iocv_history_backlog_records', 'iocv_history_legacy_spool_bytes', 'iocv_history_spool_bytes', 'iocv_history_journal_bytes', 'iocv_pool_utilization', 'iocv_intel_snapshot_age_seconds', 'iocv_process_cpu_seconds_total']) {
    assert.match(text, new RegExp(`^${gauge} [0-9.e+-]+$`, 'm'), `${gauge} is exported`)
  }
})

test('the pool queue depth counts scoring tasks in flight and is 0 again once the threads are idle', async (t) => {
  const own = await build(t, { IOC_POOL_SIZE: '2' })
  const headers = { 'x-api-key': own.key }
  const indicators = Array.from({ length: 200 }, (_, i) => ({ value: `queue-depth-${i}.example` }))
  const lease = own.intel.lease()
  const chunks = [0, 1, 0].map(async (shard) => await lease.pool.runBulk(shard, [['domain', `held-${shard}.example`, null, null]], { mode: 'bulk', format: 'json', scoringVersion: null, signalDetails: 'none', evidenceDetails: 'none' }))
  assert.equal(own.intel.pending, 3, 'three chunks handed to the threads and not yet answered')
  await Promise.all(chunks)
  lease.release()
  const answers = await Promise.all([1, 2, 3].map(async () => await own.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict/bulk', headers, payload: { indicators } })))
  for (const res of answers) assert.equal(res.statusCode, 200)
  const text = (await own.app.inject({ url: '/metrics' })).body
  assert.match(text, /^iocv_pool_threads 2$/m)
  assert.match(text, /^iocv_pool_queue_depth 0$/m, 'no task is queued or running')
  assert.ok(Number(/^iocv_pool_utilization ([0-9.e-]+)$/m.exec(text)?.[1]) > 0, 'the threads have run tasks')
})

test('livez and readyz answer ok on a serving instance', async () => {
  for (const url of ['/livez', '/readyz']) {
    const res = await svc.app.inject({ url })
    assert.equal(res.statusCode, 200)
    assert.deepEqual(res.json(), { status: 'ok' })
  }
})

test('readyz answers 503 with a reason when the store is unreachable, while livez stays 200', async (t) => {
  const own = await build(t)
  own.store.ping = async () => { throw new Error('connection refused to postgres://user:pw@db') }
  const ready = await own.app.inject({ url: '/readyz' })
  assert.equal(ready.statusCode, 503)
  assert.deepEqual(ready.json(), { status: 'unavailable', reasons: ['store unreachable'] })
  assert.equal((await own.app.inject({ url: '/livez' })).statusCode, 200)
})

test('a store that does not answer makes readyz and health answer 503 within the check deadline; probes share one ping', async (t) => {
  const own = await build(t)
  let pings = 0
  let answer: (() => void) | null = null
  own.store.ping = async () => {
    pings++
    await new Promise<void>((resolve) => { answer = resolve })
  }
  const answers = await Promise.all([
    ...Array.from({ length: 20 }, async () => await own.app.inject({ url: '/readyz' })),
    own.app.inject({ url: '/api/v2/ioc/health' })
  ])
  for (const ready of answers.slice(0, 20)) {
    assert.equal(ready.statusCode, 503)
    assert.deepEqual(ready.json(), { status: 'unavailable', reasons: ['store unreachable'] })
  }
  const health = answers[20]!
  assert.equal(health.statusCode, 503)
  assert.equal(health.json().checks.store, 'error')
  assert.equal(pings, 1, 'the probes shared the one ping still waiting')
  // While that ping still waits, no other starts; once it has ended, the next probe pings afresh.
  assert.equal((await own.app.inject({ url: '/readyz' })).statusCode, 503)
  assert.equal(pings, 1)
  ;(answer as (() => void) | null)?.()
  await new Promise((resolve) => setImmediate(resolve))
  own.store.ping = async () => { pings++ }
  assert.equal((await own.app.inject({ url: '/readyz' })).statusCode, 200)
  assert.equal(pings, 2)
})

test('a journal that cannot be written (a full disk) makes health unavailable and readyz 503, until a write succeeds', async (t) => {
  const own = await build(t)
  const headers = { 'x-api-key': own.key }
  const payload = { indicator: { value: 'journal-probe.example' } }
  const writev = fs.writev
  const restore = (): void => { fs.writev = writev; syncBuiltinESMExports() }
  t.after(restore)
  // Every journal write fails as on a full disk (the journal writes through node:fs writev).
  fs.writev = ((_fd: number, _buffers: unknown, ...rest: unknown[]) => {
    // (fd, buffers, position, callback) or (fd, buffers, callback): the callback comes last.
    const cb = rest.at(-1) as (err: NodeJS.ErrnoException | null, n?: number) => void
    setImmediate(() => cb(Object.assign(new Error('no space left on device'), { code: 'ENOSPC' })))
  }) as typeof fs.writev
  syncBuiltinESMExports()
  const refused = await own.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers, payload })
  assert.equal(refused.statusCode, 503)
  const ready = await own.app.inject({ url: '/readyz' })
  assert.equal(ready.statusCode, 503)
  assert.deepEqual(ready.json(), { status: 'unavailable', reasons: ['history journal cannot be written (ENOSPC)'] })
  const health = await own.app.inject({ url: '/api/v2/ioc/health' })
  assert.equal(health.statusCode, 503)
  assert.equal(health.json().status, 'unavailable')
  assert.ok(health.json().reasons.includes('history journal cannot be written (ENOSPC)'), health.body)
  assert.equal(health.json().checks.history.journal_error, 'ENOSPC')
  // The disk has room again: the next call is answered and recorded, and the instance is ready at once.
  restore()
  assert.equal((await own.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers, payload })).statusCode, 200)
  assert.equal((await own.app.inject({ url: '/readyz' })).statusCode, 200)
  const after = await own.app.inject({ url: '/api/v2/ioc/health' })
  assert.equal(after.json().checks.history.journal_error, null)
  assert.equal(after.statusCode, 200)
})

test('every metric /metrics exports is in docs/API.md\'s table of metrics', async () => {
  const text = (await svc.app.inject({ url: '/metrics' })).body
  const exported = new Set([...text.matchAll(/^# TYPE (iocv_[a-z0-9_]+) /gm)].map((m) => m[1] as string))
  const doc = fs.readFileSync(new URL('../../docs/API.md', import.meta.url), 'utf8')
  const listed = new Set([...doc.matchAll(/^\| `(iocv_[a-z0-9_]+)` \|/gm)].map((m) => m[1] as string))
  // prom-client's default metrics are listed as a family.
  const missing = [...exported].filter((name) => !listed.has(name) && !/^iocv_(process|nodejs)_/.test(name))
  assert.ok(exported.has('iocv_retro_hunt_hits_total') && exported.size > 20, `the service exports its metrics (${exported.size})`)
  assert.deepEqual(missing, [], 'add these to docs/API.md "Metrics"')
})
