/**
 * Graceful close with keep-alive clients: requests that arrive while the service closes get 503 OVERLOADED with
 * `Connection: close`, or are served; none is reset (a request sent on a connection the server closed under it).
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { connect, type Socket } from 'node:net'
import { test } from 'node:test'
import { Agent, request } from 'undici'
import { build } from '../helper.ts'

test('keep-alive clients sending while the service closes get answers (200 or 503 with Connection: close), never a reset', async (t) => {
  const b = await build(t)
  const base = await b.app.listen({ host: '127.0.0.1', port: 0 })
  const agent = new Agent({ connections: 4, keepAliveTimeout: 60_000 })
  t.after(async () => await agent.destroy().catch(() => {}))
  const statuses = new Map<string, number>()
  const failures: string[] = []
  let served = 0
  let closing: Promise<void> | null = null
  const loop = async (k: number): Promise<void> => {
    for (let i = 0; ; i++) {
      let res
      try {
        res = await request(`${base}/api/v2/ioc/verdict`, {
          method: 'POST',
          dispatcher: agent,
          headers: { 'content-type': 'application/json', 'x-api-key': b.key },
          body: JSON.stringify({ indicator: { value: `192.0.2.${(k * 50 + i) % 256}` } })
        })
      } catch (err) {
        const code = (err as { code?: string }).code ?? 'error'
        // Once the server stopped listening, a new connection is refused: that is not a reset of a request.
        if (code !== 'ECONNREFUSED') failures.push(code)
        return
      }
      const body = await res.body.json() as { code?: string }
      statuses.set(String(res.statusCode), (statuses.get(String(res.statusCode)) ?? 0) + 1)
      if (res.statusCode === 200) {
        served++
        if (served === 40) closing = b.app.close()
        continue
      }
      assert.equal(res.statusCode, 503)
      assert.equal(body.code, 'OVERLOADED')
      assert.equal(res.headers.connection, 'close')
      return
    }
  }
  await Promise.all([0, 1, 2, 3].map(loop))
  await closing
  assert.deepEqual(failures, [], `statuses ${JSON.stringify([...statuses])}`)
  assert.ok((statuses.get('503') ?? 0) > 0, 'requests during the close were told to go away')
})

test('clients that drop their answers halfway do not hold the close: connections are cut once all is answered', { timeout: 40_000 }, async (t) => {
  // Without the cut, the close waits for the keep-alive timeout (65 s by default): over this test's timeout.
  const b = await build(t, { IOC_POOL_SIZE: '2' })
  const base = await b.app.listen({ host: '127.0.0.1', port: 0 })
  const bulk = async (j: number, drop: boolean): Promise<void> => {
    const res = await request(`${base}/api/v2/ioc/verdict/bulk`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': b.key },
      body: JSON.stringify({ indicators: Array.from({ length: 4000 }, (_, i) => ({ value: `172.${16 + j}.${i >> 8}.${i & 255}` })) })
    })
    assert.equal(res.statusCode, 200)
    if (drop) res.body.destroy()
    else assert.equal(((await res.body.json()) as { results: unknown[] }).results.length, 4000)
  }
  // Concurrent answers first (so the dropped ones queue behind them), then clients that read the head and go away.
  await Promise.all([0, 1, 2, 3].map(async (j) => { await bulk(j, false) }))
  await Promise.all([4, 5, 6, 7].map(async (j) => { await bulk(j, true) }))
  await b.app.close()
})

test('a client still trickling its request body does not hold the close: it is cut, the others are answered', { timeout: 40_000 }, async (t) => {
  // Without the cut, the close waits for the request timeout (30 s by default): near this test's timeout.
  const b = await build(t)
  const base = new URL(await b.app.listen({ host: '127.0.0.1', port: 0 }))
  const body = JSON.stringify({ indicator: { value: '192.0.2.77' } })
  const socket = connect(Number(base.port), base.hostname)
  await once(socket, 'connect')
  socket.on('error', () => {})
  socket.write(`POST /api/v2/ioc/verdict HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\nx-api-key: ${b.key}\r\ncontent-length: ${body.length}\r\n\r\n`)
  let sent = 0
  const trickle = setInterval(() => { if (sent < body.length && !socket.destroyed) socket.write(body[sent++] as string) }, 200)
  t.after(() => { clearInterval(trickle); socket.destroy() })
  await new Promise((resolve) => setTimeout(resolve, 500))
  const answered = await request(`${base.origin}/api/v2/ioc/verdict`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': b.key }, body })
  assert.equal(answered.statusCode, 200)
  await answered.body.dump()
  const started = Date.now()
  const closed = new Promise((resolve) => { socket.once('close', resolve) }) // 'close' follows a reset too; once() would reject on its 'error'
  await b.app.close()
  await closed
  assert.ok(sent < body.length, 'the upload was still going when the close ended')
  assert.ok(Date.now() - started < 15_000, `the close took ${Date.now() - started} ms`)
})

test('a client that never reads a large answer is cut after IOC_SEND_TIMEOUT_MS, and others are served meanwhile', { timeout: 120_000 }, async (t) => {
  const b = await build(t, { IOC_SEND_TIMEOUT_MS: '1000' })
  const base = new URL(await b.app.listen({ host: '127.0.0.1', port: 0 }))
  // The server's side of the first connection (this test's socket): the test waits for the service to cut it rather
  // than for a fixed time, so neither a slow machine (the answer still being scored) nor the kernel's socket buffer
  // sizes decide the outcome.
  const serverSide = new Promise<Socket>((resolve) => { b.app.server.once('connection', resolve) })
  // About 6 MB of answer: far more than the socket buffers hold, so the server's write stalls.
  const body = JSON.stringify({
    indicators: Array.from({ length: 10_000 }, (_, i) => ({ value: `10.${i >> 16}.${(i >> 8) & 255}.${i & 255}` })),
    signal_details: 'all',
    evidence_details: 'full'
  })
  const socket = connect(Number(base.port), base.hostname)
  socket.on('error', () => {})
  const closed = new Promise((resolve) => { socket.once('close', resolve) }) // 'close' follows a reset too; once() would reject on its 'error'
  t.after(() => { socket.destroy() })
  await once(socket, 'connect')
  const cut = once(await serverSide, 'close')
  socket.write(`POST /api/v2/ioc/verdict/bulk HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\nx-api-key: ${b.key}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
  // The socket is not read (no 'data' listener): Node stops reading it once its small buffer is full, and the
  // server's write stalls. Meanwhile other clients are served.
  const probe = await request(`${base.origin}/api/v2/ioc/health`)
  assert.equal(probe.statusCode, 200)
  await probe.body.dump()
  await cut
  // Reading now gets what was buffered before the cut, then the end: far less than the answer.
  const chunks: Buffer[] = []
  socket.on('data', (chunk: Buffer) => { chunks.push(chunk) })
  socket.resume()
  await closed
  const got = Buffer.concat(chunks)
  const head = got.subarray(0, got.indexOf('\r\n\r\n')).toString()
  assert.match(head, /^HTTP\/1\.1 200/, 'the answer had begun: the connection is not cut while the answer is being made')
  const length = Number(/content-length: (\d+)/i.exec(head)?.[1])
  const bodyBytes = got.length - head.length - 4
  assert.ok(length > 1_000_000 && bodyBytes < length, `${bodyBytes} of ${length} body bytes arrived: the connection was cut, not delivered`)
})

test('the send timeout runs only while an answer is delivered: a request that pauses longer mid-upload is answered', async (t) => {
  const b = await build(t, { IOC_SEND_TIMEOUT_MS: '1000' })
  const base = new URL(await b.app.listen({ host: '127.0.0.1', port: 0 }))
  const body = JSON.stringify({ indicators: [{ value: '192.0.2.1' }, { value: 'example.com' }] })
  const socket = connect(Number(base.port), base.hostname)
  socket.on('error', () => {})
  const chunks: Buffer[] = []
  socket.on('data', (chunk: Buffer) => { chunks.push(chunk) })
  const ended = new Promise((resolve) => { socket.once('close', resolve) })
  t.after(() => { socket.destroy() })
  await once(socket, 'connect')
  socket.write(`POST /api/v2/ioc/verdict/bulk HTTP/1.1\r\nHost: x\r\nconnection: close\r\ncontent-type: application/json\r\nx-api-key: ${b.key}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 10)}`)
  // Twice the send timeout with nothing moving: IOC_REQUEST_TIMEOUT_MS (30 s), not the send timeout, bounds an upload.
  await new Promise((resolve) => setTimeout(resolve, 2000))
  socket.write(body.slice(10))
  await ended
  assert.match(Buffer.concat(chunks).toString(), /^HTTP\/1\.1 200/)
})
