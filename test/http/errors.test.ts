/**
 * Error codes and the error body shape (API.md "Errors"), request-shape rejections and prototype-pollution guards,
 * through app.inject on one shared service with a small body limit.
 */
import assert from 'node:assert/strict'
import { STATUS_CODES } from 'node:http'
import { test } from 'node:test'
import type { InjectOptions, LightMyRequestResponse } from 'fastify'
import { Packr } from 'msgpackr'
import { Admission } from '../../src/bulk/admission.ts'
import type { ApiKeyRecord, QuotaCounter } from '../../src/store/index.ts'
import { buildForFile } from '../helper.ts'

const kBodyLimit = 300_000
const kReplacement = 'GET /api/v2/mgmt/enrich-logs/search-history'

const svc = buildForFile({ IOC_BODY_LIMIT: String(kBodyLimit) })

type Json = Record<string, any>

const kSingle = '/api/v2/ioc/verdict'
const kBulk = '/api/v2/ioc/verdict/bulk'
const packr = new Packr({ useRecords: false })

async function inject (opts: InjectOptions): Promise<LightMyRequestResponse> {
  return await svc.app.inject(opts)
}

async function post (url: string, payload: string | Buffer | object, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return await inject({ method: 'POST', url, headers: { 'x-api-key': svc.key, ...headers }, payload })
}

/** The documented error body: exactly {statusCode, code, error, message}; nothing internal in it. */
function assertErrorShape (res: LightMyRequestResponse, status: number, code: string): Json {
  assert.equal(res.statusCode, status, `${code}: ${res.body}`)
  assert.match(String(res.headers['content-type']), /^application\/json/)
  const body = res.json() as Json
  assert.deepEqual(Object.keys(body).sort(), ['code', 'error', 'message', 'statusCode'])
  assert.equal(body.statusCode, status)
  assert.equal(body.code, code)
  assert.equal(body.error, STATUS_CODES[status])
  assert.equal(typeof body.message, 'string')
  assert.ok(body.message.length > 0)
  assert.doesNotMatch(res.body, /\n\s+at |node_modules|\/work\/|\/tmp\/|\.ts\b|file:\/\//, `${code}: no stack or path in the body`)
  return body
}

function pollutionCheck (): void {
  const probe = {} as Record<string, unknown>
  assert.equal(probe.polluted, undefined, 'Object.prototype is not polluted')
  assert.equal(Object.hasOwn(Object.prototype, 'polluted'), false)
  assert.equal(({} as Record<string, unknown>).isAdmin, undefined)
}

async function stillAnswers (): Promise<void> {
  const res = await post(kSingle, { indicator: { value: '192.0.2.1' } })
  assert.equal(res.statusCode, 200)
}

interface Row {
  code: string
  status: number
  retryAfter?: boolean
  /** Sends the request that must fail with this code (after any setup). */
  send: () => Promise<LightMyRequestResponse>
}

test('every error code reachable over HTTP comes with its status, the documented body shape and Retry-After where due', async () => {
  const rows: Row[] = [
    { code: 'INVALID_REQUEST', status: 400, send: async () => await post(kSingle, { indicator: { value: '1.2.3.4' }, signal_details: 'most' }) },
    { code: 'INVALID_ACTION_SOURCE', status: 400, send: async () => await post(kSingle, { indicator: { value: '1.2.3.4', action_source: 'a'.repeat(65) } }) },
    { code: 'INVALID_INDICATOR', status: 400, send: async () => await post(kSingle, { indicator: { type: 'ip', value: '1.2.3.4.5' } }) },
    {
      code: 'TOO_MANY_INDICATORS',
      status: 400,
      send: async () => await post(kBulk, { indicators: Array.from({ length: 10_001 }, () => ({ value: '1.2.3.4' })) })
    },
    { code: 'MISSING_API_KEY', status: 401, send: async () => await inject({ method: 'POST', url: kSingle, payload: { indicator: { value: '1.2.3.4' } } }) },
    { code: 'INVALID_API_KEY', status: 401, send: async () => await post(kSingle, { indicator: { value: '1.2.3.4' } }, { 'x-api-key': 'iocv_aaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb' }) },
    {
      code: 'PERMISSION_DENIED',
      status: 403,
      send: async () => await post(kBulk, { indicators: [] }, { 'x-api-key': await svc.makeKey(['verdict']) })
    },
    { code: 'NOT_FOUND', status: 404, send: async () => await post('/api/v2/ioc/history', { date_gte: '2026-01-01' }) },
    { code: 'NOT_ACCEPTABLE', status: 406, send: async () => await post(kSingle, { indicator: { value: '1.2.3.4' } }, { accept: 'text/html' }) },
    { code: 'PAYLOAD_TOO_LARGE', status: 413, send: async () => await post(kSingle, { indicator: { value: 'x'.repeat(kBodyLimit) } }) },
    { code: 'UNSUPPORTED_MEDIA_TYPE', status: 415, send: async () => await post(kSingle, 'indicator=1.2.3.4', { 'content-type': 'text/plain' }) },
    {
      code: 'QUOTA_EXCEEDED',
      status: 429,
      retryAfter: true,
      send: async () => {
        const key = await svc.makeKey(['verdict'], { tenant: 'quota-1', quota: 1 })
        assert.equal((await post(kSingle, { indicator: { value: '1.2.3.4' } }, { 'x-api-key': key })).statusCode, 200)
        return await post(kSingle, { indicator: { value: '1.2.3.4' } }, { 'x-api-key': key })
      }
    },
    {
      code: 'OVERLOADED',
      status: 503,
      retryAfter: true,
      send: async () => {
        // The admission refuses while history cannot take more (spool limit reached): simulate that state.
        const history = svc.history as unknown as { refusal: () => string | null }
        history.refusal = () => 'history spool is full; retry later'
        try {
          return await post(kSingle, { indicator: { value: '1.2.3.4' } })
        } finally {
          delete (history as Partial<typeof history>).refusal
        }
      }
    }
  ]
  for (const row of rows) {
    const res = await row.send()
    assertErrorShape(res, row.status, row.code)
    if (row.retryAfter === true) assert.match(String(res.headers['retry-after']), /^[1-9][0-9]*$/, `${row.code} has Retry-After`)
    else assert.equal(res.headers['retry-after'], undefined, `${row.code} has no Retry-After`)
    assert.ok(typeof res.headers['x-request-id'] === 'string', `${row.code} carries x-request-id`)
  }
  await stillAnswers()
})

test('the admission bound refuses work beyond the in-flight limit with OVERLOADED, but admits an oversized request alone', async () => {
  const quota = {} as QuotaCounter
  const key = { id: 'k', tenant: 't', permissions: ['verdict'], quota: null } as unknown as ApiKeyRecord
  const admission = new Admission(10, quota, () => null)
  const big = await admission.admit(key, 25)
  assert.equal(admission.inFlight, 25)
  await assert.rejects(admission.admit(key, 1), (err: Error & { code?: string, statusCode?: number }) => err.code === 'OVERLOADED' && err.statusCode === 503)
  big.done()
  big.done()
  assert.equal(admission.inFlight, 0, 'done() is idempotent')
  const a = await admission.admit(key, 6)
  const b = await admission.admit(key, 4)
  await assert.rejects(admission.admit(key, 1), { code: 'OVERLOADED' })
  a.done()
  b.done()
  const refusing = new Admission(10, quota, () => 'history spool is full')
  await assert.rejects(refusing.admit(key, 1), { code: 'OVERLOADED', message: 'history spool is full' })
})

test('malformed JSON gives 400 INVALID_REQUEST', async () => {
  for (const payload of ['{"indicator": {"value": "1.2.3.4"}', '{indicator: 1}', 'null', '[]', '"x"', '']) {
    const res = await post(kSingle, payload, { 'content-type': 'application/json' })
    assertErrorShape(res, 400, 'INVALID_REQUEST')
  }
  assertErrorShape(await post(kBulk, '{"indicators": [', { 'content-type': 'application/json' }), 400, 'INVALID_REQUEST')
})

test('malformed MessagePack gives 400 INVALID_REQUEST', async () => {
  for (const bytes of [[0x82, 0xa3, 0x61], [0xdf, 0xff, 0xff, 0xff, 0xff], [0xc1], [0x93, 0x01], [0x01]]) {
    const res = await post(kSingle, Buffer.from(bytes), { 'content-type': 'application/msgpack' })
    assertErrorShape(res, 400, 'INVALID_REQUEST')
  }
})

test('a body that is neither JSON nor MessagePack gives 415 UNSUPPORTED_MEDIA_TYPE', async () => {
  for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml', 'multipart/form-data; boundary=x']) {
    assertErrorShape(await post(kSingle, 'indicator=1.2.3.4', { 'content-type': type }), 415, 'UNSUPPORTED_MEDIA_TYPE')
    assertErrorShape(await post(kBulk, 'indicators=1.2.3.4', { 'content-type': type }), 415, 'UNSUPPORTED_MEDIA_TYPE')
  }
})

test('a body over the configured limit gives 413 PAYLOAD_TOO_LARGE on both verdict routes', async () => {
  const big = JSON.stringify({ indicators: Array.from({ length: 20_000 }, (_, i) => ({ value: `10.0.${i >> 8}.${i & 255}` })) })
  assert.ok(big.length > kBodyLimit)
  assertErrorShape(await post(kBulk, big, { 'content-type': 'application/json' }), 413, 'PAYLOAD_TOO_LARGE')
  assertErrorShape(await post(kSingle, big, { 'content-type': 'application/json' }), 413, 'PAYLOAD_TOO_LARGE')
  const packed = Buffer.from(packr.pack({ indicators: Array.from({ length: 30_000 }, () => ({ value: '1.2.3.4' })) }))
  assert.ok(packed.length > kBodyLimit)
  assertErrorShape(await post(kBulk, packed, { 'content-type': 'application/msgpack' }), 413, 'PAYLOAD_TOO_LARGE')
  await stillAnswers()
})

test('prototype-pollution keys anywhere in a JSON body give 400 INVALID_REQUEST and pollute nothing', async () => {
  const cases: Array<[string, string]> = [
    [kSingle, '{"indicator":{"value":"1.2.3.4"},"__proto__":{"polluted":1}}'],
    [kSingle, '{"indicator":{"value":"1.2.3.4","__proto__":{"polluted":1}}}'],
    [kSingle, '{"indicator":{"value":"1.2.3.4"},"context":{"flags":{"__proto__":{"polluted":1}}}}'],
    [kSingle, '{"indicator":{"value":"1.2.3.4"},"context":{"flags":[{"a":{"__proto__":{"isAdmin":true}}}]}}'],
    [kSingle, '{"indicator":{"value":"1.2.3.4"},"constructor":{"prototype":{"polluted":1}}}'],
    [kSingle, '{"indicator":{"value":"1.2.3.4"},"context":{"flags":{"constructor":{"prototype":{"polluted":1}}}}}'],
    [kBulk, '{"indicators":[{"value":"1.2.3.4"},{"value":"5.6.7.8","__proto__":{"polluted":1}}]}'],
    [kBulk, '{"indicators":[{"value":"1.2.3.4"}],"__proto__":{"polluted":1}}'],
    [kBulk, '{"indicators":[{"value":"1.2.3.4"}],"context":{"flags":{"__proto__":{"polluted":1}}}}'],
    [kBulk, '{"indicators":[{"value":"1.2.3.4"}],"source":{"constructor":{"prototype":{"polluted":1}}}}'],
    // Spelled with JSON escapes: the body text holds none of the words.
    [kSingle, '{"indicator":{"value":"1.2.3.4"},"\\u005f_proto__":{"polluted":1}}'],
    [kBulk, '{"indicators":[{"value":"1.2.3.4","\\u0063onstructor":{"polluted":1}}]}'],
    [kBulk, '{"indicators":[{"value":"1.2.3.4"}],"context":{"flags":{"proto\\u0074ype":{"polluted":1}}}}']
  ]
  for (const [url, payload] of cases) {
    const res = await post(url, payload, { 'content-type': 'application/json' })
    assertErrorShape(res, 400, 'INVALID_REQUEST')
    pollutionCheck()
  }
  await stillAnswers()
  pollutionCheck()
})

test('prototype-pollution keys in a MessagePack body give 400 INVALID_REQUEST and pollute nothing', async () => {
  const proto = new Map<string, unknown>([['polluted', 1]])
  const bodies: Array<[string, unknown]> = [
    [kSingle, new Map<string, unknown>([['indicator', { value: '1.2.3.4' }], ['__proto__', proto]])],
    [kSingle, { indicator: new Map<string, unknown>([['value', '1.2.3.4'], ['__proto__', proto]]) }],
    [kSingle, { indicator: { value: '1.2.3.4' }, context: { flags: new Map<string, unknown>([['__proto__', proto]]) } }],
    [kSingle, { indicator: { value: '1.2.3.4' }, constructor: { prototype: { polluted: 1 } } }],
    [kBulk, { indicators: [new Map<string, unknown>([['value', '1.2.3.4'], ['__proto__', proto]])] }],
    [kBulk, new Map<string, unknown>([['indicators', []], ['__proto__', proto]])]
  ]
  for (const [url, body] of bodies) {
    const bytes = Buffer.from(packr.pack(body))
    assert.ok(bytes.includes(Buffer.from('__proto__')) || bytes.includes(Buffer.from('constructor')))
    const res = await post(url, bytes, { 'content-type': 'application/msgpack' })
    assertErrorShape(res, 400, 'INVALID_REQUEST')
    pollutionCheck()
  }
  await stillAnswers()
  pollutionCheck()
})

test('an unknown top-level, indicator or item key gives 400 INVALID_REQUEST', async () => {
  const cases: Array<[string, object]> = [
    [kSingle, { indicator: { value: '1.2.3.4' }, detail: 'all' }],
    [kSingle, { indicator: { value: '1.2.3.4', comment: 'x' } }],
    [kSingle, { indicators: [{ value: '1.2.3.4' }] }],
    [kSingle, { indicator: { value: '1.2.3.4' }, source: { channel: 'siem', user: 'x' } }],
    [kSingle, { indicator: { value: '1.2.3.4' }, scoring_version: '2026-06' }],
    [kBulk, { indicators: [{ value: '1.2.3.4' }], indicator: { value: '1.2.3.4' } }],
    [kBulk, { indicators: [{ value: '1.2.3.4', signal_details: 'all' }] }],
    [kBulk, { indicators: [{ value: '1.2.3.4' }, { value: '5.6.7.8', extra: true }] }],
    [kBulk, { indicators: [{ value: '1.2.3.4' }], source: { channel: 'siem', extra: 'x' } }],
    [kBulk, { indicators: ['1.2.3.4'] }],
    [kBulk, { indicators: { value: '1.2.3.4' } }],
    [kBulk, {}],
    [kSingle, {}],
    [kBulk, { indicators: [{ value: '1.2.3.4', action_taken: 'quarantine' }] }],
    [kSingle, { indicator: { value: '1.2.3.4', action_taken: 'deny' } }],
    [kSingle, { indicator: { value: '1.2.3.4' }, evidence_details: 'verbose' }]
  ]
  for (const [url, body] of cases) {
    const res = await post(url, body)
    assertErrorShape(res, 400, 'INVALID_REQUEST')
  }
})

test('the retired POST /api/v2/ioc/history is 404 with and without a key (any permission) and with any body, naming its replacement', async () => {
  const variants: InjectOptions[] = [
    { method: 'POST', url: '/api/v2/ioc/history' },
    { method: 'POST', url: '/api/v2/ioc/history', headers: { 'x-api-key': svc.key }, payload: { date_gte: '2026-01-01T00:00:00Z', indicator_type: 'ip' } },
    { method: 'POST', url: '/api/v2/ioc/history', headers: { 'x-api-key': 'not-a-key' }, payload: {} },
    { method: 'POST', url: '/api/v2/ioc/history', headers: { 'content-type': 'application/json' }, payload: '{not json' },
    { method: 'POST', url: '/api/v2/ioc/history', headers: { 'content-type': 'application/json' }, payload: '' },
    { method: 'POST', url: '/api/v2/ioc/history', headers: { 'content-type': 'text/plain' }, payload: 'hello' },
    { method: 'POST', url: '/api/v2/ioc/history', headers: { 'content-type': 'application/msgpack' }, payload: Buffer.from([0xc1, 0x00]) },
    { method: 'POST', url: '/api/v2/ioc/history', headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ pad: 'x'.repeat(kBodyLimit * 4) }) },
    { method: 'POST', url: '/api/v2/ioc/history?limit=10', headers: { 'x-api-key': svc.key }, payload: { '{"__proto__"': 1 } },
    { method: 'POST', url: '/api/v2/ioc/history', headers: { 'x-api-key': await svc.makeKey(['mgmt']) }, payload: { date_gte: '2026-01-01T00:00:00Z', bulk_request_id: 'x', label: 'y' } },
    { method: 'POST', url: '/api/v2/ioc/history', headers: { 'x-api-key': svc.key }, payload: { results: [] } },
    { method: 'POST', url: '/api/v2/ioc/history', headers: { 'x-api-key': svc.key, 'content-type': 'application/msgpack' }, payload: Buffer.from([0x82, 0xa1]) },
    { method: 'POST', url: '/api/v2/ioc/history', headers: { 'x-api-key': svc.key, 'content-type': 'application/xml' }, payload: '<history/>' },
    // A key in the query string is refused with 401 elsewhere; here the route's answer is still 404.
    { method: 'POST', url: '/api/v2/ioc/history?api_key=x' },
    { method: 'POST', url: `/api/v2/ioc/history?token=abc&apikey=${encodeURIComponent(svc.key)}`, headers: { 'x-api-key': svc.key }, payload: {} }
  ]
  for (const v of variants) {
    const res = await inject(v)
    const body = assertErrorShape(res, 404, 'NOT_FOUND')
    assert.ok(body.message.includes(kReplacement), body.message)
  }
})

test('unknown routes give 404 NOT_FOUND in the same shape', async () => {
  assertErrorShape(await inject({ method: 'GET', url: '/api/v2/ioc/nope' }), 404, 'NOT_FOUND')
  assertErrorShape(await inject({ method: 'GET', url: '/api/v2/ioc/verdict' }), 404, 'NOT_FOUND')
})
