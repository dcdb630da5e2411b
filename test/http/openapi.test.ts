/**
 * The OpenAPI document (GET /api/v2/openapi.json) names every route the app serves, and real answers of each route,
 * recorded here through app.inject, validate against the document's response schemas.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Ajv } from 'ajv'
import { Packr, unpack } from 'msgpackr'
import { buildForFile } from '../helper.ts'

type Json = Record<string, any>

const svc = buildForFile()

/** Routes the document leaves out on purpose: static files (wildcards), the dashboard (docs/DASHBOARD.md), the document itself, Swagger UI's assets, the Prometheus scrape. */
const kUndocumented = /(\*$)|^(\/$|\/dashboard(\/|$)|\/docs(\/|$)|\/api\/v2\/openapi\.json$|\/metrics$)/

/** Every method and path of printRoutes()' tree, with the tree's nested segments joined. */
function servedRoutes (tree: string): Array<[string, string]> {
  const out: Array<[string, string]> = []
  const stack: string[] = []
  for (const line of tree.split('\n')) {
    const m = /^((?:│ {3}| {4})*)(?:├── |└── )(.*?)(?: \(([A-Z, ]+)\))?$/.exec(line)
    if (m === null) continue
    const depth = (m[1] as string).length / 4
    stack.length = depth
    stack.push(m[2] as string)
    // OpenAPI writes a path parameter as {id} where Fastify writes :id.
    const path = stack.join('').replace(/:(\w+)/g, '{$1}')
    for (const method of (m[3] ?? '').split(', ').filter((x) => x !== '' && x !== 'HEAD')) out.push([method, path])
  }
  return out
}

test('every route the app serves is in the OpenAPI document with its method', async () => {
  const doc = (await svc.app.inject({ url: '/api/v2/openapi.json' })).json() as Json
  assert.match(doc.openapi, /^3\./)
  const served = servedRoutes(svc.app.printRoutes({ commonPrefix: false })).filter(([, path]) => !kUndocumented.test(path))
  assert.ok(served.length >= 9, `routes found in the tree: ${JSON.stringify(served)}`)
  for (const [method, path] of served) {
    assert.ok(doc.paths[path]?.[method.toLowerCase()] !== undefined, `${method} ${path} is documented`)
  }
  for (const path of Object.keys(doc.paths)) assert.ok(served.some(([, p]) => p === path), `documented ${path} is served`)
})

test('Swagger UI is served from the service itself, with no asset from another host', async () => {
  const page = await svc.app.inject({ url: '/docs/' })
  assert.equal(page.statusCode, 200)
  assert.match(String(page.headers['content-type']), /text\/html/)
  assert.doesNotMatch(page.body, /(src|href)="https?:\/\//)
  const bundle = await svc.app.inject({ url: '/docs/static/swagger-ui-bundle.js' })
  assert.equal(bundle.statusCode, 200)
})

test('recorded answers of every documented route validate against the document', async () => {
  const doc = (await svc.app.inject({ url: '/api/v2/openapi.json' })).json() as Json
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false })
  const headers = { 'x-api-key': svc.key, 'content-type': 'application/json' }
  const created = (await svc.app.inject({ method: 'POST', url: '/api/v2/mgmt/keys', headers, payload: { permissions: ['verdict'] } })).json() as Json
  const calls: Array<{ method: 'GET' | 'POST' | 'DELETE', url: string, doc?: string, payload?: object, headers?: Record<string, string> }> = [
    { method: 'POST', url: '/api/v2/ioc/verdict', payload: { indicator: { value: 'hxxp://malware-c2[.]example/x' }, signal_details: 'all', evidence_details: 'full' } },
    { method: 'POST', url: '/api/v2/ioc/verdict', payload: { indicator: { value: 'not an indicator!' } } },
    { method: 'POST', url: '/api/v2/ioc/verdict', payload: { indicator: { value: '8.8.8.8', action_source: 'x'.repeat(65) } } },
    { method: 'POST', url: '/api/v2/ioc/verdict', payload: { indicator: { value: '8.8.8.8' } }, headers: { 'content-type': 'application/json' } },
    { method: 'POST', url: '/api/v2/ioc/verdict/bulk', payload: { indicators: [{ value: '104.16.0.1' }, { value: 'bad value!' }, { value: 'AS13335' }], signal_details: 'top' } },
    { method: 'POST', url: '/api/v2/ioc/verdict/bulk', payload: { indicators: Array.from({ length: 10_001 }, () => ({ value: '1.1.1.1' })) } },
    // Values and types that are not strings are echoed as sent, each an invalid item.
    { method: 'POST', url: '/api/v2/ioc/verdict/bulk', payload: { indicators: [{ value: 5 }, { type: ['a'], value: '1.1.1.1' }, { value: null }, { value: { a: 1 } }] } },
    { method: 'GET', url: '/api/v2/ioc/health' },
    { method: 'GET', url: '/livez' },
    { method: 'GET', url: '/readyz' },
    { method: 'POST', url: '/api/v2/ioc/history', payload: {} },
    { method: 'GET', url: '/api/v2/mgmt/enrich-logs/search-history?limit=2' },
    { method: 'GET', url: '/api/v2/mgmt/enrich-logs/search-history?date_gte=yesterday' },
    { method: 'GET', url: '/api/v2/mgmt/usage' },
    { method: 'POST', url: '/api/v2/mgmt/intel/reload', headers: { 'x-api-key': svc.key } },
    { method: 'GET', url: '/api/v2/mgmt/intel/sources' },
    { method: 'POST', url: '/api/v2/mgmt/allowlist', payload: { kind: 'domain', value: 'intranet.example', reason: 'our own' } },
    { method: 'POST', url: '/api/v2/mgmt/allowlist', payload: { kind: 'domain', value: 'x' } },
    { method: 'GET', url: '/api/v2/mgmt/allowlist' },
    { method: 'DELETE', url: '/api/v2/mgmt/allowlist/no-such-entry', doc: '/api/v2/mgmt/allowlist/{id}', headers: { 'x-api-key': svc.key } },
    { method: 'POST', url: '/api/v2/mgmt/feedback', payload: { indicator: { value: 'malware-c2[.]example' }, verdict: 'false_positive', note: 'our sinkhole' } },
    { method: 'POST', url: '/api/v2/mgmt/feedback', payload: { indicator: { value: 'not an indicator!' }, verdict: 'false_positive' } },
    { method: 'GET', url: '/api/v2/mgmt/feedback?verdict=false_positive&limit=5' },
    { method: 'GET', url: '/api/v2/mgmt/feedback?since=soon' },
    { method: 'GET', url: '/api/v2/mgmt/feedback/summary' },
    { method: 'GET', url: '/api/v2/mgmt/retro-hunt/hits?limit=5&min_score=65' },
    { method: 'GET', url: '/api/v2/mgmt/retro-hunt/hits?limit=0' },
    { method: 'POST', url: '/api/v2/mgmt/webhooks', payload: { url: 'https://127.0.0.1/hook' } },
    { method: 'GET', url: '/api/v2/mgmt/webhooks' },
    { method: 'DELETE', url: '/api/v2/mgmt/webhooks/wh_000000000ffffffffff', doc: '/api/v2/mgmt/webhooks/{id}', headers: { 'x-api-key': svc.key } },
    { method: 'GET', url: '/api/v2/mgmt/webhooks/wh_000000000ffffffffff/deliveries', doc: '/api/v2/mgmt/webhooks/{id}/deliveries', headers: { 'x-api-key': svc.key } },
    { method: 'DELETE', url: '/api/v2/mgmt/feedback/fb_000000000ffffffffff', doc: '/api/v2/mgmt/feedback/{id}', headers: { 'x-api-key': svc.key } },
    { method: 'POST', url: '/api/v2/mgmt/intel/sources/refresh', headers: { 'x-api-key': svc.key } },
    { method: 'POST', url: '/api/v2/mgmt/keys', payload: { permissions: ['verdict'], rate_limit: 60 } },
    { method: 'POST', url: '/api/v2/mgmt/keys', payload: { permissions: ['nothing'] } },
    { method: 'GET', url: '/api/v2/mgmt/keys' },
    { method: 'DELETE', url: `/api/v2/mgmt/keys/${created.record.id as string}`, doc: '/api/v2/mgmt/keys/{id}', headers: { 'x-api-key': svc.key } },
    { method: 'DELETE', url: '/api/v2/mgmt/keys/unknownkeyid', doc: '/api/v2/mgmt/keys/{id}', headers: { 'x-api-key': svc.key } }
  ]
  const seen = new Set<string>()
  for (const call of calls) {
    const res = await svc.app.inject({ method: call.method, url: call.url, headers: call.headers ?? headers, ...(call.payload === undefined ? {} : { payload: call.payload }) })
    const path = call.doc ?? call.url.split('?')[0] as string
    const op = doc.paths[path]?.[call.method.toLowerCase()]
    assert.ok(op !== undefined, `${call.method} ${path} is documented`)
    const documented = op.responses[String(res.statusCode)]
    assert.ok(documented !== undefined, `${call.method} ${call.url}: status ${res.statusCode} is documented`)
    seen.add(`${call.method} ${path}`)
    const schema = documented.content?.['application/json']?.schema
    if (res.statusCode === 204) continue
    assert.ok(schema !== undefined, `${call.method} ${call.url}: the ${res.statusCode} answer's schema is documented`)
    const validate = ajv.compile(schema)
    assert.ok(validate(res.json()), `${call.method} ${call.url} (${res.statusCode}): ${ajv.errorsText(validate.errors)}`)
    seen.add(`${call.method} ${path}`)
  }
  for (const [path, ops] of Object.entries(doc.paths as Json)) {
    for (const method of Object.keys(ops as Json)) assert.ok(seen.has(`${method.toUpperCase()} ${path}`), `an answer of ${method.toUpperCase()} ${path} was checked`)
  }
})

test('every request body is documented as JSON or MessagePack, and the verdict answers as MessagePack too', async () => {
  const doc = (await svc.app.inject({ url: '/api/v2/openapi.json' })).json() as Json
  let bodies = 0
  for (const [path, ops] of Object.entries(doc.paths as Json)) {
    for (const [method, op] of Object.entries(ops as Json)) {
      if (op.requestBody === undefined) continue
      bodies++
      assert.deepEqual(Object.keys(op.requestBody.content).sort(), ['application/json', 'application/msgpack', 'application/vnd.msgpack', 'application/x-msgpack'], `${method} ${path}`)
    }
  }
  assert.ok(bodies >= 5, `${bodies} routes take a body`)
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false })
  const packr = new Packr({ useRecords: false })
  const calls: Array<[string, object]> = [
    ['/api/v2/ioc/verdict', { indicator: { value: '104.16.0.1' }, signal_details: 'all' }],
    ['/api/v2/ioc/verdict/bulk', { indicators: [{ value: '104.16.0.1' }, { value: 7 }], signal_details: 'all' }]
  ]
  for (const [url, body] of calls) {
    const res = await svc.app.inject({ method: 'POST', url, headers: { 'x-api-key': svc.key, 'content-type': 'application/msgpack', accept: 'application/msgpack' }, payload: Buffer.from(packr.pack(body)) })
    assert.equal(res.statusCode, 200, url)
    assert.match(String(res.headers['content-type']), /^application\/msgpack/)
    const schema = doc.paths[url].post.responses['200'].content['application/msgpack']?.schema
    assert.ok(schema !== undefined, `${url}: the msgpack answer is documented`)
    const validate = ajv.compile(schema)
    assert.ok(validate(unpack(res.rawPayload)), `${url}: ${ajv.errorsText(validate.errors)}`)
  }
})
