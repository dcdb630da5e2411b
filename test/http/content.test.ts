/**
 * Content negotiation (docs/API.md "Request bodies"): JSON and standard MessagePack request bodies, and
 * `Accept: application/msgpack` responses any msgpack library decodes, with the same content as JSON.
 */
import assert from 'node:assert/strict'
import { gzipSync } from 'node:zlib'
import { test } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { Packr, Unpackr } from 'msgpackr'
import { buildForFile } from '../helper.ts'

const svc = buildForFile()

type Json = Record<string, any>

const kSingle = '/api/v2/ioc/verdict'
const kBulk = '/api/v2/ioc/verdict/bulk'
const packr = new Packr({ useRecords: false })
const unpackr = new Unpackr({ useRecords: false })

const kMixed = [
  { value: '198.51.100.23' }, { type: 'domain', value: 'malware-c2.example' }, { value: 'bad value!' }, { value: '8.8.8.8' },
  { type: 'ip', value: '203.0.113[.]9' }, { value: 'AS64511' }, { type: 'ip_block', value: '203.0.113.7/24' }, { value: 12 }, {},
  { type: 'file_hash_sha256', value: '275A021BBFB6489E54D471899F7DB9D1663FC695EC2FE2A2C4538AABF651FD0F' }, { value: 'cdn.xiaoduoai.com' },
  { value: 'ünïcödé-prüfung.example' }, { value: '2001:db8::1' }
]

/**
 * A strict decoder of standard MessagePack as JSON-compatible data: maps with string keys, arrays, strings, numbers,
 * booleans and nil. Extension types (msgpackr records, timestamps), bin and the reserved byte are errors, so a
 * response that decodes here decodes with any msgpack library into the same data as its JSON twin.
 */
function decodeStandard (buf: Uint8Array): unknown {
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength)
  const utf8 = new TextDecoder('utf-8', { fatal: true })
  let p = 0
  const take = (n: number): number => {
    const at = p
    p += n
    if (p > buf.length) throw new Error('truncated')
    return at
  }
  const str = (n: number): string => {
    const at = take(n)
    return utf8.decode(buf.subarray(at, at + n))
  }
  const arr = (n: number): unknown[] => Array.from({ length: n }, () => next())
  const map = (n: number): Record<string, unknown> => {
    const o: Record<string, unknown> = {}
    for (let i = 0; i < n; i++) {
      const k = next()
      if (typeof k !== 'string') throw new Error(`map key of type ${typeof k}`)
      Object.defineProperty(o, k, { value: next(), enumerable: true, writable: true, configurable: true })
    }
    return o
  }
  function next (): unknown {
    const b = buf[take(1)] as number
    if (b <= 0x7f) return b
    if (b >= 0xe0) return b - 0x100
    if (b >= 0x80 && b <= 0x8f) return map(b & 0x0f)
    if (b >= 0x90 && b <= 0x9f) return arr(b & 0x0f)
    if (b >= 0xa0 && b <= 0xbf) return str(b & 0x1f)
    switch (b) {
      case 0xc0: return null
      case 0xc2: return false
      case 0xc3: return true
      case 0xca: return dv.getFloat32(take(4))
      case 0xcb: return dv.getFloat64(take(8))
      case 0xcc: return dv.getUint8(take(1))
      case 0xcd: return dv.getUint16(take(2))
      case 0xce: return dv.getUint32(take(4))
      case 0xcf: return Number(dv.getBigUint64(take(8)))
      case 0xd0: return dv.getInt8(take(1))
      case 0xd1: return dv.getInt16(take(2))
      case 0xd2: return dv.getInt32(take(4))
      case 0xd3: return Number(dv.getBigInt64(take(8)))
      case 0xd9: return str(dv.getUint8(take(1)))
      case 0xda: return str(dv.getUint16(take(2)))
      case 0xdb: return str(dv.getUint32(take(4)))
      case 0xdc: return arr(dv.getUint16(take(2)))
      case 0xdd: return arr(dv.getUint32(take(4)))
      case 0xde: return map(dv.getUint16(take(2)))
      case 0xdf: return map(dv.getUint32(take(4)))
      default: throw new Error(`byte 0x${b.toString(16)} at ${p - 1} is not standard JSON-compatible MessagePack`)
    }
  }
  const v = next()
  if (p !== buf.length) throw new Error(`${buf.length - p} trailing bytes`)
  return v
}

async function post (url: string, payload: string | Buffer | object, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return await svc.app.inject({ method: 'POST', url, headers: { 'x-api-key': svc.key, ...headers }, payload })
}

/** The response without the members that differ per call. */
function stable (body: Json): Json {
  const meta = { ...body.meta }
  for (const k of ['request_id', 'query_time_ms', 'cache_hit', 'took_ms', 'bulk_request_id']) delete meta[k]
  return { ...body, meta }
}

function msgpackOf (res: LightMyRequestResponse): Json {
  assert.equal(res.statusCode, 200, res.body)
  assert.match(String(res.headers['content-type']), /^application\/msgpack/)
  const strict = decodeStandard(res.rawPayload) as Json
  assert.deepEqual(unpackr.unpack(res.rawPayload), strict, 'msgpackr (useRecords: false) and a strict decoder agree')
  return strict
}

test('a single verdict with Accept: application/msgpack decodes with a plain msgpack decoder to the JSON content', async () => {
  for (const body of [
    { indicator: { value: '198.51.100.23' }, signal_details: 'all', evidence_details: 'full' },
    { indicator: { value: '8.8.8.8' } },
    { indicator: { type: 'ip', value: '203.0.113[.]9' }, evidence_details: 'none' },
    { indicator: { value: 'ünïcödé-prüfung.example' } }
  ]) {
    const json = (await post(kSingle, body)).json()
    const mp = msgpackOf(await post(kSingle, body, { accept: 'application/msgpack' }))
    assert.deepEqual(stable(mp), stable(json))
  }
})

test('a bulk verdict with Accept: application/msgpack decodes with a plain msgpack decoder to the JSON content', async () => {
  for (const signal of ['none', 'top', 'all']) {
    const body = { indicators: kMixed, signal_details: signal }
    const json = (await post(kBulk, body)).json()
    const mp = msgpackOf(await post(kBulk, body, { accept: 'application/msgpack' }))
    assert.deepEqual(stable(mp), stable(json))
    assert.equal(mp.results.length, kMixed.length)
  }
  const many = { indicators: Array.from({ length: 300 }, (_, i) => ({ value: `10.${i >> 8}.${i & 255}.1` })) }
  const json = (await post(kBulk, many)).json()
  const mp = msgpackOf(await post(kBulk, many, { accept: 'application/msgpack' }))
  assert.deepEqual(stable(mp), stable(json), 'a results array of more than 15 items keeps its framing')
})

test('an empty bulk answers in msgpack as well', async () => {
  const mp = msgpackOf(await post(kBulk, { indicators: [] }, { accept: 'application/msgpack' }))
  assert.deepEqual(mp.results, [])
  assert.equal(mp.meta.record_count, 0)
})

test('a MessagePack request body gives the same verdicts as the JSON body', async () => {
  const single = { indicator: { value: '198.51.100.23', action_taken: 'block', action_source: 'EDR' }, signal_details: 'all', source: { channel: 'siem' } }
  for (const type of ['application/msgpack', 'application/x-msgpack', 'application/vnd.msgpack']) {
    const fromMp = await post(kSingle, Buffer.from(packr.pack(single)), { 'content-type': type })
    assert.equal(fromMp.statusCode, 200, fromMp.body)
    assert.deepEqual(stable(fromMp.json()), stable((await post(kSingle, single)).json()))
  }
  const bulk = { indicators: kMixed, signal_details: 'top', scoring_version: '2026-06' }
  const fromMp = await post(kBulk, Buffer.from(packr.pack(bulk)), { 'content-type': 'application/msgpack' })
  assert.equal(fromMp.statusCode, 200, fromMp.body)
  assert.deepEqual(stable(fromMp.json()), stable((await post(kBulk, bulk)).json()))
  const both = await post(kBulk, Buffer.from(packr.pack(bulk)), { 'content-type': 'application/msgpack', accept: 'application/msgpack' })
  assert.deepEqual(stable(msgpackOf(both)), stable(fromMp.json()))
})

test('JSON is the default and the Accept header is negotiated by preference', async () => {
  const body = { indicator: { value: '192.0.2.1' } }
  const cases: Array<[string | undefined, 'json' | 'msgpack']> = [
    [undefined, 'json'],
    ['*/*', 'json'],
    ['application/json', 'json'],
    ['application/*', 'json'],
    ['application/msgpack', 'msgpack'],
    ['application/x-msgpack', 'msgpack'],
    ['application/json;q=0.5, application/msgpack', 'msgpack'],
    ['application/msgpack;q=0.2, application/json;q=0.9', 'json'],
    ['text/html, application/msgpack;q=0.1', 'msgpack'],
    ['application/msgpack, application/json', 'json'],
    // No media type named at all: a malformed header, ignored.
    [';;;,,,', 'json'],
    [',', 'json']
  ]
  for (const [accept, want] of cases) {
    const res = await post(kSingle, body, accept === undefined ? {} : { accept })
    assert.equal(res.statusCode, 200, `${accept}: ${res.body}`)
    const type = String(res.headers['content-type'])
    if (want === 'json') assert.match(type, /^application\/json/, String(accept))
    else assert.match(type, /^application\/msgpack/, String(accept))
  }
})

test('a JSON body with a charset parameter is accepted', async () => {
  const res = await post(kSingle, JSON.stringify({ indicator: { value: '192.0.2.1' } }), { 'content-type': 'application/json; charset=utf-8' })
  assert.equal(res.statusCode, 200)
})

test('a JSON body after a byte order mark is accepted; a media type nobody serves is still 406', async () => {
  const json = { 'content-type': 'application/json' }
  const withBom = await post(kSingle, '\uFEFF' + JSON.stringify({ indicator: { value: '192.0.2.1' } }), json)
  assert.equal(withBom.statusCode, 200, withBom.body)
  assert.equal(withBom.json().indicator.value, '192.0.2.1')
  const bomOnly = await post(kSingle, '\uFEFF', json)
  assert.equal(bomOnly.statusCode, 400)
  assert.equal(bomOnly.json().code, 'INVALID_REQUEST')
  const html = await post(kSingle, { indicator: { value: '192.0.2.1' } }, { accept: 'text/html' })
  assert.equal(html.statusCode, 406)
  assert.equal(html.json().code, 'NOT_ACCEPTABLE')
})

test('errors are JSON in the documented shape even when msgpack was asked for', async () => {
  const res = await post(kSingle, { indicator: { value: 'no good!' } }, { accept: 'application/msgpack' })
  assert.equal(res.statusCode, 400)
  assert.match(String(res.headers['content-type']), /^application\/json/)
  assert.deepEqual(Object.keys(res.json()).sort(), ['code', 'error', 'message', 'statusCode'])
})

test('a compressed body is 415 UNSUPPORTED_MEDIA_TYPE after the key check; identity is accepted', async () => {
  const body = JSON.stringify({ indicator: { value: '198.51.100.77' } })
  const post = async (headers: Record<string, string>, payload: Buffer | string): Promise<LightMyRequestResponse> =>
    await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'content-type': 'application/json', ...headers }, payload })
  for (const coding of ['gzip', 'br', 'deflate, gzip']) {
    const res = await post({ 'x-api-key': svc.key, 'content-encoding': coding }, gzipSync(body))
    assert.equal(res.statusCode, 415, coding)
    assert.equal(res.json().code, 'UNSUPPORTED_MEDIA_TYPE')
    assert.equal((await post({ 'content-encoding': coding }, gzipSync(body))).json().code, 'MISSING_API_KEY', 'the key is checked first')
  }
  const bulk = await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict/bulk', headers: { 'x-api-key': svc.key, 'content-type': 'application/json', 'content-encoding': 'gzip' }, payload: gzipSync(JSON.stringify({ indicators: [{ value: '1.1.1.1' }] })) })
  assert.equal(bulk.statusCode, 415)
  assert.equal((await post({ 'x-api-key': svc.key, 'content-encoding': 'identity' }, body)).statusCode, 200)
  assert.equal((await post({ 'x-api-key': svc.key }, body)).statusCode, 200)
})
