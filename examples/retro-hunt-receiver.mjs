// A receiver of ioc-verdict retro-hunt webhooks (docs/API.md "Retro-hunt webhooks"), Node.js with no dependency:
// verifies X-IOC-Signature (HMAC-SHA256 of "<X-IOC-Timestamp>.<raw body>" under the secret the webhook's creation
// answered), refuses timestamps more than 5 minutes off, drops delivery ids already seen (a retry of a delivery that
// did arrive), and prints each hit as one JSON line on stdout.
//
//   IOCV_WEBHOOK_SECRET=whsec_... PORT=8443 node examples/retro-hunt-receiver.mjs
//
// Put it behind TLS (the service sends to https:// URLs only unless IOC_WEBHOOK_ALLOW_PRIVATE=1).
import { createHmac, timingSafeEqual } from 'node:crypto'
import { createServer } from 'node:http'

const secret = process.env.IOCV_WEBHOOK_SECRET
if (!secret) {
  console.error('set IOCV_WEBHOOK_SECRET to the secret the webhook was created with')
  process.exit(2)
}
const kToleranceSeconds = 300
const seen = new Set()

function verified (headers, raw) {
  const ts = Number(headers['x-ioc-timestamp'])
  if (!Number.isInteger(ts) || Math.abs(Date.now() / 1000 - ts) > kToleranceSeconds) return false
  const expected = Buffer.from('sha256=' + createHmac('sha256', secret).update(`${ts}.`).update(raw).digest('hex'))
  const got = Buffer.from(String(headers['x-ioc-signature'] ?? ''))
  return got.length === expected.length && timingSafeEqual(got, expected)
}

const server = createServer((req, res) => {
  const chunks = []
  let size = 0
  req.on('data', (c) => {
    size += c.length
    if (size > 16 * 1024 * 1024) req.destroy()
    else chunks.push(c)
  })
  req.on('end', () => {
    const raw = Buffer.concat(chunks) // verify the bytes as received, before any parsing
    if (req.method !== 'POST' || !verified(req.headers, raw)) {
      res.statusCode = 401
      res.end()
      return
    }
    const body = JSON.parse(raw.toString('utf8'))
    if (!seen.has(body.delivery_id)) {
      seen.add(body.delivery_id)
      if (seen.size > 10000) seen.delete(seen.values().next().value)
      for (const hit of body.hits) console.log(JSON.stringify(hit))
    }
    res.statusCode = 204
    res.end()
  })
})
server.listen(Number(process.env.PORT ?? 8443), process.env.HOST ?? '127.0.0.1', () => {
  console.error(`listening on http://${process.env.HOST ?? '127.0.0.1'}:${server.address().port}`)
})
