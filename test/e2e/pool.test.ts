/**
 * End to end over a real socket (127.0.0.1 only): the worker pool answers exactly like inline scoring, serves
 * repeats from its per-shard caches, and carries x-request-id through.
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { request } from 'undici'
import { build, CleanupList, type Built } from '../helper.ts'

type Json = Record<string, any>
type Item = Record<string, unknown>

let inline: Built
let pooled: Built
let inlineUrl: string
let poolUrl: string
const ctx = new CleanupList()

before(async () => {
  inline = await build(ctx, { IOC_POOL_SIZE: '0' })
  pooled = await build(ctx, { IOC_POOL_SIZE: '2' })
  inlineUrl = await inline.app.listen({ port: 0, host: '127.0.0.1' })
  poolUrl = await pooled.app.listen({ port: 0, host: '127.0.0.1' })
})
after(async () => { await ctx.run() })

async function post (base: string, path: string, key: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number, body: Json, headers: Record<string, unknown> }> {
  const res = await request(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key, ...headers },
    body: JSON.stringify(body)
  })
  return { status: res.statusCode, body: await res.body.json() as Json, headers: res.headers }
}

/** 2,000 mixed indicators (valid, invalid, duplicates, defanged, typed and untyped), deterministic. */
function mixed (n: number): Item[] {
  const known: Item[] = [
    { value: '198.51.100.23' }, { value: 'malware-c2.example' }, { value: '203.0.113.9' }, { value: '203.0.113.45' },
    { type: 'ip_block', value: '203.0.113.0/24' }, { value: 'AS64511' }, { value: '8.8.8.8' }, { value: 'dns.google' },
    { type: 'file_hash_sha256', value: '275a021bbfb6489e54d471899f7db9d1663fc695ec2fe2a2c4538aabf651fd0f' },
    { value: 'cdn.xiaoduoai.com' }, { value: 'bad value!' }, { type: 'ip', value: '1.2.3' }, {}, { value: 3 }
  ]
  const out: Item[] = []
  for (let i = 0; i < n; i++) {
    switch (i % 8) {
      case 0: out.push(known[(i >> 3) % known.length] as Item); break
      case 1: out.push({ type: 'ip', value: `${(i * 7) % 223 + 1}.${(i * 13) % 256}.${(i * 17) % 256}.${(i % 250) + 1}` }); break
      case 2: out.push({ value: `host-${i % 300}.example` }); break
      case 3: out.push({ value: `198.51.100[.]${i % 256}` }); break
      case 4: out.push({ type: 'asn', value: String(64496 + (i % 40)) }); break
      case 5: out.push({ value: `10.${i % 256}.0.0/${8 + (i % 24)}` }); break
      case 6: out.push({ value: `2001:db8::${(i % 500).toString(16)}` }); break
      default: out.push({ value: i % 3 === 0 ? `nope ${i}` : `Host-${i % 300}.Example.` })
    }
  }
  return out
}

test('the same bulk returns identical results from the worker pool and from inline scoring', async () => {
  const indicators = mixed(2_000)
  for (const signalDetails of ['none', 'all']) {
    const body = { indicators, signal_details: signalDetails }
    const a = await post(inlineUrl, '/api/v2/ioc/verdict/bulk', inline.key, body)
    const b = await post(poolUrl, '/api/v2/ioc/verdict/bulk', pooled.key, body)
    assert.equal(a.status, 200)
    assert.equal(b.status, 200)
    assert.equal(b.body.meta.record_count, 2_000)
    assert.equal(b.body.results.length, 2_000)
    assert.deepEqual(b.body.results, a.body.results)
    assert.equal(b.body.meta.engine_version, a.body.meta.engine_version)
    assert.deepEqual(b.body.meta.warnings, a.body.meta.warnings)
    b.body.results.forEach((r: Json, i: number) => assert.deepEqual(r.indicator.value, indicators[i]?.value ?? null))
  }
})

test('single verdicts are identical from the worker pool and from inline scoring', async () => {
  for (const indicator of [{ value: '198.51.100.23' }, { value: 'malware-c2(.)example' }, { type: 'asn', value: 'as64511' }]) {
    const body = { indicator, signal_details: 'all', evidence_details: 'full' }
    const a = await post(inlineUrl, '/api/v2/ioc/verdict', inline.key, body)
    const b = await post(poolUrl, '/api/v2/ioc/verdict', pooled.key, body)
    const { meta: ma, ...va } = a.body
    const { meta: mb, ...vb } = b.body
    assert.deepEqual(vb, va)
    assert.deepEqual(mb.warnings, ma.warnings)
    assert.deepEqual(mb.detail_levels, ma.detail_levels)
  }
})

/** iocv_verdict_cache_hits_total for one mode, from GET /metrics. */
async function cacheHits (mode: string): Promise<number> {
  const res = await request(`${poolUrl}/metrics`)
  const text = await res.body.text()
  return Number(new RegExp(`^iocv_verdict_cache_hits_total\\{mode="${mode}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0)
}

test('a repeated bulk against the pool is served from the per-shard caches; a repeated single from the main thread\'s', async () => {
  const indicators = Array.from({ length: 2_000 }, (_, i) => ({ value: `cache-e2e-${i % 700}.example` }))
  const first = await post(poolUrl, '/api/v2/ioc/verdict/bulk', pooled.key, { indicators })
  // Bulk items carry no meta: the cache's hits are counted in the metrics.
  const before = await cacheHits('bulk')
  const second = await post(poolUrl, '/api/v2/ioc/verdict/bulk', pooled.key, { indicators })
  assert.equal(first.status, 200)
  assert.deepEqual(second.body.results, first.body.results)
  assert.equal(await cacheHits('bulk') - before, indicators.length, 'every indicator of the repeat is a hit')
  // Single calls are scored on the main thread, with a cache of their own.
  const probe = await post(poolUrl, '/api/v2/ioc/verdict', pooled.key, { indicator: { value: 'cache-e2e-never-bulked.example' } })
  assert.equal(probe.body.meta.cache_hit, false, 'control: an indicator never queried is a miss')
  const again = await post(poolUrl, '/api/v2/ioc/verdict', pooled.key, { indicator: { value: 'CACHE-E2E-never-bulked.example.' } })
  assert.equal(again.body.meta.cache_hit, true)
  assert.equal(again.body.indicator.value, 'CACHE-E2E-never-bulked.example.')
  assert.deepEqual({ ...again.body, indicator: null, meta: null }, { ...probe.body, indicator: null, meta: null })
})

test('x-request-id round-trips over the socket, and an unsafe one is replaced', async () => {
  const res = await post(poolUrl, '/api/v2/ioc/verdict', pooled.key, { indicator: { value: '192.0.2.8' } }, { 'x-request-id': 'soar-run-81:step.3' })
  assert.equal(res.status, 200)
  assert.equal(res.headers['x-request-id'], 'soar-run-81:step.3')
  assert.equal(res.body.meta.request_id, 'soar-run-81:step.3')
  const bulk = await post(poolUrl, '/api/v2/ioc/verdict/bulk', pooled.key, { indicators: [{ value: '192.0.2.8' }] }, { 'x-request-id': 'bulk-run-1' })
  assert.equal(bulk.headers['x-request-id'], 'bulk-run-1')
  const bad = await post(poolUrl, '/api/v2/ioc/verdict', pooled.key, { indicator: { value: '192.0.2.8' } }, { 'x-request-id': 'x'.repeat(300) })
  assert.notEqual(bad.headers['x-request-id'], 'x'.repeat(300))
  assert.equal(bad.body.meta.request_id, bad.headers['x-request-id'])
  const err = await post(poolUrl, '/api/v2/ioc/verdict', 'wrong', { indicator: { value: '192.0.2.8' } }, { 'x-request-id': 'err-trace-1' })
  assert.equal(err.status, 401)
  assert.equal(err.headers['x-request-id'], 'err-trace-1', 'errors carry the request id too')
})

test('concurrent bulks and singles against the pool all succeed and each answers its own request', async () => {
  const jobs = Array.from({ length: 12 }, async (_, j) => {
    const indicators = Array.from({ length: 300 }, (_, i) => ({ value: `10.${j}.${i >> 8}.${i & 255}` }))
    const res = await post(poolUrl, '/api/v2/ioc/verdict/bulk', pooled.key, { indicators }, { 'x-request-id': `conc-${j}` })
    assert.equal(res.status, 200)
    assert.equal(res.headers['x-request-id'], `conc-${j}`)
    res.body.results.forEach((r: Json, i: number) => assert.equal(r.indicator.value, indicators[i]?.value))
    const single = await post(poolUrl, '/api/v2/ioc/verdict', pooled.key, { indicator: { value: `10.${j}.0.7` } })
    assert.equal(single.status, 200)
    assert.equal(single.body.indicator.value, `10.${j}.0.7`)
  })
  await Promise.all(jobs)
})

test('answers after clients that went away mid-answer, and after each other, are each whole and their own', async () => {
  const indicatorsOf = (j: number): Item[] => Array.from({ length: 4000 }, (_, i) => ({ value: `172.${16 + (j % 8)}.${i >> 8}.${i & 255}` }))
  // Clients that read the headers of a 4,000-result answer, then drop the connection.
  const dropped = Array.from({ length: 4 }, async (_, j) => {
    const res = await request(`${poolUrl}/api/v2/ioc/verdict/bulk`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': pooled.key },
      body: JSON.stringify({ indicators: indicatorsOf(j) })
    })
    assert.equal(res.statusCode, 200)
    res.body.destroy()
  })
  const kept = Array.from({ length: 4 }, async (_, j) => {
    for (let round = 0; round < 3; round++) {
      const indicators = indicatorsOf(4 + j + round)
      const res = await post(poolUrl, '/api/v2/ioc/verdict/bulk', pooled.key, { indicators })
      assert.equal(res.status, 200)
      assert.equal(res.body.results.length, indicators.length)
      res.body.results.forEach((r: Json, i: number) => assert.equal(r.indicator.value, indicators[i]?.value))
    }
  })
  await Promise.all([...dropped, ...kept])
})
