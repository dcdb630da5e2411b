/**
 * Dashboard sign-in limits over HTTP (docs/OPERATIONS.md "Dashboard sign-in limits"): parallel guesses are counted
 * before they are checked, an attacker's failures lock his own address and not the user's (behind a trusted proxy,
 * by X-Forwarded-For), an address spraying usernames is stopped, and over HTTPS the session cookie is `__Host-`.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { build, buildForFile } from '../helper.ts'

type Json = Record<string, any>

const svc = buildForFile({ IOC_TRUST_PROXY: '127.0.0.1' })
const kPassword = 'a long analyst password'
let n = 0

async function user (): Promise<string> {
  const name = `limits${n++}`
  await svc.store.accounts.createUser({ tenant: 'limits', username: name, password: kPassword })
  return name
}

async function signIn (username: string, password: string, from: string, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return await svc.app.inject({ method: 'POST', url: '/dashboard/api/session', headers: { 'x-forwarded-for': from, ...headers }, payload: { username, password } })
}

function count (answers: LightMyRequestResponse[], status: number): number {
  return answers.filter((r) => r.statusCode === status).length
}

test('160 parallel wrong passwords are counted before they are checked: five are checked, the rest get 429', async () => {
  const name = await user()
  const answers = await Promise.all(Array.from({ length: 160 }, async (_, i) => await signIn(name, `wrong password ${i}`, '203.0.113.1')))
  assert.equal(count(answers, 401), 5)
  assert.equal(count(answers, 429), 155)
  assert.ok(answers.every((r) => r.statusCode === 401 || r.json().code === 'RATE_LIMITED'))
})

test('a burst of 60 wrong passwords and then the right one does not sign in', async () => {
  const name = await user()
  const burst = await Promise.all(Array.from({ length: 60 }, async (_, i) => await signIn(name, `guess ${i}`, '203.0.113.2')))
  assert.equal(count(burst, 401), 5)
  const right = await signIn(name, kPassword, '203.0.113.2')
  assert.equal(right.statusCode, 429)
  assert.equal(right.headers['set-cookie'], undefined)
})

test('an attacker\'s failures lock his address, not the user: she signs in from hers, and his wait starts at a minute', async () => {
  const name = await user()
  for (let i = 0; i < 5; i++) assert.equal((await signIn(name, 'not her password', '203.0.113.3')).statusCode, 401)
  const locked = await signIn(name, kPassword, '203.0.113.3')
  assert.equal(locked.statusCode, 429)
  assert.equal(locked.json().code, 'RATE_LIMITED')
  const wait = Number(locked.headers['retry-after'])
  assert.ok(wait > 0 && wait <= 60, `Retry-After ${wait}`)
  assert.equal(locked.json().message, `too many failed sign-ins; try again in ${wait} seconds`, 'the page shows the wait it is told')
  const hers = await signIn(name, kPassword, '198.51.100.20')
  assert.equal(hers.statusCode, 200, hers.body)
})

test('one address trying many usernames is stopped after thirty failures, whatever the next username', async () => {
  for (let i = 0; i < 30; i++) assert.equal((await signIn(`sprayed${i}`, 'password123456', '203.0.113.4')).statusCode, 401)
  const next = await signIn(await user(), kPassword, '203.0.113.4')
  assert.equal(next.statusCode, 429)
  assert.ok(Number(next.headers['retry-after']) > 0)
})

test('over HTTPS (a trusted proxy\'s X-Forwarded-Proto) the session cookie is __Host- prefixed and Secure; a plain one is not read', async () => {
  const name = await user()
  const res = await signIn(name, kPassword, '198.51.100.21', { 'x-forwarded-proto': 'https' })
  assert.equal(res.statusCode, 200)
  const set = String(res.headers['set-cookie'])
  assert.match(set, /^__Host-iocv_session=[A-Za-z0-9_-]{43}; /)
  assert.match(set, /; Secure/)
  assert.match(set, /; Path=\//)
  assert.match(set, /; HttpOnly/)
  assert.doesNotMatch(set, /Domain=/i)
  const id = /^__Host-iocv_session=([^;]+)/.exec(set)?.[1] as string
  const https = { 'x-forwarded-for': '198.51.100.21', 'x-forwarded-proto': 'https' }
  const mine = await svc.app.inject({ url: '/dashboard/api/session', headers: { ...https, cookie: `__Host-iocv_session=${id}` } })
  assert.equal(mine.statusCode, 200)
  assert.equal((mine.json() as Json).username, name)
  // Over HTTPS a cookie without the prefix (which a plain-HTTP page or a sibling host could have set) names no session.
  const tossed = await svc.app.inject({ url: '/api/v2/mgmt/usage', headers: { ...https, cookie: `iocv_session=${id}` } })
  assert.equal(tossed.statusCode, 401)
  const out = await svc.app.inject({ method: 'DELETE', url: '/dashboard/api/session', headers: { ...https, cookie: `__Host-iocv_session=${id}`, 'x-csrf-token': (res.json() as Json).csrf } })
  assert.equal(out.statusCode, 200)
  assert.match(String(out.headers['set-cookie']), /^__Host-iocv_session=;.*Secure/)
})

test('without IOC_TRUST_PROXY, X-Forwarded-For and X-Forwarded-Proto are not believed', async (t) => {
  const plain = await build(t)
  await plain.store.accounts.createUser({ tenant: 'limits', username: 'plainuser', password: kPassword })
  const res = await plain.app.inject({ method: 'POST', url: '/dashboard/api/session', headers: { 'x-forwarded-for': '198.51.100.30', 'x-forwarded-proto': 'https' }, payload: { username: 'plainuser', password: kPassword } })
  assert.equal(res.statusCode, 200)
  assert.match(String(res.headers['set-cookie']), /^iocv_session=/)
  assert.doesNotMatch(String(res.headers['set-cookie']), /Secure/)
  // Failures from "other" forwarded addresses all count against the one real peer.
  for (let i = 0; i < 5; i++) {
    await plain.app.inject({ method: 'POST', url: '/dashboard/api/session', headers: { 'x-forwarded-for': `203.0.113.${100 + i}` }, payload: { username: 'plainuser', password: 'wrong password' } })
  }
  const locked = await plain.app.inject({ method: 'POST', url: '/dashboard/api/session', headers: { 'x-forwarded-for': '198.51.100.31' }, payload: { username: 'plainuser', password: kPassword } })
  assert.equal(locked.statusCode, 429)
})
