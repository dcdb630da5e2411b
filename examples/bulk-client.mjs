// Scores indicators from a file (one per line) in bulks of up to 10,000 with undici, retrying 429 and 503 after the
// Retry-After the service sends, and prints one JSON line per indicator: value, score, category, first action.
//   IOCV_URL=http://127.0.0.1:8080 IOCV_KEY=iocv_... node bulk-client.mjs indicators.txt
import { readFile } from 'node:fs/promises'
import { setTimeout as sleep } from 'node:timers/promises'
import { request } from 'undici'

const url = process.env.IOCV_URL
const key = process.env.IOCV_KEY
if (!url || !key || !process.argv[2]) {
  console.error('usage: IOCV_URL=... IOCV_KEY=... node bulk-client.mjs FILE')
  process.exit(2)
}
const values = (await readFile(process.argv[2], 'utf8')).split('\n').map((l) => l.trim()).filter(Boolean)

async function bulk (indicators) {
  for (let attempt = 1; ; attempt++) {
    const res = await request(`${url}/api/v2/ioc/verdict/bulk`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify({ indicators, signal_details: 'top', source: { channel: 'siem', product: 'example' } })
    })
    const body = await res.body.json()
    if (res.statusCode === 200) return body
    if ((res.statusCode === 429 || res.statusCode === 503) && attempt < 5) {
      await sleep(1000 * Number(res.headers['retry-after'] ?? 1))
      continue
    }
    throw new Error(`bulk failed: ${res.statusCode} ${body.code}: ${body.message}`)
  }
}

for (let i = 0; i < values.length; i += 10_000) {
  const { results } = await bulk(values.slice(i, i + 10_000).map((value) => ({ value })))
  for (const r of results) {
    console.log(JSON.stringify({ value: r.indicator.value, score: r.risk?.score ?? null, category: r.risk?.category ?? null, action: r.recommended_actions[0]?.action ?? null, errors: r.errors ?? [] }))
  }
}
