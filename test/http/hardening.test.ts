/**
 * Answers that carry secrets or tokens are never cached, no answer is type-sniffed, and tenant allowlist entries that
 * would cover everything (the whole address space, a public suffix) are refused (docs/API.md).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { buildForFile } from '../helper.ts'

const svc = buildForFile()

function hardened (res: LightMyRequestResponse, what: string): void {
  assert.equal(res.headers['x-content-type-options'], 'nosniff', what)
  assert.equal(res.headers['cache-control'], 'no-store', what)
}

test('key creation, sign-in and the session answer say Cache-Control: no-store; every API answer says nosniff', async () => {
  const created = await svc.app.inject({ method: 'POST', url: '/api/v2/mgmt/keys', headers: { 'x-api-key': svc.key }, payload: { permissions: ['verdict'] } })
  assert.equal(created.statusCode, 201)
  hardened(created, 'key creation')
  await svc.store.accounts.createUser({ tenant: 't1', username: 'hardened', password: 'a long analyst password' })
  const signIn = await svc.app.inject({ method: 'POST', url: '/dashboard/api/session', payload: { username: 'hardened', password: 'a long analyst password' } })
  assert.equal(signIn.statusCode, 200)
  hardened(signIn, 'sign-in')
  const cookie = String(signIn.headers['set-cookie']).split(';')[0] as string
  hardened(await svc.app.inject({ url: '/dashboard/api/session', headers: { cookie } }), 'the session and its CSRF token')
  const answers: Array<[string, LightMyRequestResponse]> = [
    ['a verdict', await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'x-api-key': svc.key }, payload: { indicator: { value: '1.2.3.4' } } })],
    ['a key list', await svc.app.inject({ url: '/api/v2/mgmt/keys', headers: { 'x-api-key': svc.key } })],
    ['a 401', await svc.app.inject({ url: '/api/v2/mgmt/usage' })],
    ['a 400', await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'x-api-key': svc.key }, payload: {} })],
    ['a wrong password', await svc.app.inject({ method: 'POST', url: '/dashboard/api/session', payload: { username: 'hardened', password: 'not the password' } })]
  ]
  for (const [what, res] of answers) hardened(res, what)
  const unknown = await svc.app.inject({ url: '/no/such/page' })
  assert.equal(unknown.headers['x-content-type-options'], 'nosniff')
})

test('allowlist entries that cover everything are refused with 400 saying why', async () => {
  const post = async (kind: string, value: string): Promise<LightMyRequestResponse> =>
    await svc.app.inject({ method: 'POST', url: '/api/v2/mgmt/allowlist', headers: { 'x-api-key': svc.key }, payload: { kind, value, reason: 'test' } })
  for (const [kind, value, why] of [
    ['ip_block', '0.0.0.0/0', /address space/], ['ip_block', '::/0', /address space/], ['ip_block', '128.0.0.0/1', /address space/],
    ['ip_block', '10.0.0.0/7', /\/8 or narrower/], ['ip_block', '::ffff:0.0.0.0/96', /address space/], ['ip_block', '2000::/3', /\/16 or narrower/],
    ['domain_suffix', 'co.uk', /public suffix/], ['domain_suffix', '*.co.uk', /public suffix/], ['domain_suffix', 'github.io', /public suffix/],
    ['domain_suffix', 'COM.AU.', /public suffix/]
  ] as const) {
    const res = await post(kind, value)
    assert.equal(res.statusCode, 400, `${kind} ${value}: ${res.body}`)
    assert.equal(res.json().code, 'INVALID_REQUEST')
    assert.match(res.json().message, why, value)
  }
  for (const [kind, value] of [['ip_block', '10.0.0.0/8'], ['ip_block', '2001:db8::/32'], ['domain_suffix', 'corp.example.co.uk'], ['domain_suffix', 'someone.github.io'], ['domain', 'co.uk']] as const) {
    const res = await post(kind, value)
    assert.equal(res.statusCode, 201, `${kind} ${value}: ${res.body}`)
  }
})
