/**
 * A flood of sign-ins with random usernames from many addresses (docs/OPERATIONS.md "Dashboard sign-in limits"):
 * password hashes run one at a time behind a bounded queue, so the flood gets 429 at once and never takes libuv's
 * thread pool from the history journal, whose writes every verdict waits for. Run in a process of its own: it floods
 * that process's pool.
 *
 * Outcomes only: 429s come back, and every verdict asked for during the flood is answered 200. (Before the queue, the
 * hashes filled the pool and verdicts got 503 OVERLOADED once their journal write passed the commit timeout.)
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { test } from 'node:test'
import { build } from '../helper.ts'

const kFlood = 600

test('a sign-in flood with random usernames gets 429s while verdicts with a valid key keep being answered 200', async (t) => {
  const svc = await build(t, { IOC_HISTORY_COMMIT_TIMEOUT_MS: '2000' })
  const key = await svc.makeKey(['verdict'])
  const flood = Array.from({ length: kFlood }, async (_, i) => await svc.app.inject({
    method: 'POST',
    url: '/dashboard/api/session',
    remoteAddress: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
    payload: { username: `u${randomBytes(6).toString('hex')}`, password: randomBytes(12).toString('base64url') }
  }))
  const verdicts: number[] = []
  const state = { floodDone: false }
  const all = Promise.all(flood).finally(() => { state.floodDone = true })
  // Verdicts one after another for as long as the flood's answers keep coming (at least five, at most 200).
  for (let i = 0; i < 200 && (i < 5 || !state.floodDone); i++) {
    const res = await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'x-api-key': key }, payload: { indicator: { value: `192.0.2.${i % 250}` } } })
    verdicts.push(res.statusCode)
  }
  const answers = await all
  assert.deepEqual(verdicts.filter((s) => s !== 200), [], `verdicts during the flood: ${verdicts.join(' ')}`)
  const limited = answers.filter((r) => r.statusCode === 429)
  assert.ok(limited.length > 0, 'the flood is turned away with 429')
  assert.ok(limited.every((r) => r.json().code === 'RATE_LIMITED' && Number(r.headers['retry-after']) >= 1))
  assert.ok(answers.every((r) => r.statusCode === 401 || r.statusCode === 429), 'every attempt is answered 401 or 429')
})
