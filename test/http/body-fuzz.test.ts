/**
 * Hostile request bodies (docs/API.md "Request bodies"): nested, shared references, huge counts, long strings,
 * extension types and random mutations, in JSON and MessagePack, to routes with and without authentication and to an
 * unknown path. Each is answered (never a 5xx), however it is built, and the service keeps answering. No answer time
 * is asserted (the machine may be busy): the guard against a parse that is not linear is each test's timeout, far
 * above what a linear parse of every body here costs on a busy machine (seconds) and far below what the former
 * exponential walk took on the shared-reference bodies (2^48 paths: years), so such a parse fails the test.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Packr } from 'msgpackr'
import { checkJsonBody, checkJsonText, kMaxDepth, kMaxElements } from '../../src/http/body-guard.ts'
import { buildForFile } from '../helper.ts'

const svc = buildForFile()

/** Each test's bound: a hung parse fails the test (see above). */
const kTimeout = { timeout: 5 * 60_000 }
const kRoutes = ['/dashboard/api/session', '/no/such/route', '/api/v2/ioc/verdict', '/api/v2/ioc/verdict/bulk']

/** A deterministic pseudo-random sequence (mulberry32), so a failing body can be rebuilt. */
function prng (seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Maps whose two members are one and the same map, `levels` deep: 2^levels paths in under 1 KB with references. */
function sharedMaps (levels: number, keys = ['x', 'y']): object {
  let o: object = { value: '1.2.3.4' }
  for (let i = 0; i < levels; i++) o = Object.fromEntries(keys.map((k) => [k, o]))
  return o
}

async function send (url: string, payload: Buffer | string, type: string, key = true): Promise<{ status: number, code: string | undefined }> {
  const res = await svc.app.inject({ method: 'POST', url, headers: { 'content-type': type, ...(key ? { 'x-api-key': svc.key } : {}) }, payload })
  let code: string | undefined
  try {
    code = (res.json() as { code?: string }).code
  } catch {
    code = undefined
  }
  return { status: res.statusCode, code }
}

/** The sign-in route's body limit (src/dashboard/routes.ts). */
const kSignInBodyLimit = 16 * 1024

/**
 * Sends a body to every route (with and without a key), expecting an answer below 500: `expectCode` where the body is
 * read (a route without a key answers 401 first; no route answers 404 unread; sign-in refuses a body past its limit).
 */
async function hostile (name: string, payload: Buffer | string, type: string, expectCode?: string): Promise<void> {
  for (const url of kRoutes) {
    for (const key of [false, true]) {
      const r = await send(url, payload, type, key)
      assert.ok(r.status >= 400 && r.status < 500, `${name} to ${url}: status ${r.status} ${r.code ?? ''}`)
      if (url === '/no/such/route') assert.equal(r.code, 'NOT_FOUND', `${name} to ${url}`)
      else if (url === '/dashboard/api/session' && Buffer.byteLength(payload) > kSignInBodyLimit) assert.equal(r.code, 'PAYLOAD_TOO_LARGE', `${name} to ${url}`)
      else if (expectCode !== undefined && !(url.startsWith('/api/') && !key)) assert.equal(r.code, expectCode, `${name} to ${url}`)
    }
  }
}

async function stillAnswers (): Promise<void> {
  const res = await svc.app.inject({ url: '/livez' })
  assert.equal(res.statusCode, 200)
}

/** That the key's history holds exactly these values (nothing of the refused requests), and the service still answers. */
async function onlyRecorded (key: string, values: string[]): Promise<void> {
  await svc.history.flush()
  const page = (await svc.app.inject({ url: '/api/v2/mgmt/enrich-logs/search-history', headers: { 'x-api-key': key } })).json() as Record<string, any>
  assert.deepEqual(page.results.map((r: Record<string, any>) => r.indicator.value), values)
  await stillAnswers()
}

test('MessagePack shared references (structured clone) are refused at once, before and after authentication', kTimeout, async () => {
  const packr = new Packr({ structuredClone: true, useRecords: false })
  for (const levels of [20, 35, 48]) {
    const bytes = Buffer.from(packr.pack(sharedMaps(levels)))
    assert.ok(bytes.length < 1024, `${bytes.length} bytes`)
    await hostile(`shared maps ${levels} deep (${bytes.length} bytes)`, bytes, 'application/msgpack', 'INVALID_REQUEST')
    // The same shape inside a real request: a bulk's context.flags and a sign-in's username.
    const inBulk = Buffer.from(packr.pack({ indicators: [{ value: '1.2.3.4' }], context: { flags: sharedMaps(levels) } }))
    await hostile('shared maps in context.flags', inBulk, 'application/msgpack', 'INVALID_REQUEST')
    const inSignIn = Buffer.from(packr.pack({ username: sharedMaps(levels), password: 'x' }))
    await hostile('shared maps as a username', inSignIn, 'application/x-msgpack', 'INVALID_REQUEST')
  }
  await stillAnswers()
})

test('MessagePack extension types, records and bin are refused with INVALID_REQUEST', kTimeout, async () => {
  const bodies: Array<[string, Buffer]> = [
    ['records', Buffer.from(new Packr({ useRecords: true }).pack({ indicators: Array.from({ length: 20 }, () => ({ value: '1.2.3.4', type: 'ip' })) }))],
    ['moreTypes', Buffer.from(new Packr({ moreTypes: true, useRecords: false }).pack({ indicators: [{ value: new Set(['1.2.3.4']) }] }))],
    ['a timestamp', Buffer.from(new Packr({ useRecords: false }).pack({ indicators: [{ value: new Date() }] }))],
    ['a bigint', Buffer.from(new Packr({ useRecords: false, useBigIntExtension: true }).pack({ indicators: [{ value: 2n ** 80n }] }))],
    ['a regular expression', Buffer.from(new Packr({ moreTypes: true, useRecords: false }).pack({ indicator: { value: /(a+)+$/ } }))],
    ['bundled strings', Buffer.from(new Packr({ bundleStrings: true, useRecords: false }).pack({ indicators: Array.from({ length: 50 }, (_, i) => ({ value: `host-${i}.example` })) }))],
    ['bin', Buffer.from(new Packr({ useRecords: false }).pack({ indicator: { value: Buffer.from('1.2.3.4') } }))],
    ['an integer key', Buffer.from([0x81, 0x01, 0xa1, 0x61])],
    ['the reserved byte', Buffer.from([0x81, 0xa1, 0x61, 0xc1])]
  ]
  for (const [name, bytes] of bodies) await hostile(name, bytes, 'application/msgpack', 'INVALID_REQUEST')
  await stillAnswers()
})

test('huge declared counts and lengths are refused before anything is allocated', kTimeout, async () => {
  const bodies: Array<[string, Buffer]> = [
    ['array32 of 2^32-1', Buffer.from([0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0])],
    ['map32 of 2^32-1', Buffer.from([0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 0x61, 0xc0])],
    ['str32 of 2^32-1', Buffer.from([0x81, 0xa1, 0x61, 0xdb, 0xff, 0xff, 0xff, 0xff, 0x61])],
    ['array16 in array16, nested', Buffer.concat([Buffer.alloc(3000, 0x91), Buffer.from([0xc0])])],
    ['truncated float', Buffer.from([0x91, 0xcb, 0x00])],
    ['trailing bytes', Buffer.from([0x80, 0x80])]
  ]
  for (const [name, bytes] of bodies) await hostile(name, bytes, 'application/msgpack', 'INVALID_REQUEST')
  const deepJson = '['.repeat(1_000_000) + ']'.repeat(1_000_000)
  await hostile('JSON nested a million deep', deepJson, 'application/json', 'INVALID_REQUEST')
  const deepObjects = '{"a":'.repeat(kMaxDepth + 1) + '1' + '}'.repeat(kMaxDepth + 1)
  await hostile(`JSON objects ${kMaxDepth + 1} deep`, deepObjects, 'application/json', 'INVALID_REQUEST')
  const manyJson = JSON.stringify({ indicators: [], context: { flags: new Array(kMaxElements).fill(0) } })
  await hostile(`JSON of more than ${kMaxElements} elements`, manyJson, 'application/json', 'INVALID_REQUEST')
  const manyMsgpack = Buffer.from(new Packr({ useRecords: false }).pack({ indicators: [], context: { flags: new Array(kMaxElements).fill(0) } }))
  await hostile(`MessagePack of more than ${kMaxElements} elements`, manyMsgpack, 'application/msgpack', 'INVALID_REQUEST')
  await stillAnswers()
})

test('a bulk far past 10,000 indicators is TOO_MANY_INDICATORS, not the element limit; anything else past it is not', kTimeout, async () => {
  const packr = new Packr({ useRecords: false })
  const many = { indicators: Array.from({ length: 100_000 }, () => ({ value: '1.1.1.1' })) }
  const bodies: Array<[string, Buffer | string]> = [['application/json', JSON.stringify(many)], ['application/msgpack', Buffer.from(packr.pack(many))]]
  for (const [type, body] of bodies) {
    const bulk = await send('/api/v2/ioc/verdict/bulk', body, type)
    assert.deepEqual(bulk, { status: 400, code: 'TOO_MANY_INDICATORS' }, type)
    // Another route has no counted member: the body's element limit answers.
    assert.deepEqual(await send('/api/v2/ioc/verdict', body, type), { status: 400, code: 'INVALID_REQUEST' }, `${type} to the single route`)
    assert.equal((await send('/api/v2/ioc/verdict/bulk', body, type, false)).code, 'MISSING_API_KEY', 'the key is checked first')
  }
  // Only the top-level member counts: the same array elsewhere meets the element limit.
  const nested = { indicators: [{ value: '1.1.1.1' }], context: { indicators: many.indicators } }
  assert.deepEqual(await send('/api/v2/ioc/verdict/bulk', JSON.stringify(nested), 'application/json'), { status: 400, code: 'INVALID_REQUEST' })
  assert.deepEqual(await send('/api/v2/ioc/verdict/bulk', Buffer.from(packr.pack(nested)), 'application/msgpack'), { status: 400, code: 'INVALID_REQUEST' })
  // A header claiming more items than the body holds is not believed: it is a truncated body.
  const lying = Buffer.concat([Buffer.from([0x81, 0xaa]), Buffer.from('indicators'), Buffer.from([0xdd, 0x00, 0x01, 0x86, 0xa0, 0xc0])])
  assert.deepEqual(await send('/api/v2/ioc/verdict/bulk', lying, 'application/msgpack'), { status: 400, code: 'INVALID_REQUEST' })
  // 10,001 in a small msgpack body is refused by the guard too; the handler's count gives the same code for JSON.
  const justOver = { indicators: Array.from({ length: 10_001 }, () => ({ value: '1.1.1.1' })) }
  assert.deepEqual(await send('/api/v2/ioc/verdict/bulk', Buffer.from(packr.pack(justOver)), 'application/msgpack'), { status: 400, code: 'TOO_MANY_INDICATORS' })
  assert.deepEqual(await send('/api/v2/ioc/verdict/bulk', JSON.stringify(justOver), 'application/json'), { status: 400, code: 'TOO_MANY_INDICATORS' })
  await stillAnswers()
})

test('bodies at the limits are accepted: 64 levels, long strings and a full bulk of log-only fields', kTimeout, async () => {
  const nested = (levels: number): unknown => {
    let v: unknown = 1
    for (let i = 1; i < levels; i++) v = [v]
    return v
  }
  for (const [type, encode] of [['application/json', (b: unknown) => JSON.stringify(b)], ['application/msgpack', (b: unknown) => Buffer.from(new Packr({ useRecords: false }).pack(b))]] as const) {
    const deep = await send('/api/v2/ioc/verdict', encode({ indicator: { value: '1.2.3.4' }, context: { flags: nested(kMaxDepth - 3) } }), type)
    assert.equal(deep.status, 200, `${type}: ${kMaxDepth} levels`)
    const full = { indicators: Array.from({ length: 10_000 }, (_, i) => ({ type: 'ip', value: `10.0.${i >> 8}.${i & 255}`, action_taken: 'block', action_source: 'edr' })) }
    const bulk = await send('/api/v2/ioc/verdict/bulk', encode(full), type)
    assert.equal(bulk.status, 200, `${type}: a full bulk`)
    const long = await send('/api/v2/ioc/verdict', encode({ indicator: { value: '1.2.3.4' }, context: { flags: 'x'.repeat(4 << 20) } }), type)
    assert.equal(long.status, 200, `${type}: a 4 MiB string in context.flags`)
  }
})

test('random mutations of valid bodies are answered below 500', kTimeout, async () => {
  const rand = prng(29)
  const packr = new Packr({ useRecords: false })
  const seeds: Array<[string, Buffer]> = [
    ['application/msgpack', Buffer.from(packr.pack({ indicators: [{ value: '1.2.3.4', action_source: 'edr' }, { type: 'domain', value: 'a.example' }], source: { channel: 'siem' }, context: { flags: { a: [1, 2, { b: null }] } } }))],
    ['application/msgpack', Buffer.from(packr.pack({ username: 'someone', password: 'a password of some length' }))],
    ['application/json', Buffer.from(JSON.stringify({ indicator: { value: '198.51.100.23' }, context: { flags: [[[{ x: 'y' }]]] }, signal_details: 'all' }))]
  ]
  let checked = 0
  for (const [type, seed] of seeds) {
    for (let i = 0; i < 150; i++) {
      const bytes = Buffer.from(seed)
      const edits = 1 + Math.floor(rand() * 4)
      for (let e = 0; e < edits; e++) bytes[Math.floor(rand() * bytes.length)] = Math.floor(rand() * 256)
      const url = kRoutes[i % kRoutes.length] as string
      const r = await send(url, bytes, type, i % 2 === 0)
      assert.ok(r.status < 500, `mutation ${i} of a ${type} body to ${url}: ${r.status} ${r.code ?? ''} (${bytes.toString('hex')})`)
      checked++
    }
  }
  assert.equal(checked, 450)
  await stillAnswers()
})

test('the JSON guard names each forbidden key at any depth, passes look-alike keys, and counts keys and values', () => {
  for (const key of ['__proto__', 'constructor', 'prototype']) {
    for (const text of [`{"${key}":1}`, `{"a":[{"b":{"${key}":{}}}]}`, `[[{"x":1,"${key}":null}]]`]) {
      assert.throws(() => checkJsonBody(JSON.parse(text)), (err: Error & { code?: string }) => err.code === 'INVALID_REQUEST' && err.message === `forbidden key "${key}" in body`, text)
    }
  }
  checkJsonBody(JSON.parse('{"proto":1,"__proto":2,"constructors":3,"Prototype":4,"_proto_":[{"toString":5,"hasOwnProperty":6}]}'))
  // Every value and every key counts: an object of k keys holding numbers is 1 + 2k elements.
  const k = (kMaxElements - 1) / 2
  const object = (n: number): Record<string, number> => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, i]))
  if (Number.isInteger(k)) {
    checkJsonBody(object(k))
    assert.throws(() => checkJsonBody(object(k + 1)), /more than/)
  } else {
    checkJsonBody(object(Math.floor(k)))
    assert.throws(() => checkJsonBody(object(Math.ceil(k))), /more than/)
  }
  // An array of n numbers is 1 + n elements.
  checkJsonBody(new Array(kMaxElements - 1).fill(0))
  assert.throws(() => checkJsonBody(new Array(kMaxElements).fill(0)), /more than/)
  assert.throws(() => checkJsonBody(JSON.parse('['.repeat(kMaxDepth + 1) + ']'.repeat(kMaxDepth + 1))), /deeper/)
  checkJsonBody(JSON.parse('['.repeat(kMaxDepth) + ']'.repeat(kMaxDepth)))
})

test('JSON text nested too deep or with too many elements is refused before it is parsed; brackets and commas in strings do not count', () => {
  // Text JSON.parse would take seconds over (millions of levels) or refuse (no closing brackets): refused by the scan.
  assert.throws(() => checkJsonText('['.repeat(4_000_000), false), /deeper than 64/)
  assert.throws(() => checkJsonText('{"a":'.repeat(kMaxDepth + 1), false), /deeper than 64/)
  checkJsonText('['.repeat(kMaxDepth) + ']'.repeat(kMaxDepth), false)
  // Brackets in strings, escaped quotes and backslashes before a closing quote: the string ends where JSON says.
  const inStrings = JSON.stringify(['[{'.repeat(1000), '\\', '\\"[[', '"{{'.repeat(100)])
  assert.doesNotThrow(() => JSON.parse(inStrings))
  checkJsonText(inStrings, true)
  // An escaped quote does not end the string (its brackets do not count); an escaped backslash before a quote does.
  checkJsonText(`["\\"${'['.repeat(kMaxDepth + 1)}"]`, false)
  assert.throws(() => checkJsonText(`["\\\\",${'['.repeat(kMaxDepth)}`, false), /deeper/)
  // Commas: n numbers are 1 + n elements; the scan refuses from kMaxElements commas (kMaxElements + 1 numbers) on.
  const numbers = (n: number): string => `[${new Array(n).fill(0).join(',')}]`
  checkJsonText(numbers(kMaxElements), true)
  assert.throws(() => checkJsonText(numbers(kMaxElements + 1), true), /more than 250000 elements/)
  checkJsonText(numbers(kMaxElements + 1), false)
  checkJsonText(`["${','.repeat(kMaxElements * 2)}"]`, true)
})

test('a body sent to no route is not read: 404 for any content, even one never finished', kTimeout, async () => {
  for (const payload of ['not json at all', '['.repeat(1_000_000), '{"__proto__":{}}']) {
    const r = await send('/no/such/route', payload, 'application/json', false)
    assert.deepEqual(r, { status: 404, code: 'NOT_FOUND' })
  }
  const addr = await svc.app.listen({ host: '127.0.0.1', port: 0 })
  const { connect } = await import('node:net')
  const url = new URL(addr)
  const socket = connect(Number(url.port), url.hostname)
  // Declares 16 MiB, sends a few bytes, then waits: the 404 comes anyway.
  socket.write('POST /nope HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 16777216\r\n\r\n[[[[')
  const answer = await new Promise<string>((resolve) => {
    let got = ''
    socket.setEncoding('utf8').on('data', (d: string) => { got += d; if (got.includes('NOT_FOUND')) resolve(got) })
  })
  socket.destroy()
  assert.match(answer, /^HTTP\/1\.1 404 /)
  await stillAnswers()
})

test('the sign-in route, open to anyone, refuses a body past 16 KiB with 413 before reading it', kTimeout, async () => {
  const big = JSON.stringify({ username: 'x', password: 'p'.repeat(kSignInBodyLimit) })
  assert.deepEqual(await send('/dashboard/api/session', big, 'application/json', false), { status: 413, code: 'PAYLOAD_TOO_LARGE' })
  // The longest valid sign-in fits: 64 and 1,024 characters, each as a JSON escape.
  const longest = `{"username":"${'\\u00e9'.repeat(64)}","password":"${'\\ud83d\\ude00'.repeat(512)}"}`
  assert.ok(Buffer.byteLength(longest) <= kSignInBodyLimit)
  const r = await send('/dashboard/api/session', longest, 'application/json', false)
  assert.equal(r.status, 401, JSON.stringify(r))
})

test('a JSON body holding bytes that are not UTF-8 is refused as such, and nothing of it is recorded', kTimeout, async () => {
  const key = await svc.makeKey(['verdict', 'verdict_bulk', 'mgmt'], { tenant: 'not-utf8' })
  const post = async (url: string, payload: Buffer): Promise<{ status: number, body: Record<string, any> }> => {
    const res = await svc.app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json', 'x-api-key': key }, payload })
    return { status: res.statusCode, body: res.json() as Record<string, any> }
  }
  const latin1 = Buffer.concat([Buffer.from('{"indicators":[{"value":"caf'), Buffer.from([0xe9]), Buffer.from('.example"}]}')])
  const cut = Buffer.concat([Buffer.from('{"indicator":{"value":"a'), Buffer.from([0xe2, 0x82]), Buffer.from('.example"}}')])
  const overlong = Buffer.concat([Buffer.from('{"indicator":{"value":"'), Buffer.from([0xc0, 0xae]), Buffer.from('example.com"}}')])
  for (const [url, body] of [['/api/v2/ioc/verdict/bulk', latin1], ['/api/v2/ioc/verdict', cut], ['/api/v2/ioc/verdict', overlong]] as const) {
    const r = await post(url, body)
    assert.equal(r.status, 400, `${url}: ${JSON.stringify(r.body)}`)
    assert.equal(r.body.code, 'INVALID_REQUEST')
    assert.equal(r.body.message, 'body is not valid UTF-8')
  }
  // UTF-8 proper, with and without a byte order mark, is read as sent.
  const ok = await post('/api/v2/ioc/verdict', Buffer.from('\ufeff{"indicator":{"value":"café.example"}}'))
  assert.equal(ok.status, 200)
  assert.equal(ok.body.indicator.value, 'café.example')
  await onlyRecorded(key, ['café.example'])
})

test('a MessagePack string holding bytes that are not UTF-8 is refused as such; UTF-8 proper is read as sent', kTimeout, async () => {
  const key = await svc.makeKey(['verdict', 'verdict_bulk', 'mgmt'], { tenant: 'msgpack-not-utf8' })
  const packr = new Packr({ useRecords: false })
  const post = async (url: string, payload: Buffer): Promise<{ status: number, body: Record<string, any> }> => {
    const res = await svc.app.inject({ method: 'POST', url, headers: { 'content-type': 'application/msgpack', 'x-api-key': key }, payload })
    return { status: res.statusCode, body: res.json() as Record<string, any> }
  }
  /** A body whose marker string's X bytes are replaced by `bytes` (of the same length). */
  const withBytes = (body: object, marker: string, bytes: number[]): Buffer => {
    const buf = Buffer.from(packr.pack(body))
    const at = buf.indexOf(marker)
    assert.ok(at >= 0)
    Buffer.from(bytes).copy(buf, at)
    return buf
  }
  const cases = [
    ['/api/v2/ioc/verdict', withBytes({ indicator: { value: 'abXc.example' } }, 'X', [0xff])],
    ['/api/v2/ioc/verdict/bulk', withBytes({ indicators: [{ value: '1.2.3.4' }, { value: 'XXX.example' }] }, 'XXX', [0xed, 0xa0, 0x80])],
    ['/api/v2/ioc/verdict/bulk', withBytes({ indicators: [{ value: '1.2.3.4', action_taken: 'XX' }] }, 'XX', [0xc3, 0x28])]
  ] as const
  for (const [url, body] of cases) {
    const r = await post(url, body)
    assert.equal(r.status, 400, JSON.stringify(r.body))
    assert.equal(r.body.code, 'INVALID_REQUEST')
    assert.match(r.body.message, /not valid UTF-8/)
  }
  const ok = await post('/api/v2/ioc/verdict', Buffer.from(packr.pack({ indicator: { value: 'café.example' } })))
  assert.equal(ok.status, 200)
  assert.equal(ok.body.indicator.value, 'café.example')
  await onlyRecorded(key, ['café.example'])
})
