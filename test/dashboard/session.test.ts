/**
 * Dashboard sign-in, sessions on the management routes (tenant-scoped, CSRF-protected), the lookup and bulk calls
 * recorded with the session as requester, and sign-out, through app.inject.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { buildForFile } from '../helper.ts'

type Json = Record<string, any>

const svc = buildForFile()
const kPassword = 'a long analyst password'

function cookieOf (res: LightMyRequestResponse): string {
  const set = res.headers['set-cookie']
  const line = (Array.isArray(set) ? set : [set ?? '']).find((c) => c.startsWith('iocv_session=')) ?? ''
  return line.split(';')[0] as string
}

async function signIn (username: string, password = kPassword): Promise<{ res: LightMyRequestResponse, cookie: string, csrf: string }> {
  const res = await svc.app.inject({ method: 'POST', url: '/dashboard/api/session', payload: { username, password } })
  return { res, cookie: cookieOf(res), csrf: res.statusCode === 200 ? (res.json() as Json).csrf : '' }
}

let n = 0
async function user (tenant: string, role: 'analyst' | 'admin' = 'analyst'): Promise<string> {
  const name = `user${n++}.${tenant}`
  await svc.store.accounts.createUser({ tenant, username: name, role, password: kPassword })
  return name
}

test('signing in sets an HttpOnly, SameSite=Strict session cookie and answers the CSRF token; a wrong password says nothing more', async () => {
  const name = await user('dash-a')
  const { res, cookie, csrf } = await signIn(name)
  assert.equal(res.statusCode, 200)
  const set = String(res.headers['set-cookie'])
  assert.match(set, /HttpOnly/i)
  assert.match(set, /SameSite=Strict/i)
  assert.doesNotMatch(set, /Secure/, 'plain HTTP here; Secure is set behind TLS')
  assert.match(cookie, /^iocv_session=[A-Za-z0-9_-]{43}$/)
  assert.equal(typeof csrf, 'string')
  assert.deepEqual({ ...(res.json() as Json), csrf: '', expires_at: '' }, { username: name, tenant: 'dash-a', role: 'analyst', permissions: ['mgmt'], csrf: '', expires_at: '' })
  const wrong = await signIn(name, 'not the password at all')
  const unknown = await signIn('nobody.at.all', kPassword)
  for (const r of [wrong.res, unknown.res]) {
    assert.equal(r.statusCode, 401)
    assert.equal(r.json().code, 'INVALID_CREDENTIALS')
    assert.equal(r.json().message, 'username or password is wrong')
    assert.equal(r.headers['set-cookie'], undefined)
  }
})

test('failed sign-ins are rate limited per username and address', async () => {
  const name = await user('dash-rl')
  for (let i = 0; i < 5; i++) assert.equal((await signIn(name, 'wrong password here')).res.statusCode, 401)
  const limited = await signIn(name)
  assert.equal(limited.res.statusCode, 429)
  assert.equal(limited.res.json().code, 'RATE_LIMITED')
  assert.ok(Number(limited.res.headers['retry-after']) > 0)
})

test('a session reads its own tenant\'s history and usage, never another tenant\'s, and changes nothing without CSRF', async () => {
  const a = await signIn(await user('dash-t1', 'admin'))
  const b = await signIn(await user('dash-t2'))
  const lookup = await svc.app.inject({ method: 'POST', url: '/dashboard/api/lookup', headers: { cookie: a.cookie, 'x-csrf-token': a.csrf }, payload: { value: 'hxxp://malware-c2[.]example/x' } })
  assert.equal(lookup.statusCode, 200)
  const verdict = lookup.json() as Json
  assert.equal(verdict.indicator.normalized, 'malware-c2.example')
  assert.equal(verdict.meta.detail_levels.evidence_details, 'full')
  await svc.history.flush()
  const mine = (await svc.app.inject({ url: '/api/v2/mgmt/enrich-logs/search-history', headers: { cookie: a.cookie } })).json() as Json
  assert.equal(mine.results.length, 1)
  assert.deepEqual([mine.results[0].auth_type, mine.results[0].user_id, mine.results[0].tenant], ['session', a.res.json().username, 'dash-t1'])
  assert.ok(!JSON.stringify(mine).includes(a.cookie.split('=')[1] as string), 'no session id in history')
  const theirs = (await svc.app.inject({ url: '/api/v2/mgmt/enrich-logs/search-history', headers: { cookie: b.cookie } })).json() as Json
  assert.equal(theirs.results.length, 0, 'another tenant sees none of it')
  const usage = (await svc.app.inject({ url: '/api/v2/mgmt/usage', headers: { cookie: a.cookie } })).json() as Json
  assert.equal(usage.tenant, 'dash-t1')
  const noCsrf = await svc.app.inject({ method: 'POST', url: '/dashboard/api/lookup', headers: { cookie: a.cookie }, payload: { value: '1.1.1.1' } })
  assert.equal(noCsrf.statusCode, 403)
  assert.equal(noCsrf.json().code, 'CSRF_FAILED')
  const badCsrf = await svc.app.inject({ method: 'POST', url: '/api/v2/mgmt/intel/reload', headers: { cookie: a.cookie, 'x-csrf-token': b.csrf } })
  assert.equal(badCsrf.json().code, 'CSRF_FAILED')
  const analystReload = await svc.app.inject({ method: 'POST', url: '/api/v2/mgmt/intel/reload', headers: { cookie: b.cookie, 'x-csrf-token': b.csrf } })
  assert.equal(analystReload.json().code, 'PERMISSION_DENIED', 'an analyst may not reload intel')
})

test('verdict and key routes never accept a session', async () => {
  const a = await signIn(await user('dash-v', 'admin'))
  for (const [method, url, payload] of [['POST', '/api/v2/ioc/verdict', { indicator: { value: '1.1.1.1' } }], ['POST', '/api/v2/ioc/verdict/bulk', { indicators: [] }], ['GET', '/api/v2/mgmt/keys', undefined]] as const) {
    const res = await svc.app.inject({ method, url, headers: { cookie: a.cookie, 'x-csrf-token': a.csrf }, ...(payload === undefined ? {} : { payload }) })
    assert.equal(res.statusCode, 401, url)
    assert.equal(res.json().code, 'MISSING_API_KEY')
  }
})

test('the dashboard\'s own calls take a session only: an API key of any permission gets SESSION_EXPIRED there', async () => {
  const key = await svc.makeKey(['mgmt'], { tenant: 'dash-key' })
  const calls = [['POST', '/dashboard/api/lookup', { value: '8.8.8.8' }], ['POST', '/dashboard/api/bulk', { values: ['8.8.8.8'] }],
    ['GET', '/dashboard/api/capacity', undefined], ['DELETE', '/dashboard/api/session', undefined]] as const
  for (const k of [key, svc.key]) {
    for (const [method, url, payload] of calls) {
      const res = await svc.app.inject({ method, url, headers: { 'x-api-key': k }, ...(payload === undefined ? {} : { payload }) })
      assert.equal(res.statusCode, 401, `${url}: ${res.body}`)
      assert.equal(res.json().code, 'SESSION_EXPIRED', url)
    }
  }
  await svc.history.flush()
  const page = (await svc.app.inject({ url: '/api/v2/mgmt/enrich-logs/search-history', headers: { 'x-api-key': key } })).json() as Json
  assert.equal(page.results.length, 0, 'nothing scored or recorded')
})

test('the bulk call scores up to 10,000 values and records each with the session as requester', async () => {
  const a = await signIn(await user('dash-bulk'))
  const res = await svc.app.inject({ method: 'POST', url: '/dashboard/api/bulk', headers: { cookie: a.cookie, 'x-csrf-token': a.csrf }, payload: { values: ['8.8.8.8', 'bad value!', 'AS13335'] } })
  assert.equal(res.statusCode, 200)
  assert.equal((res.json() as Json).results.length, 3)
  await svc.history.flush()
  const page = (await svc.app.inject({ url: '/api/v2/mgmt/enrich-logs/search-history', headers: { cookie: a.cookie } })).json() as Json
  assert.equal(page.results.length, 3)
  assert.ok(page.results.every((r: Json) => r.auth_type === 'session' && typeof r.bulk_request_id === 'string'))
  const tooMany = await svc.app.inject({ method: 'POST', url: '/dashboard/api/bulk', headers: { cookie: a.cookie, 'x-csrf-token': a.csrf }, payload: { values: Array.from({ length: 10_001 }, () => '1.1.1.1') } })
  assert.equal(tooMany.statusCode, 400)
})

test('signing out ends the session in the store; the old cookie is refused with SESSION_EXPIRED', async () => {
  const name = await user('dash-out')
  const a = await signIn(name)
  assert.equal((await svc.app.inject({ url: '/dashboard/api/session', headers: { cookie: a.cookie } })).statusCode, 200)
  const out = await svc.app.inject({ method: 'DELETE', url: '/dashboard/api/session', headers: { cookie: a.cookie, 'x-csrf-token': a.csrf } })
  assert.equal(out.statusCode, 200)
  assert.match(String(out.headers['set-cookie']), /iocv_session=;/)
  const after = await svc.app.inject({ url: '/api/v2/mgmt/enrich-logs/search-history', headers: { cookie: a.cookie } })
  assert.equal(after.statusCode, 401)
  assert.equal(after.json().code, 'SESSION_EXPIRED')
  const disabledUser = await signIn(await user('dash-off'))
  await svc.store.accounts.disableUser(disabledUser.res.json().username)
  assert.equal((await svc.app.inject({ url: '/dashboard/api/session', headers: { cookie: disabledUser.cookie } })).statusCode, 401)
})

test('/ and /dashboard redirect to the dashboard, whose page forbids scripts and connections to any other host', async () => {
  for (const url of ['/', '/dashboard']) {
    const root = await svc.app.inject({ url })
    assert.equal(root.statusCode, 302, url)
    assert.equal(root.headers.location, '/dashboard/')
  }
  // Paths out of the page's files are files that are not there, whatever their spelling.
  for (const url of ['/dashboard/%2e%2e/%2e%2e/package.json', '/dashboard//evil.example', '/dashboard/%5cevil.example']) {
    const res = await svc.app.inject({ url })
    assert.equal(res.statusCode, 404, `${url}: ${res.body}`)
    assert.equal(res.json().code, 'NOT_FOUND')
  }
  const page = await svc.app.inject({ url: '/dashboard/' })
  assert.equal(page.statusCode, 200)
  assert.match(String(page.headers['content-security-policy']), /default-src 'self'.*connect-src 'self'/)
  assert.match(page.body, /<label for="username">Username<\/label>/)
  assert.doesNotMatch(page.body, /(src|href)="https?:/)
})
