/**
 * The edges of HTTP, over a real socket on 127.0.0.1: parser-level errors (431, 414, 408) carry the documented
 * error body; stalled clients are cut by the request timeout and do not keep health from answering; connections
 * beyond the bound are closed; keys in the query string are refused and never logged; a lone surrogate is echoed
 * escaped; a msgpack `__proto__` key is named as sent; a refusal by design is one log line, its causes as codes.
 */
import assert from 'node:assert/strict'
import { connect, type Socket } from 'node:net'
import fs, { mkdtempSync, rmSync } from 'node:fs'
import { syncBuiltinESMExports } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { test, type TestContext } from 'node:test'
import { request } from 'undici'
import { loadConfig } from '../../src/config.ts'
import { createLogger, startService } from '../../src/service.ts'
import { build, kTestIntelCache } from '../helper.ts'

interface Raw { status: number, headers: string, body: string, closed: boolean }

/** Opens a socket to the server. */
async function open (port: number): Promise<Socket> {
  const s = connect({ host: '127.0.0.1', port })
  await new Promise<void>((resolve, reject) => { s.once('connect', resolve); s.once('error', reject) })
  return s
}

/** Sends raw bytes and reads everything until the server closes the connection. */
async function rawExchange (port: number, data: string | Buffer, then?: (s: Socket) => void): Promise<Raw> {
  const s = await open(port)
  const chunks: Buffer[] = []
  s.on('data', (d: Buffer) => chunks.push(d))
  const closed = new Promise<void>((resolve) => { s.once('close', () => resolve()) })
  s.on('error', () => {})
  s.write(data)
  then?.(s)
  await closed
  const text = Buffer.concat(chunks).toString('utf8')
  const [head = '', body = ''] = text.split('\r\n\r\n')
  return { status: Number(/^HTTP\/1\.1 (\d+)/.exec(head)?.[1]), headers: head, body, closed: true }
}

/** A listening service with the given settings; closed after the test. */
async function listening (t: TestContext, env: Record<string, string> = {}): Promise<{ port: number, base: string, key: string }> {
  const b = await build(t, env)
  const base = await b.app.listen({ host: '127.0.0.1', port: 0 })
  return { port: Number(new URL(base).port), base, key: b.key }
}

/**
 * An inline-mode service whose log lines at `level` are collected in `lines`, with a key of tenant t1 (verdict only);
 * closed and its folder removed after the test.
 */
async function loggedService (t: TestContext, level: string): Promise<{ svc: Awaited<ReturnType<typeof startService>>, lines: string[], key: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-edges-'))
  const lines: string[] = []
  const sink = new Writable({ write (chunk: Buffer, _enc, cb) { lines.push(chunk.toString()); cb() } })
  const config = loadConfig({ IOC_DATA_DIR: dir, IOC_LOG_LEVEL: level, IOC_POOL_SIZE: '0', IOC_BOOTSTRAP_KEY: '0', IOC_INTEL_CACHE_DIR: kTestIntelCache })
  const svc = await startService(config, { logger: createLogger(config, sink) })
  t.after(async () => { await svc.app.close(); rmSync(dir, { recursive: true, force: true }) })
  const key = (await svc.store.createKey({ tenant: 't1', permissions: ['verdict'] })).key
  return { svc, lines, key }
}

test('headers larger than the limit get 431 with the documented body and code HEADERS_TOO_LARGE', async (t) => {
  const { port } = await listening(t)
  const r = await rawExchange(port, `GET /api/v2/ioc/health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(40_000)}\r\n\r\n`)
  assert.equal(r.status, 431)
  const body = JSON.parse(r.body) as Record<string, unknown>
  assert.deepEqual(Object.keys(body).sort(), ['code', 'error', 'message', 'statusCode'])
  assert.equal(body.code, 'HEADERS_TOO_LARGE')
  assert.equal(body.statusCode, 431)
  assert.match(r.headers, /connection: close/i)
  assert.match(r.headers, /x-content-type-options: nosniff/i)
})

test('a URL longer than the header limit gets 414 URI_TOO_LONG; one within it but past 8 KiB too', async (t) => {
  const { port, base } = await listening(t)
  const huge = await rawExchange(port, `GET /api/v2/ioc/health?x=${'a'.repeat(40_000)} HTTP/1.1\r\nHost: x\r\n\r\n`)
  assert.equal(huge.status, 414)
  assert.equal((JSON.parse(huge.body) as { code: string }).code, 'URI_TOO_LONG')
  const res = await request(`${base}/api/v2/ioc/health?x=${'a'.repeat(9_000)}`)
  assert.equal(res.statusCode, 414)
  assert.equal((await res.body.json() as { code: string }).code, 'URI_TOO_LONG')
})

test('malformed HTTP gets 400 INVALID_REQUEST with the documented body', async (t) => {
  const { port } = await listening(t)
  const r = await rawExchange(port, 'NOT HTTP AT ALL\r\n\r\n')
  assert.equal(r.status, 400)
  assert.equal((JSON.parse(r.body) as { code: string }).code, 'INVALID_REQUEST')
  // HTTP/1.1 without Host (RFC 9112 3.2): the documented body too; HTTP/1.0 needs none.
  const noHost = await rawExchange(port, 'GET /livez HTTP/1.1\r\nConnection: close\r\n\r\n')
  assert.equal(noHost.status, 400)
  assert.deepEqual(JSON.parse(noHost.body), { statusCode: 400, code: 'INVALID_REQUEST', error: 'Bad Request', message: 'the request has no Host header' })
  assert.equal((await rawExchange(port, 'GET /livez HTTP/1.0\r\n\r\n')).status, 200)
})

test('a body that stalls is cut with 408 REQUEST_TIMEOUT after the request timeout, and the connection closes', async (t) => {
  const { port, key } = await listening(t, { IOC_REQUEST_TIMEOUT_MS: '1000', IOC_HEADERS_TIMEOUT_MS: '500' })
  const r = await rawExchange(port, 'POST /api/v2/ioc/verdict/bulk HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
    `X-API-Key: ${key}\r\nContent-Length: 1000\r\n\r\n{"indicators":[`)
  assert.equal(r.status, 408)
  assert.equal((JSON.parse(r.body) as { code: string }).code, 'REQUEST_TIMEOUT')
})

test('headers that never end are cut by the headers timeout', async (t) => {
  const { port } = await listening(t, { IOC_REQUEST_TIMEOUT_MS: '2000', IOC_HEADERS_TIMEOUT_MS: '500' })
  const r = await rawExchange(port, 'GET /api/v2/ioc/health HTTP/1.1\r\nHost: x\r\n')
  assert.equal(r.status, 408)
  assert.equal((JSON.parse(r.body) as { code: string }).code, 'REQUEST_TIMEOUT')
})

test('health answers 200 while many connections stall mid-request, and the stalled ones are closed by the timeout', async (t) => {
  const { port, base, key } = await listening(t, { IOC_REQUEST_TIMEOUT_MS: '1500', IOC_HEADERS_TIMEOUT_MS: '1000' })
  const stalled: Array<Promise<void>> = []
  const sockets: Socket[] = []
  for (let i = 0; i < 200; i++) {
    const s = await open(port)
    s.on('error', () => {})
    s.resume() // reads (and drops) the 408 the server sends before it closes
    sockets.push(s)
    stalled.push(new Promise((resolve) => { s.once('close', () => resolve()) }))
    s.write(i % 2 === 0
      ? 'GET /api/v2/ioc/health HTTP/1.1\r\nHost: x\r\n' // headers that never end
      : `POST /api/v2/ioc/verdict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-API-Key: ${key}\r\nContent-Length: 100\r\n\r\n{`)
  }
  t.after(() => { for (const s of sockets) s.destroy() })
  const res = await request(`${base}/api/v2/ioc/health`)
  assert.equal(res.statusCode, 200)
  assert.equal((await res.body.json() as { status: string }).status, 'ok')
  await Promise.all(stalled) // each closed by the server (the test would time out otherwise)
})

test('one address\'s connections beyond IOC_MAX_CONNECTIONS_PER_ADDRESS are closed as they arrive; other addresses are served', async (t) => {
  const { port } = await listening(t, { IOC_MAX_CONNECTIONS_PER_ADDRESS: '3' })
  const from = async (localAddress: string): Promise<Socket> => {
    const s = connect({ host: '127.0.0.1', port, localAddress })
    await new Promise<void>((resolve, reject) => { s.once('connect', resolve); s.once('error', reject) })
    s.on('error', () => {})
    return s
  }
  /** The status of a health request on `s`, or NaN when the connection closes without an answer. */
  const health = async (s: Socket): Promise<number> => await new Promise((resolve) => {
    let got = ''
    s.on('data', (d: Buffer) => {
      got += d.toString('latin1')
      if (got.includes('\r\n\r\n')) resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(got)?.[1]))
    })
    s.on('close', () => resolve(Number.NaN))
    s.write('GET /livez HTTP/1.1\r\nHost: x\r\n\r\n')
  })
  const held: Socket[] = []
  t.after(() => { for (const s of held) s.destroy() })
  for (let i = 0; i < 3; i++) held.push(await from('127.0.0.1'))
  for (const s of held) assert.equal(await health(s), 200)
  const extra = await from('127.0.0.1')
  held.push(extra)
  assert.ok(Number.isNaN(await health(extra)), 'a fourth connection from the address is closed without an answer')
  // 127.0.0.2 is another loopback address: another client.
  const other = await from('127.0.0.2')
  held.push(other)
  assert.equal(await health(other), 200)
  // One of the first address's connections closes: it may open another.
  held[0]?.destroy()
  await new Promise((resolve) => setTimeout(resolve, 100))
  const again = await from('127.0.0.1')
  held.push(again)
  assert.equal(await health(again), 200)
})

test('a trusted reverse proxy\'s connections are not bounded per address: they carry every client', async (t) => {
  const { port } = await listening(t, { IOC_MAX_CONNECTIONS_PER_ADDRESS: '2', IOC_TRUST_PROXY: '127.0.0.3, 10.0.0.0/8' })
  const held: Socket[] = []
  t.after(() => { for (const s of held) s.destroy() })
  const statusFrom = async (localAddress: string): Promise<number> => {
    const s = connect({ host: '127.0.0.1', port, localAddress })
    held.push(s)
    s.on('error', () => {})
    return await new Promise((resolve) => {
      let got = ''
      s.on('data', (d: Buffer) => { got += d.toString('latin1'); if (got.includes('\r\n\r\n')) resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(got)?.[1])) })
      s.on('close', () => resolve(Number.NaN))
      s.on('connect', () => s.write('GET /livez HTTP/1.1\r\nHost: x\r\n\r\n'))
    })
  }
  for (let i = 0; i < 4; i++) assert.equal(await statusFrom('127.0.0.3'), 200, `proxy connection ${i + 1}`)
  assert.equal(await statusFrom('127.0.0.4'), 200)
  assert.equal(await statusFrom('127.0.0.4'), 200)
  assert.ok(Number.isNaN(await statusFrom('127.0.0.4')), 'a client that is not a proxy is bounded')
})

test('a connection that pipelines requests faster than it reads their answers is closed; a few pipelined are answered', async (t) => {
  const { port, base } = await listening(t)
  // Ten pipelined requests in one write: ten answers, in order.
  const all = async (data: string): Promise<string> => {
    const c = await open(port)
    let text = ''
    c.on('data', (d: Buffer) => { text += d.toString('latin1') })
    c.on('error', () => {})
    const ended = new Promise<void>((resolve) => c.once('close', () => resolve()))
    c.write(data)
    await ended
    return text
  }
  const few = await all('GET /livez HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(9) + 'GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
  assert.equal(few.split('HTTP/1.1 200 OK').length - 1, 10)
  // Two thousand GETs of the OpenAPI document in one write, unread: the connection is closed once 16 answers are
  // pending, and the server does not build the other 1,984.
  const s = await open(port)
  s.on('error', () => {})
  const closed = new Promise<void>((resolve) => s.once('close', () => resolve()))
  s.pause()
  s.write('GET /api/v2/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(2_000))
  await new Promise((resolve) => setTimeout(resolve, 500))
  let got = ''
  s.on('data', (d: Buffer) => { got += d.toString('latin1') })
  s.resume()
  await closed
  const answers = got.split('HTTP/1.1 200 OK').length - 1
  assert.ok(answers <= 16, `${answers} answers on the flooding connection`)
  const res = await request(`${base}/livez`)
  assert.equal(res.statusCode, 200)
  await res.body.dump()
})

test('connections beyond IOC_MAX_CONNECTIONS are closed as they arrive; the ones within are served', async (t) => {
  const { port, base } = await listening(t, { IOC_MAX_CONNECTIONS: '5' })
  const held: Socket[] = []
  for (let i = 0; i < 5; i++) {
    const s = await open(port)
    s.on('error', () => {})
    held.push(s)
  }
  t.after(() => { for (const s of held) s.destroy() })
  const extra = await rawExchange(port, 'GET /api/v2/ioc/health HTTP/1.1\r\nHost: x\r\n\r\n')
  assert.ok(Number.isNaN(extra.status), 'closed without an answer')
  for (const s of held) s.destroy()
  await new Promise((resolve) => setTimeout(resolve, 100))
  const res = await request(`${base}/api/v2/ioc/health`)
  assert.equal(res.statusCode, 200)
  await res.body.dump()
})

test('an API key in the query string is refused with 401 API_KEY_IN_QUERY and never reaches a log line', async (t) => {
  const { svc, lines, key } = await loggedService(t, 'info')
  for (const param of ['api_key', 'key', 'apikey', 'API_KEY']) {
    const res = await svc.app.inject({ method: 'POST', url: `/api/v2/ioc/verdict?${param}=${encodeURIComponent(key)}`, payload: { indicator: { value: '8.8.8.8' } } })
    assert.equal(res.statusCode, 401, param)
    const body = res.json() as { code: string, message: string }
    assert.equal(body.code, 'API_KEY_IN_QUERY')
    assert.match(body.message, /X-API-Key header/)
  }
  // Even with a valid header, a key in the URL is refused (it has leaked into URLs already).
  const both = await svc.app.inject({ method: 'GET', url: `/api/v2/ioc/health?key=${key}`, headers: { 'x-api-key': key } })
  assert.equal(both.statusCode, 401)
  // The retired route answers 404 to any call, and the key in its URL is not logged either.
  const retired = await svc.app.inject({ method: 'POST', url: `/api/v2/ioc/history?api_key=${encodeURIComponent(key)}` })
  assert.equal(retired.statusCode, 404)
  const ok = await svc.app.inject({ method: 'GET', url: '/api/v2/ioc/health?verbose=1' })
  assert.equal(ok.statusCode, 200)
  assert.ok(lines.length > 0, 'requests were logged')
  const secret = key.split('_').slice(2).join('_')
  for (const line of lines) {
    assert.ok(!line.includes(secret), `a log line holds the key: ${line}`)
    assert.ok(!line.includes('verbose=1'), `a log line holds a query string: ${line}`)
  }
  assert.ok(lines.some((l) => l.includes('?[redacted]')), 'URLs are logged without their query string')
})

test('a key in a bad URL, in a URL\'s user information or as the request id reaches neither a log line nor an answer', async (t) => {
  const { svc, lines, key } = await loggedService(t, 'debug')
  const secret = key.split('_').slice(2).join('_')
  const port = Number(new URL(await svc.app.listen({ host: '127.0.0.1', port: 0 })).port)
  // A bad percent-encoding in the path: Fastify's own error, answered with the documented body, the URL not echoed.
  const bad = await rawExchange(port, `POST /api/v2/ioc/verdict/%ZZ?api_key=${key} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`)
  assert.equal(bad.status, 400)
  assert.deepEqual(JSON.parse(bad.body), { statusCode: 400, code: 'INVALID_REQUEST', error: 'Bad Request', message: 'the URL is not valid' })
  // An absolute-form target with the key as its password (it authenticates nothing).
  const absolute = await rawExchange(port, `POST http://iocv:${key}@127.0.0.1/api/v2/ioc/verdict HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`)
  assert.equal(absolute.status, 401)
  // The key in the path, where an id was meant or pasted as a path: neither logged nor echoed in full.
  const inPath = await svc.app.inject({ method: 'DELETE', url: `/api/v2/mgmt/keys/${key}`, headers: { 'x-api-key': key } })
  assert.ok(inPath.statusCode >= 400 && inPath.statusCode < 500, inPath.body)
  const asPath = await svc.app.inject({ method: 'GET', url: `/${key}` })
  assert.equal(asPath.statusCode, 404)
  assert.ok(lines.some((l) => l.includes('"url":"/iocv_[redacted]"')), 'a key as the path is logged redacted')
  // Percent-encoded, whole or in part: found all the same.
  const [id = '', ...rest] = key.slice(5).split('_')
  const encoded = [`/%69ocv_${id}_${rest.join('_')}`, `/${key.replace(/[-_]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)}`,
    `/api/v2/mgmt/keys/${key.slice(0, 20)}%2D${key.slice(20)}`]
  const encodedAnswers = []
  for (const url of encoded) encodedAnswers.push((await svc.app.inject({ method: 'DELETE', url, headers: { 'x-api-key': key } })).body)
  // The key sent as the request id: a fresh id is used instead.
  const traced = await svc.app.inject({ method: 'GET', url: '/api/v2/ioc/health', headers: { 'x-request-id': key } })
  assert.equal(traced.statusCode, 200)
  assert.notEqual(traced.headers['x-request-id'], key)
  assert.equal(await svc.app.inject({ method: 'GET', url: '/api/v2/ioc/health', headers: { 'x-request-id': 'trace-1' } }).then((r) => r.headers['x-request-id']), 'trace-1')
  const secretTail = secret.slice(-20)
  for (const text of [bad.headers, bad.body, absolute.headers, absolute.body, inPath.body, asPath.body, ...encodedAnswers, ...lines]) {
    assert.ok(!text.includes(secret) && !text.includes(secretTail), `the key's secret in: ${text}`)
  }
  assert.ok(lines.some((l) => l.includes('"url":"http://[redacted]@127.0.0.1/api/v2/ioc/verdict"')), 'the user information is redacted')
  assert.ok(lines.some((l) => l.includes('"code":"INVALID_REQUEST"') && l.includes('request rejected')), 'the bad URL is logged by its code')
})

test('each request writes one access line at info, when answered, with its request, status and time; arrivals only at debug', async (t) => {
  for (const level of ['info', 'debug', 'warn']) {
    const { svc, lines, key } = await loggedService(t, level)
    lines.length = 0
    const ok = await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'x-api-key': key }, payload: { indicator: { value: '8.8.8.8' } } })
    assert.equal(ok.statusCode, 200)
    const missing = await svc.app.inject({ method: 'GET', url: '/api/v2/nowhere?q=1' })
    assert.equal(missing.statusCode, 404)
    const records = lines.flatMap((l) => l.split('\n')).filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>)
    const of = (id: string, msg: string): Array<Record<string, unknown>> => records.filter((r) => r.reqId === id && r.msg === msg)
    const okId = ok.headers['x-request-id'] as string
    const missingId = missing.headers['x-request-id'] as string
    if (level === 'warn') {
      assert.deepEqual(of(okId, 'request completed'), [], level)
      continue
    }
    const done = of(okId, 'request completed')
    assert.equal(done.length, 1, `${level}: one completion line`)
    const req = done[0]?.req as { method?: string, url?: string, remoteAddress?: string }
    assert.deepEqual([req.method, req.url, req.remoteAddress], ['POST', '/api/v2/ioc/verdict', '127.0.0.1'])
    assert.deepEqual(done[0]?.res, { statusCode: 200 })
    assert.equal(done[0]?.level, 30)
    assert.equal(typeof done[0]?.responseTime, 'number')
    assert.equal((of(missingId, 'request completed')[0]?.res as { statusCode?: number } | undefined)?.statusCode, 404)
    assert.equal((of(missingId, 'request completed')[0]?.req as { url?: string } | undefined)?.url, '/api/v2/nowhere?[redacted]')
    // The arrival line: only at debug, before the completion line.
    const arrived = of(okId, 'incoming request')
    assert.equal(arrived.length, level === 'debug' ? 1 : 0, `${level}: arrival lines`)
    if (level === 'debug') {
      assert.equal(arrived[0]?.level, 20)
      assert.ok(records.indexOf(arrived[0] as Record<string, unknown>) < records.indexOf(done[0] as Record<string, unknown>))
    }
  }
})

test('a lone surrogate in a bulk value is echoed escaped (\\ud800), not as replacement characters, on a scoring thread', async (t) => {
  const b = await build(t, { IOC_POOL_SIZE: '1' })
  const res = await b.app.inject({
    method: 'POST',
    url: '/api/v2/ioc/verdict/bulk',
    headers: { 'x-api-key': b.key, 'content-type': 'application/json' },
    payload: '{"indicators":[{"value":"a\\ud800b.example"},{"value":"8.8.8.8"}]}'
  })
  assert.equal(res.statusCode, 200)
  assert.ok(res.body.includes('"value":"a\\ud800b.example"'), res.body.slice(0, 600))
  assert.ok(!res.body.includes('\ufffd'))
  const parsed = res.json() as { results: Array<{ indicator: { value: string } }> }
  assert.equal(parsed.results[0]?.indicator.value, 'a\ud800b.example')
})

test('a msgpack body with a __proto__ key is refused with a message naming __proto__', async (t) => {
  const b = await build(t)
  const body = Buffer.concat([Buffer.from([0x81, 0xa9]), Buffer.from('__proto__'), Buffer.from([0x80])])
  const res = await b.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict/bulk', headers: { 'x-api-key': b.key, 'content-type': 'application/msgpack' }, payload: body })
  assert.equal(res.statusCode, 400)
  const err = res.json() as { code: string, message: string }
  assert.equal(err.code, 'INVALID_REQUEST')
  assert.match(err.message, /"__proto__"/)
})

test('a request the journal refuses (a full disk) is one warn line, with its causes as codes and no stack', async (t) => {
  const { svc, lines, key } = await loggedService(t, 'info')
  const writev = fs.writev
  const restore = (): void => { fs.writev = writev; syncBuiltinESMExports() }
  t.after(restore)
  fs.writev = ((_fd: number, _buffers: unknown, ...rest: unknown[]) => {
    const cb = rest.at(-1) as (err: NodeJS.ErrnoException | null, n?: number) => void
    setImmediate(() => cb(Object.assign(new Error('no space left on device, write'), { code: 'ENOSPC', errno: -28, syscall: 'write' })))
  }) as typeof fs.writev
  syncBuiltinESMExports()
  const refused = await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'x-api-key': key, 'x-request-id': 'full-disk-1' }, payload: { indicator: { value: 'refused.example' } } })
  restore()
  assert.equal(refused.statusCode, 503)
  assert.equal(refused.json().code, 'OVERLOADED')
  const mine = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.reqId === 'full-disk-1')
  const warned = mine.filter((l) => (l.level as number) >= 40)
  assert.equal(warned.length, 1, JSON.stringify(mine))
  const line = warned[0] as Record<string, unknown>
  assert.equal(line.msg, 'request refused')
  assert.equal(line.code, 'OVERLOADED')
  assert.deepEqual(line.causes, ['JOURNAL_REFUSED', 'ENOSPC'])
  assert.ok(!JSON.stringify(line).includes('stack'), 'no stack')
  // The disk has room again: answered, and a plain line per request as before.
  const ok = await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'x-api-key': key, 'x-request-id': 'full-disk-2' }, payload: { indicator: { value: 'refused.example' } } })
  assert.equal(ok.statusCode, 200)
  assert.deepEqual(lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.reqId === 'full-disk-2' && (l.level as number) >= 40), [])
})
