/**
 * POST /api/v2/ioc/verdict (docs/API.md "Verdicts"), through app.inject on one shared service.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { buildForFile } from '../helper.ts'

const kTypes = ['ip', 'domain', 'ip_block', 'file_hash_sha256', 'asn']
const kStrengths = ['weak', 'medium', 'strong', 'very_strong']
const kSaturation = ['none', 'sparse', 'limited', 'moderate', 'strong', 'full']
/** 198.51.100.23 is listed by three sample feeds and sits in a documentation range: four signals (data/feeds/README.md). */
const kFourSignals = '198.51.100.23'

const svc = buildForFile()

type Json = Record<string, any>

async function verdict (body: unknown, headers: Record<string, string> = {}): Promise<{ status: number, body: Json, headers: Record<string, unknown> }> {
  const res = await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'x-api-key': svc.key, ...headers }, payload: body as object })
  return { status: res.statusCode, body: res.json(), headers: res.headers }
}

function isInt (v: unknown): boolean {
  return typeof v === 'number' && Number.isInteger(v)
}

function assertStringArray (v: unknown, what: string): void {
  assert.ok(Array.isArray(v), `${what} is an array`)
  for (const s of v as unknown[]) assert.equal(typeof s, 'string', `${what} holds strings`)
}

function assertErrorBody (body: Json, status: number, code: string): void {
  assert.deepEqual(Object.keys(body).sort(), ['code', 'error', 'message', 'statusCode'])
  assert.equal(body.statusCode, status)
  assert.equal(body.code, code)
  assert.equal(typeof body.message, 'string')
}

/** The verdict without meta, as canonical JSON. */
function withoutMeta (body: Json): string {
  const { meta: _meta, ...rest } = body
  return JSON.stringify(rest)
}

async function historyOf (value: string): Promise<Json[]> {
  await svc.history.flush()
  return (await svc.store.searchHistory('t1', { indicator_value: value }, 100, null)).results as unknown as Json[]
}

test('a single verdict carries every field of the interface\'s verdict with its documented type', async () => {
  const res = await verdict({ indicator: { type: 'ip', value: kFourSignals } })
  assert.equal(res.status, 200)
  const b = res.body
  assert.deepEqual(Object.keys(b).sort(), ['flags', 'indicator', 'meta', 'recommended_actions', 'risk', 'scores', 'signal_count', 'signals', 'threat_context'])

  assert.ok(kTypes.includes(b.indicator.type))
  assert.equal(b.indicator.type, 'ip')
  assert.equal(b.indicator.value, kFourSignals)
  assert.equal(b.indicator.normalized, kFourSignals)

  assert.ok(isInt(b.risk.score) && b.risk.score >= 0 && b.risk.score <= 100, 'risk.score is an integer 0..100')
  assert.ok(kStrengths.includes(b.risk.strength))
  assert.equal(typeof b.risk.category, 'string')
  assert.ok(kSaturation.includes(b.risk.evidence_saturation))
  assert.equal('direction' in b.risk, false, 'risk.direction is no longer returned')

  assert.ok(Array.isArray(b.signals))
  for (const s of b.signals) {
    assert.equal(typeof s.signal_id, 'string')
    assert.ok(['safe', 'malicious'].includes(s.direction))
    assert.equal(typeof s.signal_subgroup, 'string')
    assert.equal(typeof s.signal_group, 'string')
    assert.equal(typeof s.signal_name, 'string')
    assert.ok(s.evidence !== null && typeof s.evidence === 'object' && !Array.isArray(s.evidence))
  }
  assert.ok(isInt(b.signal_count))
  assert.equal(b.signal_count, b.signals.length)

  assert.deepEqual(Object.keys(b.scores).sort(), ['signal_groups', 'signal_subgroups'])
  assert.equal(typeof b.scores.signal_groups, 'object')
  assert.equal(typeof b.scores.signal_subgroups, 'object')
  assert.ok(b.threat_context !== null && typeof b.threat_context === 'object' && !Array.isArray(b.threat_context))
  assertStringArray(b.flags, 'flags')
  assert.ok(Array.isArray(b.recommended_actions) && b.recommended_actions.length > 0)
  for (const a of b.recommended_actions) {
    assert.equal(typeof a.action, 'string')
    assert.ok(isInt(a.order))
  }

  const m = b.meta
  assert.deepEqual(Object.keys(m).sort(), ['cache_hit', 'data_timestamp', 'detail_levels', 'engine_version', 'errors', 'query_time_ms', 'request_id', 'warnings'])
  assert.equal(typeof m.engine_version, 'string')
  assert.ok(m.engine_version.length > 0)
  assert.equal(typeof m.data_timestamp, 'string')
  assert.ok(!Number.isNaN(Date.parse(m.data_timestamp)), 'data_timestamp is a date-time')
  assert.equal(typeof m.cache_hit, 'boolean')
  assert.ok(isInt(m.query_time_ms) && m.query_time_ms >= 0)
  assert.equal(typeof m.request_id, 'string')
  assert.equal(m.request_id, res.headers['x-request-id'])
  assertStringArray(m.warnings, 'meta.warnings')
  assert.deepEqual(m.errors, [])
  assert.deepEqual(m.detail_levels, { signal_details: 'top', evidence_details: 'summary' })
})

test('flags and recommended_actions are top-level members beside threat_context, not inside it', async () => {
  const { body } = await verdict({ indicator: { value: '8.8.8.8' } })
  assert.ok(body.flags.includes('public_resolver'))
  assert.equal('flags' in body.threat_context, false)
  assert.equal('recommended_actions' in body.threat_context, false)
  assert.deepEqual(body.recommended_actions.map((a: Json) => a.action), ['allow'])
})

test('meta.cache_hit is false on the first query of an indicator and true on a repeat', async () => {
  const first = await verdict({ indicator: { type: 'domain', value: 'cache-probe-single.example' } })
  const second = await verdict({ indicator: { type: 'domain', value: 'cache-probe-single.example' } })
  assert.equal(first.body.meta.cache_hit, false)
  assert.equal(second.body.meta.cache_hit, true)
  assert.equal(withoutMeta(second.body), withoutMeta(first.body))
  assert.notEqual(second.body.meta.request_id, first.body.meta.request_id)
})

test('the defaults are signal_details top (at most three signals, the largest first) and evidence_details summary', async () => {
  const top = (await verdict({ indicator: { value: kFourSignals } })).body
  const all = (await verdict({ indicator: { value: kFourSignals }, signal_details: 'all' })).body
  assert.equal(all.signals.length, 4)
  assert.equal(all.signal_count, 4)
  assert.equal(top.signals.length, 3)
  assert.equal(top.signal_count, 3)
  assert.deepEqual(top.signals.map((s: Json) => s.signal_id), all.signals.slice(0, 3).map((s: Json) => s.signal_id))
  assert.deepEqual(top.meta.detail_levels, { signal_details: 'top', evidence_details: 'summary' })
  assert.deepEqual(all.meta.detail_levels, { signal_details: 'all', evidence_details: 'summary' })
  for (const s of top.signals) assert.equal(typeof s.evidence, 'object')
})

test('evidence_details full gives at least the summary evidence for every signal', async () => {
  const summary = (await verdict({ indicator: { value: kFourSignals }, signal_details: 'all', evidence_details: 'summary' })).body
  const full = (await verdict({ indicator: { value: kFourSignals }, signal_details: 'all', evidence_details: 'full' })).body
  assert.deepEqual(full.meta.detail_levels, { signal_details: 'all', evidence_details: 'full' })
  full.signals.forEach((s: Json, i: number) => {
    const sum = summary.signals[i].evidence as Json
    for (const [k, v] of Object.entries(sum)) assert.deepEqual(s.evidence[k], v, `full evidence keeps summary key ${k}`)
    assert.ok(Object.keys(s.evidence).length >= Object.keys(sum).length)
  })
})

test('evidence_details none omits the evidence member from every signal entirely', async () => {
  const res = await verdict({ indicator: { value: kFourSignals }, signal_details: 'all', evidence_details: 'none' })
  assert.equal(res.status, 200)
  assert.equal(res.body.signals.length, 4)
  for (const s of res.body.signals) {
    assert.equal(Object.hasOwn(s, 'evidence'), false)
    assert.deepEqual(Object.keys(s).sort(), ['direction', 'signal_group', 'signal_id', 'signal_name', 'signal_subgroup'])
  }
  assert.deepEqual(res.body.meta.detail_levels, { signal_details: 'all', evidence_details: 'none' })
})

test('signal_details none gives an empty signals list and signal_count 0, with scores still filled in', async () => {
  const res = await verdict({ indicator: { value: kFourSignals }, signal_details: 'none' })
  assert.equal(res.status, 200)
  assert.deepEqual(res.body.signals, [])
  assert.equal(res.body.signal_count, 0)
  assert.ok(Object.keys(res.body.scores.signal_groups).length > 0)
  assert.deepEqual(res.body.meta.detail_levels, { signal_details: 'none', evidence_details: 'summary' })
})

test('an omitted type is inferred and named in meta.warnings', async () => {
  const ip = (await verdict({ indicator: { value: '192.0.2.77' } })).body
  assert.equal(ip.indicator.type, 'ip')
  assert.ok(ip.meta.warnings.includes('type inferred as ip'))
  const asn = (await verdict({ indicator: { value: 'AS64511' } })).body
  assert.equal(asn.indicator.type, 'asn')
  assert.ok(asn.meta.warnings.includes('type inferred as asn'))
  const typed = (await verdict({ indicator: { type: 'ip', value: '192.0.2.77' } })).body
  assert.deepEqual(typed.meta.warnings, [])
})

test('defanged input is refanged with a warning, and indicator.value echoes the value as sent', async () => {
  const ip = (await verdict({ indicator: { type: 'ip', value: '198.51.100[.]23' } })).body
  assert.equal(ip.indicator.value, '198.51.100[.]23')
  assert.equal(ip.indicator.normalized, kFourSignals)
  assert.ok(ip.meta.warnings.some((w: string) => /refang|defang/i.test(w)))
  const dom = (await verdict({ indicator: { value: 'Malware-C2(.)Example' } })).body
  assert.equal(dom.indicator.type, 'domain')
  assert.equal(dom.indicator.value, 'Malware-C2(.)Example')
  assert.equal(dom.indicator.normalized, 'malware-c2.example')
  assert.ok(dom.meta.warnings.some((w: string) => /refang|defang/i.test(w)))
  assert.ok(dom.threat_context.listed_by.includes('sample_threatfox'))
})

test('an invalid indicator value gives 400 INVALID_INDICATOR in the documented error shape', async () => {
  const cases = [
    { value: 'not an indicator!' },
    { type: 'ip', value: '1.2.3' },
    { type: 'ip', value: '010.1.1.1' },
    { type: 'file_hash_sha256', value: 'd41d8cd98f00b204e9800998ecf8427e' },
    { type: 'asn', value: 'AS99999999999' },
    { type: 'domain', value: '' },
    { type: 'bogus', value: '1.2.3.4' }
  ]
  for (const indicator of cases) {
    const res = await verdict({ indicator })
    assert.equal(res.status, 400, JSON.stringify(indicator))
    assertErrorBody(res.body, 400, 'INVALID_INDICATOR')
  }
  const md5 = await verdict({ indicator: { type: 'file_hash_sha256', value: 'd41d8cd98f00b204e9800998ecf8427e' } })
  assert.match(md5.body.message, /md5/i, 'the error names what the hash looks like')
})

test('an action_source of 65 characters after trimming and lowercasing gives 400 INVALID_ACTION_SOURCE', async () => {
  const res = await verdict({ indicator: { value: '192.0.2.10', action_source: ` ${'A'.repeat(65)} ` } })
  assertErrorBody(res.body, 400, 'INVALID_ACTION_SOURCE')
  assert.equal(res.status, 400)
  const top = await verdict({ indicator: { value: '192.0.2.10' }, action_source: 'x'.repeat(65) })
  assert.equal(top.status, 400)
  assertErrorBody(top.body, 400, 'INVALID_ACTION_SOURCE')
})

test('an action_source of 64 characters after trimming and lowercasing is accepted and logged normalized', async () => {
  const value = '192.0.2.11'
  const raw = `   ${'EDR-'.repeat(16)}   `
  const res = await verdict({ indicator: { value, action_taken: 'block', action_source: raw } })
  assert.equal(res.status, 200)
  const [rec] = await historyOf(value)
  assert.equal(rec?.action_source, 'edr-'.repeat(16))
  assert.equal(rec?.action_taken, 'block')
})

test('action_taken and action_source are accepted at the top level and inside indicator, and the indicator wins', async () => {
  const topOnly = await verdict({ indicator: { value: '192.0.2.12' }, action_taken: 'allow', action_source: ' SIEM-Rule ' })
  assert.equal(topOnly.status, 200)
  const [a] = await historyOf('192.0.2.12')
  assert.equal(a?.action_taken, 'allow')
  assert.equal(a?.action_source, 'siem-rule')

  const both = await verdict({ indicator: { value: '192.0.2.13', action_taken: 'block', action_source: 'Firewall' }, action_taken: 'allow', action_source: 'SIEM' })
  assert.equal(both.status, 200)
  const [b] = await historyOf('192.0.2.13')
  assert.equal(b?.action_taken, 'block')
  assert.equal(b?.action_source, 'firewall')
})

test('empty log-only fields inside indicator mean not provided, so the top-level ones are logged', async () => {
  const res = await verdict({ indicator: { value: '192.0.2.16', action_taken: '', action_source: '  ' }, action_taken: 'block', action_source: 'Proxy' })
  assert.equal(res.status, 200)
  const [rec] = await historyOf('192.0.2.16')
  assert.equal(rec?.action_taken, 'block')
  assert.equal(rec?.action_source, 'proxy')
  const none = await verdict({ indicator: { value: '192.0.2.17', action_taken: null, action_source: '' } })
  assert.equal(none.status, 200)
  const [rec2] = await historyOf('192.0.2.17')
  assert.equal(rec2?.action_taken, null)
  assert.equal(rec2?.action_source, null)
})

test('a top-level action_source over 64 characters is rejected even when the indicator carries its own', async () => {
  const res = await verdict({ indicator: { value: '192.0.2.18', action_source: 'edr' }, action_source: 'y'.repeat(65) })
  assert.equal(res.status, 400)
  assertErrorBody(res.body, 400, 'INVALID_ACTION_SOURCE')
  assert.equal((await historyOf('192.0.2.18')).length, 0, 'a rejected request is not logged')
})

test('log-only fields change neither the verdict nor the cache key of a single call', async () => {
  const value = 'log-only-single.example'
  const first = await verdict({
    indicator: { type: 'domain', value, action_taken: 'block', action_source: 'edr' },
    source: { channel: 'siem', product: 'p1', integration_id: 'rule-1', event_type: 'dns', severity_hint: 'high' },
    context: { flags: { tag: 'a' } }
  })
  const second = await verdict({
    indicator: { type: 'domain', value, action_taken: 'allow', action_source: 'proxy' },
    source: { channel: 'soar' },
    context: { flags: ['x', 1, null] }
  })
  const third = await verdict({ indicator: { type: 'domain', value } })
  assert.equal(first.status, 200)
  assert.equal(first.body.meta.cache_hit, false)
  assert.equal(second.body.meta.cache_hit, true)
  assert.equal(third.body.meta.cache_hit, true)
  assert.equal(withoutMeta(second.body), withoutMeta(first.body))
  assert.equal(withoutMeta(third.body), withoutMeta(first.body))
})

test('a client x-request-id is echoed in the header and meta.request_id; an unsafe one is replaced', async () => {
  const ok = await verdict({ indicator: { value: '192.0.2.14' } }, { 'x-request-id': 'siem-trace.42:a_b-c' })
  assert.equal(ok.headers['x-request-id'], 'siem-trace.42:a_b-c')
  assert.equal(ok.body.meta.request_id, 'siem-trace.42:a_b-c')
  const bad = await verdict({ indicator: { value: '192.0.2.14' } }, { 'x-request-id': 'has spaces {and} "quotes"' })
  assert.notEqual(bad.headers['x-request-id'], 'has spaces {and} "quotes"')
  assert.equal(bad.body.meta.request_id, bad.headers['x-request-id'])
  assert.match(String(bad.headers['x-request-id']), /^[0-9a-f-]{36}$/)
})

test('an invalid indicator on the single endpoint is logged with http_status 400 and a valid one with 200', async () => {
  await verdict({ indicator: { type: 'ip', value: '192.0.2.999' } })
  const [bad] = await historyOf('192.0.2.999')
  assert.equal(bad?.http_status, 400)
  assert.equal(bad?.bulk_request_id, null)
  await verdict({ indicator: { type: 'ip', value: '192.0.2.15' } })
  const [good] = await historyOf('192.0.2.15')
  assert.equal(good?.http_status, 200)
  assert.equal(good?.bulk_request_id, null)
  assert.equal(good?.indicator.normalized, '192.0.2.15')
})
