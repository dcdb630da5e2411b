/**
 * What is logged and counted (docs/API.md "Auth, quotas, history"): every indicator
 * answered, invalid bulk items and a single INVALID_INDICATOR included, is one history row and one usage
 * increment; a request rejected as a whole leaves neither. And what a history record holds.
 */
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { build, buildForFile } from '../helper.ts'
import { dbPathOf, keyParts, readDocs, readHistory, today, type StoredRow } from '../fixtures/read-history.ts'

const kBulk = '/api/v2/ioc/verdict/bulk'
const kSingle = '/api/v2/ioc/verdict'

interface Headers { [k: string]: string }

function rowsOf (rows: StoredRow[], requestId: string): StoredRow[] {
  return rows.filter((r) => r.record.request_id === requestId)
}

/** One service for the tests that read only the rows of a key of their own (the others count every row). */
const shared = buildForFile()

/** A key with every permission for a tenant of its own, on the shared service. */
async function ownKey (tenant: string): Promise<string> {
  return await shared.makeKey(['verdict', 'verdict_bulk', 'mgmt', 'admin'], { tenant })
}

/** The rows of one key, in id order. */
function rowsOfKey (dataDir: string, key: string): StoredRow[] {
  const id = keyParts(key).id
  return readHistory(dataDir).filter((r) => r.record.apikey === id)
}

test('a mixed run logs one row per answered indicator, counts usage per row, and leaves no trace of requests rejected as a whole', async (t) => {
  const b = await build(t)
  const keyId = keyParts(b.key).id
  const verdictOnly = await b.makeKey(['verdict'])
  const noQuota = await b.makeKey(['verdict', 'verdict_bulk'], { quota: 0 })
  const h = (requestId: string, key = b.key): Headers => ({ 'x-api-key': key, 'x-request-id': requestId })

  /** request id -> indicators answered; bulk request id -> indicators. */
  const answered = new Map<string, number>()
  const bulks = new Map<string, { requestId: string, n: number }>()

  // --- answered: singles (a 400 INVALID_INDICATOR included) -------------------------------------------------
  for (const [i, value] of ['198.51.100.7', 'example.com', '198.51.100.7'].entries()) {
    const res = await b.app.inject({ method: 'POST', url: kSingle, headers: h(`single-${i}`), payload: { indicator: { value } } })
    assert.equal(res.statusCode, 200)
    assert.equal(res.headers['x-request-id'], `single-${i}`)
    answered.set(`single-${i}`, 1)
  }
  const badSingle = await b.app.inject({ method: 'POST', url: kSingle, headers: h('single-invalid'), payload: { indicator: { value: 'not an indicator!' } } })
  assert.equal(badSingle.statusCode, 400)
  assert.equal(badSingle.json().code, 'INVALID_INDICATOR')
  answered.set('single-invalid', 1)

  // --- answered: bulks with invalid items and duplicates, and an empty bulk ---------------------------------
  const bulkBodies = [
    [{ value: '203.0.113.9' }, { value: '203.0.113.9' }, { value: 'definitely not valid' }, { type: 'file_hash_sha256', value: 'abc' }, { value: 'AS13335' }],
    [{ type: 'domain', value: 'example.org' }, { type: 'domain', value: 'EXAMPLE.org.' }, { value: '2001:db8::1' }],
    Array.from({ length: 40 }, (_, i) => ({ value: `192.0.2.${i % 20}` }))
  ]
  for (const [i, indicators] of bulkBodies.entries()) {
    const res = await b.app.inject({ method: 'POST', url: kBulk, headers: h(`bulk-${i}`), payload: { indicators } })
    assert.equal(res.statusCode, 200)
    const meta = res.json().meta as { bulk_request_id: string, record_count: number }
    assert.equal(meta.record_count, indicators.length)
    assert.equal(res.headers['x-bulk-request-id'], meta.bulk_request_id)
    answered.set(`bulk-${i}`, indicators.length)
    bulks.set(meta.bulk_request_id, { requestId: `bulk-${i}`, n: indicators.length })
  }
  const empty = await b.app.inject({ method: 'POST', url: kBulk, headers: h('bulk-empty'), payload: { indicators: [] } })
  assert.equal(empty.statusCode, 200)
  assert.equal(empty.json().meta.record_count, 0)

  // --- rejected as a whole: none of these may log or count anything ----------------------------------------
  const rejected: Array<{ name: string, status: number, code: string, send: () => Promise<LightMyRequestResponse> }> = [
    { name: 'no key', status: 401, code: 'MISSING_API_KEY', send: () => b.app.inject({ method: 'POST', url: kSingle, headers: { 'x-request-id': 'rej-0' }, payload: { indicator: { value: '1.1.1.1' } } }) },
    { name: 'unknown key', status: 401, code: 'INVALID_API_KEY', send: () => b.app.inject({ method: 'POST', url: kBulk, headers: h('rej-1', `iocv_${'a'.repeat(12)}_${'b'.repeat(43)}`), payload: { indicators: [{ value: '1.1.1.1' }] } }) },
    { name: 'no bulk permission', status: 403, code: 'PERMISSION_DENIED', send: () => b.app.inject({ method: 'POST', url: kBulk, headers: h('rej-2', verdictOnly), payload: { indicators: [{ value: '1.1.1.1' }] } }) },
    { name: 'schema (single)', status: 400, code: 'INVALID_REQUEST', send: () => b.app.inject({ method: 'POST', url: kSingle, headers: h('rej-3'), payload: { indicator: { value: '1.1.1.1' }, signal_details: 'most' } }) },
    { name: 'schema (bulk)', status: 400, code: 'INVALID_REQUEST', send: () => b.app.inject({ method: 'POST', url: kBulk, headers: h('rej-4'), payload: { indicators: [{ value: '1.1.1.1', severity: 'x' }] } }) },
    { name: 'action_source (single)', status: 400, code: 'INVALID_ACTION_SOURCE', send: () => b.app.inject({ method: 'POST', url: kSingle, headers: h('rej-5'), payload: { indicator: { value: '1.1.1.1', action_source: 'x'.repeat(65) } } }) },
    { name: 'action_source (bulk item)', status: 400, code: 'INVALID_ACTION_SOURCE', send: () => b.app.inject({ method: 'POST', url: kBulk, headers: h('rej-6'), payload: { indicators: [{ value: '1.1.1.1' }, { value: '1.1.1.2', action_source: ` ${'Y'.repeat(65)} ` }] } }) },
    { name: 'too many', status: 400, code: 'TOO_MANY_INDICATORS', send: () => b.app.inject({ method: 'POST', url: kBulk, headers: h('rej-7'), payload: { indicators: Array.from({ length: 10_001 }, () => ({ value: '1.1.1.1' })) } }) },
    { name: 'media type', status: 415, code: 'UNSUPPORTED_MEDIA_TYPE', send: () => b.app.inject({ method: 'POST', url: kSingle, headers: { ...h('rej-8'), 'content-type': 'text/plain' }, payload: '1.1.1.1' }) },
    { name: 'quota', status: 429, code: 'QUOTA_EXCEEDED', send: () => b.app.inject({ method: 'POST', url: kSingle, headers: h('rej-9', noQuota), payload: { indicator: { value: '1.1.1.1' } } }) },
    { name: 'quota (bulk)', status: 429, code: 'QUOTA_EXCEEDED', send: () => b.app.inject({ method: 'POST', url: kBulk, headers: h('rej-10', noQuota), payload: { indicators: [{ value: '1.1.1.1' }] } }) }
  ]
  for (const r of rejected) {
    const res = await r.send()
    assert.equal(res.statusCode, r.status, r.name)
    assert.equal(res.json().code, r.code, r.name)
  }

  await b.history.flush()
  const rows = readHistory(b.config.dataDir)
  const total = [...answered.values()].reduce((a, n) => a + n, 0)
  assert.equal(rows.length, total, 'one row per indicator answered')
  for (const [requestId, n] of answered) assert.equal(rowsOf(rows, requestId).length, n, requestId)
  assert.equal(rows.filter((r) => r.record.request_id.startsWith('rej-')).length, 0)
  assert.equal(rowsOf(rows, 'bulk-empty').length, 0)

  // Bulk rows carry their response's bulk_request_id; single rows carry null.
  for (const row of rows) {
    const bulk = row.record.bulk_request_id
    if (row.record.request_id.startsWith('bulk-')) {
      assert.equal(bulks.get(bulk as string)?.requestId, row.record.request_id)
    } else {
      assert.equal(bulk, null)
    }
  }
  for (const [id, { n }] of bulks) assert.equal(rows.filter((r) => r.record.bulk_request_id === id).length, n)

  // The single rejected with INVALID_INDICATOR is logged with its status; everything answered in bulk is a 200.
  const [invalidRow] = rowsOf(rows, 'single-invalid')
  assert.equal(invalidRow?.record.http_status, 400)
  assert.deepEqual(invalidRow?.record.indicator, { type: null, value: 'not an indicator!', normalized: null })
  assert.equal(invalidRow?.record.risk, null)
  for (const row of rows.filter((r) => r.record.request_id !== 'single-invalid')) assert.equal(row.record.http_status, 200)

  // Usage equals rows: per key in the store, and as GET /api/v2/mgmt/usage reports it.
  const usage = await b.store.usage('t1', null, today())
  assert.equal(usage.total, rows.length)
  assert.deepEqual(usage.keys, [{ apikey: keyId, count: rows.length }])
  const viaHttp = await b.app.inject({ method: 'GET', url: '/api/v2/mgmt/usage', headers: { 'x-api-key': b.key } })
  assert.equal(viaHttp.statusCode, 200)
  assert.equal(viaHttp.json().total, rows.length)
  assert.equal(viaHttp.json().key.used, rows.length)
  const noQuotaUsage = await b.app.inject({ method: 'GET', url: '/api/v2/mgmt/usage', headers: { 'x-api-key': noQuota } })
  assert.equal(noQuotaUsage.json().key.used, 0)
  assert.equal(noQuotaUsage.json().key.remaining, 0)
})

test('a single history record holds the request id, key id, tenant, normalized log-only fields and the verdict it answered', async () => {
  const b = shared
  const key = await ownKey('rec-single-t')
  const before = new Date().toISOString()
  const source = { channel: 'siem', product: 'splunk', integration_id: 'rule-7', event_type: 'alert', severity_hint: 'high' }
  const res = await b.app.inject({
    method: 'POST',
    url: kSingle,
    headers: { 'x-api-key': key, 'x-request-id': 'rec-single' },
    payload: {
      indicator: { type: 'domain', value: 'Example[.]COM', action_taken: 'block', action_source: '  Palo-Alto FW  ' },
      source,
      context: { flags: ['x'] },
      signal_details: 'all',
      evidence_details: 'full'
    }
  })
  assert.equal(res.statusCode, 200)
  const verdict = res.json()
  assert.equal(verdict.meta.request_id, 'rec-single')
  await b.history.flush()
  const after = new Date().toISOString()

  const [row, ...more] = rowsOfKey(b.config.dataDir, key)
  assert.equal(more.length, 0)
  const r = row!.record
  assert.equal(r.request_id, 'rec-single')
  assert.equal(r.bulk_request_id, null)
  assert.equal(r.http_status, 200)
  assert.equal(r.auth_type, 'api_key')
  assert.equal(r.tenant, 'rec-single-t')
  assert.equal(r.apikey, keyParts(key).id)
  assert.equal(r.user_id, null)
  assert.ok(r.date >= before && r.date <= after, 'date is when the request was answered')
  assert.match(r.date, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
  assert.deepEqual(r.indicator, { type: 'domain', value: 'Example[.]COM', normalized: 'example.com' })
  assert.equal(r.action_taken, 'block')
  assert.equal(r.action_source, 'palo-alto fw')
  assert.deepEqual(r.source, source)
  assert.equal(r.scoring_version, null)
  assert.equal(r.query_type, null)
  assert.equal(r.project_id, null)
  assert.equal(r.project_name, null)
  assert.equal(r.evidence_details, 'full')
  assert.equal(r.label_details, 'all')
  assert.deepEqual(r.risk, verdict.risk)
  assert.deepEqual(r.scores, verdict.scores)
  // labels = the signals answered, without evidence.
  assert.equal(r.label_count, r.labels.length)
  assert.equal(r.label_count, verdict.signal_count)
  const labels = r.labels as Array<Record<string, unknown>>
  assert.deepEqual(labels.map((l) => l.signal_id), (verdict.signals as Array<{ signal_id: string }>).map((s) => s.signal_id))
  for (const [i, l] of labels.entries()) {
    assert.equal(l.evidence, undefined)
    const s = verdict.signals[i]
    assert.deepEqual([l.direction, l.signal_group, l.signal_subgroup, l.signal_name], [s.direction, s.signal_group, s.signal_subgroup, s.signal_name])
  }
})

test('a single call takes action fields from the request when the indicator has none, and the indicator\'s win', async () => {
  const b = shared
  const key = await ownKey('actions-t')
  const send = async (id: string, payload: object): Promise<void> => {
    const res = await b.app.inject({ method: 'POST', url: kSingle, headers: { 'x-api-key': key, 'x-request-id': id }, payload })
    assert.equal(res.statusCode, 200)
  }
  await send('top', { indicator: { value: '198.51.100.1' }, action_taken: 'allow', action_source: ' TopLevel ' })
  await send('both', { indicator: { value: '198.51.100.1', action_taken: 'block', action_source: 'Inner' }, action_taken: 'allow', action_source: 'outer' })
  await send('empty', { indicator: { value: '198.51.100.1', action_taken: '', action_source: '   ' } })
  await b.history.flush()
  const rows = rowsOfKey(b.config.dataDir, key)
  const by = (id: string): [unknown, unknown] => { const r = rowsOf(rows, id)[0]!.record; return [r.action_taken, r.action_source] }
  assert.deepEqual(by('top'), ['allow', 'toplevel'])
  assert.deepEqual(by('both'), ['block', 'inner'])
  assert.deepEqual(by('empty'), [null, null], 'empty means not provided')
})

test('bulk history records carry the bulk_request_id, the shared parameters and each item\'s log-only fields', async () => {
  const b = shared
  const key = await ownKey('rec-bulk-t')
  const source = { channel: 'soar', product: 'xsoar', integration_id: 'pb-12', event_type: 'enrich', severity_hint: 'low' }
  const indicators = [
    { type: 'ip', value: '198.51.100.23', action_taken: 'allow', action_source: ' EDR ' },
    { value: 'hxxp://evil[.]example/path' },
    { value: 'not valid at all' },
    { type: 'ip', value: 'example.com', action_taken: 'block' },
    { value: '198.51.100.23' }
  ]
  const res = await b.app.inject({
    method: 'POST',
    url: kBulk,
    headers: { 'x-api-key': key, 'x-request-id': 'rec-bulk' },
    payload: { indicators, source, signal_details: 'top', evidence_details: 'full', scoring_version: 'no-such-version', query_type: 'enrichment', project_id: 'p-1', project_name: 'Project One' }
  })
  assert.equal(res.statusCode, 200)
  const body = res.json()
  await b.history.flush()
  const rows = rowsOfKey(b.config.dataDir, key).map((r) => r.record)
  assert.equal(rows.length, indicators.length)
  for (const r of rows) {
    assert.equal(r.request_id, 'rec-bulk')
    assert.equal(r.bulk_request_id, body.meta.bulk_request_id)
    assert.equal(r.http_status, 200)
    assert.equal(r.tenant, 'rec-bulk-t')
    assert.equal(r.apikey, keyParts(key).id)
    assert.deepEqual(r.source, source)
    assert.equal(r.scoring_version, 'no-such-version', 'recorded as sent')
    assert.equal(r.query_type, 'enrichment')
    assert.equal(r.project_id, 'p-1')
    assert.equal(r.project_name, 'Project One')
    assert.equal(r.evidence_details, 'none', 'bulk never carries evidence')
    assert.equal(r.label_details, 'top')
    assert.equal(r.label_count, r.labels.length)
  }
  // Each item's record answers that item: value as sent, its normalized form, its action fields, its result.
  const results = body.results as Array<{ indicator: { type: string | null, value: string, normalized?: string }, risk: unknown, signal_count: number }>
  const remaining = [...rows]
  for (const [i, item] of indicators.entries()) {
    const at = remaining.findIndex((r) => r.indicator.value === item.value && r.action_source === (item.action_source?.trim().toLowerCase() ?? null))
    assert.ok(at >= 0, `a record for item ${i}`)
    const r = remaining.splice(at, 1)[0]!
    const result = results[i]!
    assert.equal(r.indicator.normalized, result.indicator.normalized ?? null)
    assert.equal(r.action_taken, item.action_taken ?? null)
    assert.deepEqual(r.risk, result.risk)
    assert.equal(r.label_count, result.signal_count)
  }
  assert.equal(rows.find((r) => r.indicator.value === 'not valid at all')?.risk, null)
  assert.equal(rows.find((r) => r.indicator.value === 'hxxp://evil[.]example/path')?.indicator.normalized, 'evil.example')
})

test('history stores the key id and never the key or its secret, in any document or database file', async (t) => {
  const b = await build(t)
  const other = await b.makeKey(['verdict', 'verdict_bulk'], { tenant: 't2' })
  for (const key of [b.key, other]) {
    assert.equal((await b.app.inject({ method: 'POST', url: kSingle, headers: { 'x-api-key': key }, payload: { indicator: { value: '192.0.2.1' } } })).statusCode, 200)
    assert.equal((await b.app.inject({ method: 'POST', url: kSingle, headers: { 'x-api-key': key }, payload: { indicator: { value: 'bad value!' } } })).statusCode, 400)
    assert.equal((await b.app.inject({ method: 'POST', url: kBulk, headers: { 'x-api-key': key }, payload: { indicators: [{ value: '192.0.2.1' }, { value: 'bad' }] } })).statusCode, 200)
  }
  await b.history.flush()
  const docs = readDocs(b.config.dataDir)
  assert.equal(docs.length, 8)
  const files = readdirSync(b.config.dataDir).filter((f) => f.startsWith('ioc-verdict.db')).map((f) => readFileSync(join(b.config.dataDir, f)))
  assert.ok(files.length > 0 && dbPathOf(b.config.dataDir).endsWith('ioc-verdict.db'))
  for (const key of [b.key, other]) {
    const { id, secret } = keyParts(key)
    assert.equal(docs.filter((d) => (JSON.parse(d) as { apikey: string }).apikey === id).length, 4)
    for (const doc of docs) {
      assert.equal(doc.includes(secret), false)
      assert.equal(doc.includes(key), false)
    }
    for (const bytes of files) assert.equal(bytes.includes(secret), false, 'the secret is stored only as a hash')
  }
})

test('a request over the body limit (413) is neither logged nor counted', async (t) => {
  const b = await build(t, { IOC_BODY_LIMIT: '1024' })
  const res = await b.app.inject({
    method: 'POST',
    url: kBulk,
    headers: { 'x-api-key': b.key, 'x-request-id': 'too-large' },
    payload: { indicators: Array.from({ length: 100 }, (_, i) => ({ value: `198.51.100.${i}` })) }
  })
  assert.equal(res.statusCode, 413)
  assert.equal(res.json().code, 'PAYLOAD_TOO_LARGE')
  const ok = await b.app.inject({ method: 'POST', url: kSingle, headers: { 'x-api-key': b.key, 'x-request-id': 'small' }, payload: { indicator: { value: '198.51.100.1' } } })
  assert.equal(ok.statusCode, 200)
  await b.history.flush()
  assert.deepEqual(readHistory(b.config.dataDir).map((r) => r.record.request_id), ['small'])
  assert.equal((await b.store.usage('t1', null, today())).total, 1)
})
