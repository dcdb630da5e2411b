/**
 * The connection drain (src/http/connection-drain.ts) on a plain HTTP server at 127.0.0.1: notice to open connections,
 * uploads still arriving after it cut, running requests answered, and unread answers cut after the grace, so the
 * server's close always completes.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { connect, type AddressInfo, type Socket } from 'node:net'
import { test, type TestContext } from 'node:test'
import { ConnectionDrain, type DrainOptions } from '../../src/http/connection-drain.ts'

type Handler = (req: IncomingMessage, res: ServerResponse) => void

/** A server whose every response the drain tracks; `handler` answers. */
async function serve (t: TestContext, options: DrainOptions, handler: Handler): Promise<{ server: Server, drain: ConnectionDrain, port: number }> {
  const server = createServer((req, res) => {
    drain.track(res)
    handler(req, res)
  })
  const drain = new ConnectionDrain(server, options)
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => { server.closeAllConnections(); server.close() })
  return { server, drain, port: (server.address() as AddressInfo).port }
}

/** A raw connection; `text` collects what the server sends. */
async function client (port: number): Promise<{ socket: Socket, text: () => string, closed: Promise<void> }> {
  const socket = connect(port, '127.0.0.1')
  await once(socket, 'connect')
  let received = ''
  socket.on('data', (b: Buffer) => { received += b.toString('latin1') })
  socket.on('error', () => {})
  return { socket, text: () => received, closed: once(socket, 'close').then(() => {}) }
}

/** A connection that asked for `/` and read the first bytes of its answer, then stopped reading. */
async function unreadAnswer (port: number): Promise<Awaited<ReturnType<typeof client>>> {
  const c = await client(port)
  c.socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n')
  c.socket.pause()
  while (c.text() === '') {
    c.socket.resume()
    await once(c.socket, 'data')
    c.socket.pause()
  }
  return c
}

/** Waits until `ok()` holds (its response closes a tick after it is delivered), failing with `what` after 10 s. */
async function until (ok: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000
  while (!ok()) {
    if (Date.now() > deadline) assert.fail(what)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/** Stops the server as Fastify's close does: the drain (preClose), then close, which resolves once connections end. */
async function shutDown (server: Server, drain: ConnectionDrain): Promise<void> {
  await drain.drain()
  await new Promise<void>((resolve) => server.close(() => resolve()))
}

test('with no connection open the drain does not wait for the notice, and the server closes', async (t) => {
  const { server, drain } = await serve(t, { noticeMs: 10 * 60_000, unreadGraceMs: 10 * 60_000 }, (_req, res) => { res.end('ok') })
  await shutDown(server, drain)
  assert.equal(drain.draining, true)
})

test('during the notice a request on an open connection is answered, and knows the server is draining', async (t) => {
  let sawDraining: boolean | null = null
  const { server, drain, port } = await serve(t, { noticeMs: 300, unreadGraceMs: 50 }, (_req, res) => {
    sawDraining = drain.draining
    res.setHeader('connection', 'close')
    res.end('ok')
  })
  const c = await client(port)
  const stopping = shutDown(server, drain)
  c.socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n')
  await c.closed
  await stopping
  assert.match(c.text(), /^HTTP\/1.1 200 OK/)
  assert.equal(sawDraining, true)
})

test('after the notice an upload still arriving is cut, a running request is answered, and the server closes', async (t) => {
  let finish: () => void = () => {}
  const running = new Promise<void>((resolve) => { finish = resolve })
  let arrived = 0
  let bothArrived: () => void = () => {}
  const both = new Promise<void>((resolve) => { bothArrived = resolve })
  const { server, drain, port } = await serve(t, { noticeMs: 20, unreadGraceMs: 50 }, (req, res) => {
    if (req.url === '/slow') void running.then(() => res.end('done'))
    else req.resume().on('end', () => res.end('uploaded'))
    if (++arrived === 2) bothArrived()
  })
  const upload = await client(port)
  upload.socket.write('POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n' + 'x'.repeat(10))
  const slow = await client(port)
  slow.socket.write('GET /slow HTTP/1.1\r\nHost: x\r\n\r\n')
  await both
  const stopping = shutDown(server, drain)
  await upload.closed
  assert.equal(upload.text(), '', 'the upload was cut, unanswered')
  assert.equal(slow.socket.destroyed, false, 'the running request is still being served')
  finish()
  await slow.closed
  await stopping
  assert.match(slow.text(), /\r\n\r\n(4\r\n)?done/)
})

test('a client that does not read its answer is cut after the grace, so the server\'s close completes', async (t) => {
  const { server, drain, port } = await serve(t, { noticeMs: 20, unreadGraceMs: 50 }, (_req, res) => { res.end(Buffer.alloc(32 * 1024 * 1024)) })
  const c = await unreadAnswer(port)
  // The server's close resolves only once every connection has ended: the unread one was cut.
  await shutDown(server, drain)
  assert.ok(c.text().length < 32 * 1024 * 1024, 'the answer was not all delivered')
  c.socket.destroy()
})

test('an answer ended before the server closes, to a client slow to read it, is delivered whole within the grace', async (t) => {
  const size = 32 * 1024 * 1024
  const { server, drain, port } = await serve(t, { noticeMs: 20, unreadGraceMs: 60_000 }, (req, res) => { res.end(req.url === '/small' ? 'ok' : Buffer.alloc(size)) })
  // A keep-alive connection left idle after its answer (kept open well past the test, but for the drain): the server's
  // close may end it once the slow answer is delivered.
  server.keepAliveTimeout = 10 * 60_000
  const idle = await client(port)
  idle.socket.write('GET /small HTTP/1.1\r\nHost: x\r\n\r\n')
  await until(() => idle.text().endsWith('ok'), 'the idle connection answered')
  const c = await unreadAnswer(port)
  const stopping = shutDown(server, drain)
  // Past the notice and into the server's close, whose idle close would have cut this connection; then read.
  await until(() => !server.listening, 'the server stopped listening')
  c.socket.resume()
  const body = (): number => c.text().length - (c.text().indexOf('\r\n\r\n') + 4)
  await Promise.race([until(() => body() >= size, 'the whole answer read'), c.closed])
  assert.match(c.text(), /^HTTP\/1.1 200 OK/)
  assert.equal(body(), size, 'the whole answer was delivered')
  // Delivered, the connections were let go at once, the idle one too: the close does not wait for the grace (60 s).
  let timer: NodeJS.Timeout | undefined
  const waited = new Promise<string>((resolve) => { timer = setTimeout(() => resolve('still closing after 30 s'), 30_000) })
  assert.equal(await Promise.race([stopping.then(() => 'closed'), waited]), 'closed')
  clearTimeout(timer)
  await Promise.all([idle.closed, c.closed])
})

test('responses are followed until their connection delivers them, finishing in any order', async (t) => {
  const finish = new Map<string, () => void>()
  let arrived: () => void = () => {}
  let waiting = 0
  const { server, drain, port } = await serve(t, { noticeMs: 20, unreadGraceMs: 50 }, (req, res) => {
    finish.set(req.url ?? '', () => { res.end('done') })
    if (++waiting === 4) arrived()
  })
  const all = new Promise<void>((resolve) => { arrived = resolve })
  const clients = await Promise.all(['/a', '/b', '/c', '/d'].map(async (path) => {
    const c = await client(port)
    c.socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`)
    return c
  }))
  await all
  assert.equal(drain.following, 4)
  // The list is newest first: take one from its middle, then its head, then its tail, then the last.
  const expected = [3, 2, 1, 0]
  for (const [i, path] of ['/b', '/d', '/a', '/c'].entries()) {
    finish.get(path)?.()
    await until(() => drain.following === expected[i], `${expected[i]} followed after ${path}, not ${drain.following}`)
  }
  for (const c of clients) assert.match(c.text(), /^HTTP\/1.1 200 OK[\s\S]*done$/)
  // A new response is followed again after the list emptied; the server still drains and closes.
  const again = await client(port)
  again.socket.write('GET /e HTTP/1.1\r\nHost: x\r\n\r\n')
  await until(() => drain.following === 1, 'the new response followed')
  finish.get('/e')?.()
  await shutDown(server, drain)
  assert.equal(drain.following, 0)
})
