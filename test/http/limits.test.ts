/**
 * Every string a caller can have stored is bounded at the edge (docs/API.md "Limits"): past its limit the request is
 * refused with 400 INVALID_REQUEST naming the field, and nothing is recorded or counted.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { buildForFile } from '../helper.ts'

type Json = Record<string, any>

const svc = buildForFile()
const kSingle = '/api/v2/ioc/verdict'
const kBulk = '/api/v2/ioc/verdict/bulk'

async function post (url: string, payload: object, key = svc.key): Promise<{ status: number, body: Json }> {
  const res = await svc.app.inject({ method: 'POST', url, headers: { 'x-api-key': key }, payload })
  return { status: res.statusCode, body: res.json() as Json }
}

function refused (r: { status: number, body: Json }, field: RegExp): void {
  assert.equal(r.status, 400, JSON.stringify(r.body).slice(0, 300))
  assert.equal(r.body.code, 'INVALID_REQUEST')
  assert.match(r.body.message, field)
}

test('source.* strings over 256 characters are refused with the field named, in single and bulk calls', async () => {
  for (const field of ['channel', 'product', 'integration_id', 'event_type', 'severity_hint']) {
    refused(await post(kSingle, { indicator: { value: '1.2.3.4' }, source: { [field]: 'x'.repeat(257) } }), new RegExp(`source/${field}`))
    refused(await post(kBulk, { indicators: [{ value: '1.2.3.4' }], source: { [field]: 'x'.repeat(257) } }), new RegExp(`source/${field}`))
    assert.equal((await post(kSingle, { indicator: { value: '1.2.3.4' }, source: { [field]: 'x'.repeat(256) } })).status, 200)
  }
  const big = Array.from({ length: 1000 }, (_, i) => ({ value: `10.2.${i >> 8}.${i & 255}` }))
  refused(await post(kBulk, { indicators: big, source: { product: 'p'.repeat(5 * 1024 * 1024) } }), /source\/product/)
})

test('a single call\'s indicator value over 8192 characters is refused with the field named (a bulk item\'s is an item error)', async () => {
  refused(await post(kSingle, { indicator: { value: 'a'.repeat(8193) } }), /indicator\/value/)
  const items: Array<{ value: unknown }> = [{ value: '1.2.3.4' }, { value: 'a'.repeat(9000) }, { value: { a: 'b'.repeat(9000) } }]
  const bulk = await post(kBulk, { indicators: items })
  assert.equal(bulk.status, 200, 'test/http/bulk-invalid-items.test.ts has the rest')
  assert.deepEqual(bulk.body.results.map((r: Json) => r.errors === undefined), [true, false, false])
})

test('a refused request is neither recorded nor counted', async () => {
  const key = await svc.makeKey(['verdict', 'verdict_bulk', 'mgmt'], { tenant: 'limits-count', quota: 100 })
  refused(await post(kSingle, { indicator: { value: '1.2.3.4' }, source: { product: 'x'.repeat(300) } }, key), /source\/product/)
  refused(await post(kBulk, { indicators: [{ value: '1.2.3.4' }], query_type: 'q'.repeat(257) }, key), /query_type/)
  await svc.history.flush()
  const usage = (await svc.app.inject({ url: '/api/v2/mgmt/usage', headers: { 'x-api-key': key } })).json() as Json
  assert.equal(usage.key.used, 0)
  const page = (await svc.app.inject({ url: '/api/v2/mgmt/enrich-logs/search-history', headers: { 'x-api-key': key } })).json() as Json
  assert.equal(page.results.length, 0)
})

/** Paths of string schemas without a bound (maxLength, an enum or a pattern), under `at`. */
function unbounded (schema: Json | undefined, at: string, out: string[]): string[] {
  if (schema === undefined || schema === null || typeof schema !== 'object') return out
  const types = Array.isArray(schema.type) ? schema.type : [schema.type]
  if (types.includes('string') && schema.maxLength === undefined && schema.enum === undefined && schema.pattern === undefined) out.push(at)
  for (const [k, v] of Object.entries((schema.properties ?? {}) as Json)) unbounded(v as Json, `${at}.${k}`, out)
  if (schema.items !== undefined) unbounded(schema.items as Json, `${at}[]`, out)
  return out
}

test('every string of every documented request body, query and path parameter has a length bound', async () => {
  const doc = (await svc.app.inject({ url: '/api/v2/openapi.json' })).json() as Json
  const problems: string[] = []
  for (const [path, methods] of Object.entries(doc.paths as Json)) {
    for (const [method, op] of Object.entries(methods as Json)) {
      const where = `${method.toUpperCase()} ${path}`
      unbounded(op.requestBody?.content?.['application/json']?.schema, `${where} body`, problems)
      for (const p of (op.parameters ?? []) as Json[]) unbounded(p.schema as Json, `${where} ${p.in} ${p.name as string}`, problems)
    }
  }
  // action_source is bounded after trimming (64 characters, INVALID_ACTION_SOURCE, as the interface's limits say), not before; a single
  // call's indicator.type is never stored as sent (only a known type is), and an unknown one is INVALID_INDICATOR.
  assert.deepEqual(problems.filter((p) => !/\.action_source$|^POST \/api\/v2\/ioc\/verdict body\.indicator\.type$/.test(p)), [])
})
