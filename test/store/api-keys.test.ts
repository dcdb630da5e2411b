/**
 * Key format, hashing and constant-time comparison (store-independent).
 */
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { test } from 'node:test'
import { generateKey, hashSecret, isKeyId, parseKey, PERMISSIONS, secretMatches, validateKeyOptions, withinCreator } from '../../src/store/api-keys.ts'
import type { ApiKeyRecord } from '../../src/store/types.ts'

test('the permission list is verdict, verdict_bulk, mgmt and admin', () => {
  assert.deepEqual([...PERMISSIONS], ['verdict', 'verdict_bulk', 'mgmt', 'admin'])
})

test('a generated key is iocv_<12 base32 id>_<43 base64url secret> and only the secret hash is kept', () => {
  const seen = new Set<string>()
  for (let i = 0; i < 200; i++) {
    const g = generateKey()
    assert.match(g.key, /^iocv_[a-z2-7]{12}_[A-Za-z0-9_-]{43}$/)
    const parsed = parseKey(g.key)
    assert.ok(parsed !== null)
    assert.equal(parsed.id, g.id)
    assert.ok(isKeyId(g.id))
    assert.equal(Buffer.from(parsed.secret, 'base64url').length, 32)
    assert.deepEqual(g.secretHash, createHash('sha256').update(parsed.secret).digest())
    assert.ok(!g.secretHash.toString('hex').includes(parsed.secret))
    seen.add(g.id)
  }
  assert.equal(seen.size, 200)
})

test('a secret matches only its own hash, and nothing matches a missing or malformed hash', () => {
  const g = generateKey()
  const secret = (parseKey(g.key) as { secret: string }).secret
  assert.equal(secretMatches(g.secretHash, secret), true)
  assert.equal(secretMatches(g.secretHash, `${secret.slice(0, -1)}${secret.endsWith('A') ? 'B' : 'A'}`), false)
  assert.equal(secretMatches(null, secret), false)
  assert.equal(secretMatches(Buffer.alloc(31), secret), false)
  assert.equal(secretMatches(hashSecret('other'), secret), false)
})

test('strings that are not keys do not parse', () => {
  const { key } = generateKey()
  for (const s of ['', 'iocv_', key.slice(1), `${key}x`, key.replace('_', '-'), key.toUpperCase(), 42, null, undefined, {}]) {
    assert.equal(parseKey(s), null, String(s))
  }
})

test('key options are validated and permissions put in canonical order', () => {
  assert.deepEqual(validateKeyOptions({ tenant: 'acme corp', permissions: ['mgmt', 'verdict', 'mgmt'], quota: 0 }),
    { tenant: 'acme corp', permissions: ['verdict', 'mgmt'], quota: 0, rateLimit: null, expiresAt: null, allowedCidrs: null })
  assert.throws(() => validateKeyOptions({ tenant: 'acme', permissions: ['verdict', 'root'] }), { code: 'INVALID_KEY_OPTIONS' })
  assert.throws(() => validateKeyOptions({ tenant: 'acme', permissions: 'verdict' as unknown as string[] }), { code: 'INVALID_KEY_OPTIONS' })
  assert.throws(() => validateKeyOptions({ tenant: 'acme', permissions: ['verdict'], quota: Number.POSITIVE_INFINITY }), { code: 'INVALID_KEY_OPTIONS' })
})

test('a key creates keys with at most its own permissions and networks (IPv4 and IPv6)', () => {
  const creator: ApiKeyRecord = {
    id: 'aaaaaaaaaaaa',
    tenant: 't',
    permissions: ['verdict', 'mgmt'],
    quota: null,
    createdAt: '2026-01-01T00:00:00.000Z',
    revokedAt: null,
    rateLimit: null,
    expiresAt: null,
    allowedCidrs: ['10.0.0.0/8', '2001:db8::/32'],
    lastUsedAt: null
  }
  assert.deepEqual(withinCreator(creator, { permissions: ['verdict'] }, null).allowedCidrs, creator.allowedCidrs)
  assert.throws(() => withinCreator(creator, { permissions: ['verdict_bulk'] }, null), { code: 'INVALID_KEY_OPTIONS', message: /^permissions/ })
  assert.throws(() => withinCreator(creator, { permissions: ['admin'] }, null), { code: 'INVALID_KEY_OPTIONS' })
  assert.deepEqual(withinCreator(creator, { permissions: ['mgmt'], allowedCidrs: ['10.1.0.0/16', '2001:db8:1::1'] }, null).allowedCidrs, ['10.1.0.0/16', '2001:db8:1::1'])
  for (const outside of [['11.0.0.0/8'], ['10.0.0.0/7'], ['2001:db9::/32'], ['::ffff:10.0.0.1'], ['0.0.0.0/0']]) {
    assert.throws(() => withinCreator(creator, { permissions: ['mgmt'], allowedCidrs: outside }, null), { code: 'INVALID_KEY_OPTIONS', message: /^allowed_cidrs/ }, outside[0])
  }
  const admin = { ...creator, permissions: ['admin'], allowedCidrs: null }
  assert.deepEqual(withinCreator(admin, { permissions: ['verdict', 'admin'], quota: null }, null), { permissions: ['verdict', 'admin'], quota: null, rateLimit: null, expiresAt: null, allowedCidrs: null })
})
