/**
 * Baseline servers for the capacity bench, each run in its own process on 127.0.0.1 (port 0; prints
 * `listening on http://...` on stderr):
 *
 *   node --import tsx bench/baseline-servers.ts floor   # the HTTP + parsing floor
 *   node --import tsx bench/baseline-servers.ts hello   # Fastify's hello-world
 *
 * floor: a plain node:http server that reads each POST body and parses it as the service would (JSON.parse, or a
 * msgpack decode for application/msgpack bodies) and answers precomputed bytes. The bench first stores, per path and
 * format, the very bytes the service answered to the same request (`PUT /__answer` with headers x-path and
 * content-type), so the floor sends answers of the same size: what any Node service must spend to take this request
 * and send this answer, without scoring, auth, quota or history.
 */
import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import Fastify from 'fastify'
import { Unpackr } from 'msgpackr'

const kMode = process.argv[2]

async function readBody (req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

if (kMode === 'floor') {
  const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true })
  const answers = new Map<string, { body: Buffer, type: string }>()
  const server = createServer((req, res) => {
    readBody(req).then((body) => {
      const type = String(req.headers['content-type'] ?? 'application/json')
      if (req.method === 'PUT' && req.url === '/__answer') {
        answers.set(`${String(req.headers['x-path'])} ${type}`, { body, type })
        res.writeHead(204).end()
        return
      }
      const parsed: unknown = type.includes('msgpack') ? unpackr.unpack(body) : JSON.parse(body.toString('utf8'))
      const accept = String(req.headers.accept ?? 'application/json')
      const answer = answers.get(`${req.url ?? ''} ${accept}`)
      if (parsed === null || answer === undefined) {
        res.writeHead(404).end()
        return
      }
      res.writeHead(200, { 'content-type': answer.type, 'content-length': answer.body.length }).end(answer.body)
    }).catch(() => { res.writeHead(400).end() })
  })
  server.listen(0, '127.0.0.1', () => {
    process.stderr.write(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}\n`)
  })
  process.once('SIGTERM', () => { server.close(); server.closeAllConnections() })
} else if (kMode === 'hello') {
  const app = Fastify({ logger: false })
  app.get('/', async () => ({ hello: 'world' }))
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  process.stderr.write(`listening on ${url}\n`)
  process.once('SIGTERM', () => { void app.close() })
} else {
  process.stderr.write('usage: baseline-servers.ts floor|hello\n')
  process.exit(2)
}
