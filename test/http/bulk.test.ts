/**
 * POST /api/v2/ioc/verdict/bulk (docs/API.md "Bulk"), through app.inject on one shared service.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { normalize } from '../../src/engine/index.ts'
import { utcDayOf } from '../../src/store/index.ts'
import { buildForFile } from '../helper.ts'
import { mulberry32 } from '../../bench/corpus.ts'

const svc = buildForFile()

type Json = Record<string, any>
type Item = Record<string, unknown>

const kUuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const kItemMembers = ['indicator', 'recommended_actions', 'risk', 'scores', 'signal_count', 'signals', 'threat_context']
const kMetaMembers = ['bulk_request_id', 'data_timestamp', 'engine_version', 'errors', 'evidence_details', 'record_count', 'signal_details', 'took_ms', 'warnings']

async function bulk (body: unknown, key = svc.key): Promise<{ status: number, body: Json, raw: string, headers: Record<string, unknown> }> {
  const res = await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict/bulk', headers: { 'x-api-key': key }, payload: body as object })
  return { status: res.statusCode, body: res.json(), raw: res.body, headers: res.headers }
}

/** Deterministic PRNG. */
const rng = mulberry32

/** Distinct indicator items of every type and shape, valid and invalid. */
function templates (rand: () => number, count: number): Item[] {
  const int = (lo: number, hi: number): number => lo + Math.floor(rand() * (hi - lo + 1))
  const hex = (n: number): string => Array.from({ length: n }, () => '0123456789abcdef'[int(0, 15)]).join('')
  const out: Item[] = [
    { value: '198.51.100.23' }, { type: 'ip', value: '198.51.100.23' }, { value: 'malware-c2.example' },
    { type: 'file_hash_sha256', value: '275a021bbfb6489e54d471899f7db9d1663fc695ec2fe2a2c4538aabf651fd0f' },
    { type: 'ip_block', value: '203.0.113.0/24' }, { value: '203.0.113.9' }, { value: '203.0.113.45' }, { value: 'AS64511' },
    { value: '1.1.1.1' }, { type: 'ip', value: '8.8.8.8' }, { value: 'dns.google' }, { type: 'domain', value: 'cdn.xiaoduoai.com' },
    { value: '::ffff:192.0.2.1' }, { value: 'hxxp://malware-c2[.]example/payload' },
    // invalid
    { type: 'ip', value: '1.2.3' }, { type: 'ip', value: '01.2.3.4' }, { value: 'not valid!' }, { value: '' }, { value: '   ' },
    { value: 42 }, { value: null }, {}, { type: 'bogus', value: '1.2.3.4' }, { type: 'ip', value: 'example.com' },
    { type: 'file_hash_sha256', value: hex(32) }, { type: 5, value: '1.2.3.4' }, { value: ['1.2.3.4'] }, { value: { v: 1 } },
    { type: 'asn', value: 'AS99999999999' }
  ]
  const seen = new Set(out.map((x) => JSON.stringify(x)))
  while (out.length < count) {
    const n = int(0, 1_000_000)
    let item: Item
    switch (int(0, 9)) {
      case 0: item = { type: 'ip', value: `${int(1, 223)}.${int(0, 255)}.${int(0, 255)}.${int(1, 254)}` }; break
      case 1: item = { value: `${int(1, 223)}.${int(0, 255)}.${int(0, 255)}.${int(1, 254)}` }; break
      case 2: item = { type: 'domain', value: `host-${n}.Example.ORG.` }; break
      case 3: item = { value: `h${n}.example` }; break
      case 4: item = rand() < 0.5 ? { type: 'file_hash_sha256', value: hex(64).toUpperCase() } : { value: hex(64) }; break
      case 5: item = rand() < 0.5 ? { type: 'asn', value: String(n) } : { value: `as${n}` }; break
      case 6: item = { type: 'ip_block', value: `10.${int(0, 255)}.${int(0, 255)}.${int(0, 255)}/${int(8, 32)}` }; break
      case 7: item = { value: `198.51.100[.]${int(0, 255)}` }; break
      case 8: item = { value: `2001:db8::${n.toString(16)}` }; break
      default: item = rand() < 0.5 ? { type: 'ip', value: `${int(0, 999)}.${n}` } : { value: `bad value ${n}` }
    }
    const k = JSON.stringify(item)
    if (!seen.has(k)) {
      seen.add(k)
      out.push(item)
    }
  }
  return out
}

/** `n` items drawn from `pool` (so there are duplicates), every template at least once, shuffled. */
function batch (rand: () => number, pool: Item[], n: number): Item[] {
  const out = [...pool]
  while (out.length < n) out.push(pool[Math.floor(rand() * pool.length)] as Item)
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1))
    ;[out[i], out[j]] = [out[j] as Item, out[i] as Item]
  }
  return out
}

function keyId (key: string): string {
  return key.split('_')[1] as string
}

/** Usage and history of a tenant after the history writer has flushed. */
async function recorded (tenant: string): Promise<{ usage: number, history: Json[] }> {
  await svc.history.flush()
  const usage = await svc.store.usage(tenant, null, utcDayOf(Date.now()))
  const page = await svc.store.searchHistory(tenant, {}, 1000, null)
  return { usage: usage.total, history: page.results as unknown as Json[] }
}

test('results[i] answers indicators[i] for a shuffled mixed batch of exactly 10,000 with duplicates and invalid items', async () => {
  const rand = rng(20261121)
  const sent = batch(rand, templates(rand, 3000), 10_000)
  const key = await svc.makeKey(['verdict_bulk'], { tenant: 'bulk-10k', quota: 20_000 })
  const res = await bulk({ indicators: sent }, key)
  assert.equal(res.status, 200)
  const { meta, results } = res.body
  assert.deepEqual(Object.keys(res.body).sort(), ['meta', 'results'])
  assert.deepEqual(Object.keys(meta).sort(), kMetaMembers)
  assert.equal(meta.record_count, 10_000)
  assert.equal(results.length, 10_000)
  assert.match(meta.bulk_request_id, kUuid)
  assert.equal(meta.signal_details, 'none')
  assert.equal(meta.evidence_details, 'none')
  assert.ok(Number.isInteger(meta.took_ms) && meta.took_ms >= 0)
  assert.deepEqual(meta.errors, [])

  const byItem = new Map<string, string>()
  let invalid = 0
  for (let i = 0; i < sent.length; i++) {
    const s = sent[i] as Item
    const r = results[i] as Json
    const at = `results[${i}] for ${JSON.stringify(s)}`
    assert.deepEqual(r.indicator.value, s.value ?? null, `${at}: value echoes what was sent`)
    for (const k of Object.keys(r)) assert.ok(kItemMembers.includes(k) || k === 'warnings' || k === 'errors', `${at}: unexpected member ${k}`)
    for (const k of kItemMembers) assert.ok(Object.hasOwn(r, k), `${at}: missing ${k}`)
    assert.equal(Object.hasOwn(r, 'meta'), false)
    assert.equal(Object.hasOwn(r, 'flags'), false)
    assert.deepEqual(r.signals, [], `${at}: signal_details defaults to none`)
    assert.equal(r.signal_count, 0)
    const n = normalize(s.value, s.type)
    if (n.ok) {
      assert.equal(r.indicator.type, n.indicator.type, at)
      assert.equal(r.indicator.normalized, n.indicator.normalized, at)
      assert.equal(Object.hasOwn(r, 'errors'), false, `${at}: errors absent when empty`)
      if (n.indicator.warnings.length === 0) assert.equal(Object.hasOwn(r, 'warnings'), false, `${at}: warnings absent when empty`)
      else assert.deepEqual(r.warnings, n.indicator.warnings, at)
      assert.ok(Number.isInteger(r.risk.score), at)
      assert.ok(r.recommended_actions.length > 0, at)
    } else {
      invalid++
      assert.deepEqual(r.indicator, { type: s.type ?? null, value: s.value ?? null }, `${at}: type and value as sent`)
      assert.deepEqual(r.errors, n.errors, at)
      assert.ok(r.errors.length > 0, at)
      assert.equal(r.risk, null, at)
      assert.deepEqual(r.scores, { signal_groups: {}, signal_subgroups: {} }, at)
      assert.deepEqual(r.threat_context, {}, at)
      assert.deepEqual(r.recommended_actions, [], at)
      if (n.warnings.length === 0) assert.equal(Object.hasOwn(r, 'warnings'), false, at)
    }
    const k = JSON.stringify(s)
    const prev = byItem.get(k)
    if (prev === undefined) byItem.set(k, JSON.stringify(r))
    else assert.equal(JSON.stringify(r), prev, `${at}: a duplicate gets the same answer`)
  }
  assert.ok(invalid > 100, 'the batch holds invalid items')
  assert.ok(byItem.size < sent.length, 'the batch holds duplicates')
  assert.ok(meta.warnings.some((w: string) => w.includes(`${invalid} of 10000`)), 'meta.warnings counts the invalid items')

  // The same indicators through the single endpoint get the same verdict.
  const probes = sent.filter((s) => normalize(s.value, s.type).ok).slice(0, 25)
  for (const s of probes) {
    const i = sent.indexOf(s)
    const single = (await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'x-api-key': svc.key }, payload: { indicator: s, signal_details: 'none' } })).json()
    for (const k of ['indicator', 'risk', 'scores', 'threat_context', 'recommended_actions', 'signals', 'signal_count']) {
      assert.deepEqual(single[k], results[i][k], `single and bulk agree on ${k} of ${JSON.stringify(s)}`)
    }
  }

  // One usage increment and one history record per indicator, invalid ones included.
  const rec = await recorded('bulk-10k')
  assert.equal(rec.usage, 10_000)
  assert.equal(await svc.quota.used(keyId(key), utcDayOf(Date.now())), 10_000)
  assert.ok(rec.history.length > 0)
  for (const h of rec.history) assert.equal(h.bulk_request_id, meta.bulk_request_id)
})

test('every indicator of a bulk call produces one history record carrying bulk_request_id', async () => {
  const key = await svc.makeKey(['verdict_bulk'], { tenant: 'bulk-records' })
  const indicators = [{ value: '192.0.2.1' }, { value: '192.0.2.1' }, { value: 'bad!' }, { type: 'asn', value: '64500', action_taken: 'block', action_source: ' EDR ' }]
  const res = await bulk({ indicators, scoring_version: '2026-06', query_type: 'enrich', project_id: 'p-1', project_name: 'Project', source: { channel: 'soar' } }, key)
  assert.equal(res.status, 200)
  const rec = await recorded('bulk-records')
  assert.equal(rec.usage, 4)
  assert.equal(rec.history.length, 4)
  for (const h of rec.history) {
    assert.equal(h.bulk_request_id, res.body.meta.bulk_request_id)
    assert.equal(h.http_status, 200)
    assert.equal(h.label_details, 'none')
    assert.equal(h.scoring_version, '2026-06')
    assert.equal(h.query_type, 'enrich')
    assert.equal(h.project_id, 'p-1')
    assert.equal(h.project_name, 'Project')
    assert.deepEqual(h.source, { channel: 'soar' })
    assert.equal(h.apikey, keyId(key))
    assert.ok(!JSON.stringify(h).includes(key), 'history stores the key id, never the key')
  }
  const asn = rec.history.find((h) => h.indicator.value === '64500')
  assert.equal(asn?.action_taken, 'block')
  assert.equal(asn?.action_source, 'edr')
  assert.equal(asn?.indicator.normalized, 'AS64500')
})

test('signal_details top and all include signals without evidence; the parameter applies to every item', async () => {
  const top = await bulk({ indicators: [{ value: '198.51.100.23' }, { value: '8.8.8.8' }], signal_details: 'top' })
  assert.equal(top.body.meta.signal_details, 'top')
  const [a, b] = top.body.results
  assert.equal(a.signals.length, 3)
  assert.equal(a.signal_count, 3)
  assert.ok(b.signals.length > 0 && b.signals.length <= 3)
  const all = await bulk({ indicators: [{ value: '198.51.100.23' }], signal_details: 'all' })
  assert.equal(all.body.results[0].signals.length, 4)
  assert.equal(all.body.results[0].signal_count, 4)
  for (const s of [...a.signals, ...b.signals, ...all.body.results[0].signals]) {
    assert.equal(Object.hasOwn(s, 'evidence'), false)
    assert.deepEqual(Object.keys(s).sort(), ['direction', 'signal_group', 'signal_id', 'signal_name', 'signal_subgroup'])
  }
})

test('evidence_details full is ignored in bulk and named in meta.warnings', async () => {
  const res = await bulk({ indicators: [{ value: '198.51.100.23' }], signal_details: 'all', evidence_details: 'full' })
  assert.equal(res.status, 200)
  assert.equal(res.body.meta.evidence_details, 'none')
  assert.ok(res.body.meta.warnings.some((w: string) => w.includes('evidence_details')))
  for (const s of res.body.results[0].signals) assert.equal(Object.hasOwn(s, 'evidence'), false)
  const none = await bulk({ indicators: [{ value: '198.51.100.23' }], evidence_details: 'none' })
  assert.deepEqual(none.body.meta.warnings, [])
})

test('an unknown scoring_version falls back to the default profile with a meta warning', async () => {
  const dflt = await bulk({ indicators: [{ value: '203.0.113.9' }] })
  const unknown = await bulk({ indicators: [{ value: '203.0.113.9' }], scoring_version: '1999-01' })
  assert.equal(unknown.status, 200)
  assert.ok(unknown.body.meta.warnings.some((w: string) => w.includes('1999-01')))
  assert.equal(unknown.body.meta.engine_version, dflt.body.meta.engine_version)
  assert.deepEqual(unknown.body.results, dflt.body.results)
  assert.deepEqual(dflt.body.meta.warnings, [])
  // An empty string is no version (the documented default, no warning).
  const empty = await bulk({ indicators: [{ value: '203.0.113.9' }], scoring_version: '' })
  assert.equal(empty.status, 200)
  assert.deepEqual(empty.body.meta.warnings, [])
  assert.equal(empty.body.meta.engine_version, dflt.body.meta.engine_version)
  assert.deepEqual(empty.body.results, dflt.body.results)
})

test('a known scoring_version is honoured and named in engine_version', async () => {
  const res = await bulk({ indicators: [{ value: '203.0.113.9' }], scoring_version: '2026-06' })
  assert.equal(res.status, 200)
  assert.ok(res.body.meta.engine_version.endsWith('2026-06'), res.body.meta.engine_version)
  assert.deepEqual(res.body.meta.warnings, [])
  const dflt = await bulk({ indicators: [{ value: '203.0.113.9' }] })
  assert.ok(!dflt.body.meta.engine_version.endsWith('2026-06'), 'the default profile is another version')
})

test('10,001 indicators give 400 TOO_MANY_INDICATORS and nothing is recorded or counted', async () => {
  const key = await svc.makeKey(['verdict_bulk'], { tenant: 'bulk-too-many', quota: 50_000 })
  const indicators = Array.from({ length: 10_001 }, (_, i) => ({ type: 'ip', value: `10.0.${i >> 8}.${i & 255}` }))
  const res = await bulk({ indicators }, key)
  assert.equal(res.status, 400)
  assert.deepEqual(Object.keys(res.body).sort(), ['code', 'error', 'message', 'statusCode'])
  assert.equal(res.body.code, 'TOO_MANY_INDICATORS')
  const rec = await recorded('bulk-too-many')
  assert.equal(rec.usage, 0)
  assert.deepEqual(rec.history, [])
  assert.equal(await svc.quota.used(keyId(key), utcDayOf(Date.now())), 0)
  const ok = await bulk({ indicators: indicators.slice(0, 10_000) }, key)
  assert.equal(ok.status, 200)
  assert.equal(ok.body.meta.record_count, 10_000)
})

test('an invalid action_source anywhere in the batch rejects the whole batch with 400 and records nothing', async () => {
  const key = await svc.makeKey(['verdict_bulk'], { tenant: 'bulk-bad-source', quota: 10_000 })
  const indicators: Item[] = Array.from({ length: 5_000 }, (_, i) => ({ value: `10.1.${i >> 8}.${i & 255}`, action_source: 'edr' }))
  indicators[4_321] = { value: '10.9.9.9', action_taken: 'block', action_source: ` ${'Z'.repeat(65)}  ` }
  const res = await bulk({ indicators }, key)
  assert.equal(res.status, 400)
  assert.equal(res.body.code, 'INVALID_ACTION_SOURCE')
  assert.match(res.body.message, /indicators\[4321\]/)
  const rec = await recorded('bulk-bad-source')
  assert.equal(rec.usage, 0)
  assert.deepEqual(rec.history, [])
  assert.equal(await svc.quota.used(keyId(key), utcDayOf(Date.now())), 0)
  indicators[4_321] = { value: '10.9.9.9', action_taken: 'block', action_source: `  ${'Z'.repeat(64)}  ` }
  assert.equal((await bulk({ indicators }, key)).status, 200, '64 characters after trimming are accepted')
  // Characters are code points: 64 outside the BMP (128 UTF-16 units) pass, 65 do not.
  indicators[4_321] = { value: '10.9.9.9', action_source: '\u{1F6E1}'.repeat(64) }
  assert.equal((await bulk({ indicators }, key)).status, 200, '64 astral characters are accepted')
  indicators[4_321] = { value: '10.9.9.9', action_source: '\u{1F6E1}'.repeat(65) }
  const astral = await bulk({ indicators }, key)
  assert.equal(astral.status, 400)
  assert.match(astral.body.message, /indicators\[4321\]\.action_source is 65 characters/)
})

test('an empty indicators list gives 200 with record_count 0, no results and a warning', async () => {
  const key = await svc.makeKey(['verdict_bulk'], { tenant: 'bulk-empty' })
  const res = await bulk({ indicators: [] }, key)
  assert.equal(res.status, 200)
  assert.equal(res.body.meta.record_count, 0)
  assert.deepEqual(res.body.results, [])
  assert.ok(res.body.meta.warnings.length > 0)
  assert.match(res.body.meta.bulk_request_id, kUuid)
  const rec = await recorded('bulk-empty')
  assert.equal(rec.usage, 0)
  assert.deepEqual(rec.history, [])
})

test('log-only fields change neither the bulk verdicts nor the cache key', async () => {
  const values = ['log-only-bulk-1.example', '192.0.2.200', 'AS64496', '198.51.100.23']
  const plain = await bulk({ indicators: values.map((value) => ({ value })), signal_details: 'all' })
  const logged = await bulk({
    indicators: values.map((value, i) => ({ value, action_taken: i % 2 === 0 ? 'block' : 'allow', action_source: `Control-${i}` })),
    signal_details: 'all',
    source: { channel: 'siem', product: 'x', integration_id: 'rule-9', event_type: 'alert', severity_hint: 'low' },
    context: { flags: { anything: [1, 2, 3] } }
  })
  assert.equal(logged.status, 200)
  const results = (raw: string): string => raw.slice(raw.indexOf('"results":'))
  assert.equal(results(logged.raw), results(plain.raw), 'verdict bytes are identical')
  const single = await svc.app.inject({
    method: 'POST',
    url: '/api/v2/ioc/verdict',
    headers: { 'x-api-key': svc.key },
    payload: { indicator: { value: 'log-only-bulk-1.example', action_taken: 'allow', action_source: 'other' }, source: { channel: 'portal' } }
  })
  assert.equal(single.json().meta.cache_hit, true, 'the bulk call filled the cache the single call hits')
})

test('verdicts answered from the cache are identical to the first answer, at every detail level and in history', async () => {
  // A first lookup caches the assessment only; the first hit renders and keeps the text, later hits reuse it.
  const key = await svc.makeKey(['verdict_bulk'], { tenant: 'bulk-cache-text' })
  const values = ['cache-text-1.example', '192.0.2.201', 'AS64497', '198.51.100.0/28', 'a'.repeat(64), 'cache-text-1.example']
  const body = (signalDetails: string): unknown => ({ indicators: values.map((value) => ({ value })), signal_details: signalDetails })
  const results = (raw: string): string => raw.slice(raw.indexOf('"results":'))
  const calls: Array<{ level: string, raw: string }> = []
  for (const level of ['none', 'none', 'none', 'top', 'top', 'all', 'all', 'none']) {
    const res = await bulk(body(level), key)
    assert.equal(res.status, 200)
    calls.push({ level, raw: results(res.raw) })
  }
  for (const level of ['none', 'top', 'all']) {
    const same = calls.filter((c) => c.level === level)
    for (const c of same.slice(1)) assert.equal(c.raw, (same[0] as { raw: string }).raw, `signal_details ${level}`)
  }
  const rec = await recorded('bulk-cache-text')
  assert.equal(rec.history.length, values.length * calls.length)
  // One indicator's verdict members in history, per detail level: the same on every call.
  const members = (h: Json): string => JSON.stringify([h.risk, h.scores, h.labels, h.label_count, h.label_details])
  const byValue = new Map<string, Set<string>>()
  for (const h of rec.history) {
    const k = `${h.indicator.value as string}|${h.label_details as string}`
    const set = byValue.get(k) ?? new Set<string>()
    set.add(members(h))
    byValue.set(k, set)
  }
  for (const [k, set] of byValue) assert.equal(set.size, 1, `${k} recorded the same verdict each time`)
})

test('x-request-id is returned on bulk responses and bulk_request_id is fresh per call', async () => {
  const res = await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict/bulk', headers: { 'x-api-key': svc.key, 'x-request-id': 'bulk-trace-7' }, payload: { indicators: [{ value: '192.0.2.5' }] } })
  assert.equal(res.headers['x-request-id'], 'bulk-trace-7')
  const again = await bulk({ indicators: [{ value: '192.0.2.5' }] })
  assert.notEqual(again.body.meta.bulk_request_id, res.json().meta.bulk_request_id)
})

test('items with a missing or non-string value are recorded and do not hold up later history', async () => {
  const key = await svc.makeKey(['verdict', 'verdict_bulk'], { tenant: 'bulk-odd-values' })
  const res = await bulk({ indicators: [{}, { value: null }, { value: 7 }, { type: 'ip' }] }, key)
  assert.equal(res.status, 200)
  for (const r of res.body.results) assert.ok(r.errors.length > 0)
  const after = await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'x-api-key': key }, payload: { indicator: { value: '192.0.2.77' } } })
  assert.equal(after.statusCode, 200)
  const rec = await recorded('bulk-odd-values')
  assert.equal(rec.usage, 5)
  assert.equal(rec.history.length, 5)
  assert.deepEqual(rec.history.map((h) => h.indicator.value).sort(), ['', '', '192.0.2.77', '7', 'null'])
})
