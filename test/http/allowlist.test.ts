/**
 * Tenant allowlists (API.md "Tenant allowlist"): the management routes, and the tenant_allowlist override on single
 * and bulk verdicts, isolated per tenant through the shared verdict cache.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { unpack } from 'msgpackr'
import { build, buildForFile, type Built } from '../helper.ts'

type Json = Record<string, any>

const svc = buildForFile()

/** Listed by three sample feeds: malicious on its own (data/feeds/README.md). */
const kListed = '198.51.100.23'
const kListedDomain = 'malware-c2.example'

interface Keys { a: string, b: string, aVerdictOnly: string, aId: string }
let keys: Keys | null = null

async function keysOf (): Promise<Keys> {
  if (keys !== null) return keys
  const a = await svc.makeKey(['verdict', 'verdict_bulk', 'mgmt'], { tenant: 'tenant-a' })
  const b = await svc.makeKey(['verdict', 'verdict_bulk', 'mgmt'], { tenant: 'tenant-b' })
  const aVerdictOnly = await svc.makeKey(['verdict', 'verdict_bulk'], { tenant: 'tenant-a' })
  keys = { a, b, aVerdictOnly, aId: a.slice(5, 17) }
  return keys
}

async function call (s: Built, method: 'GET' | 'POST' | 'DELETE', url: string, key: string | null, payload?: unknown): Promise<{ status: number, body: Json }> {
  const headers: Record<string, string> = key === null ? {} : { 'x-api-key': key }
  const res = await s.app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload: payload as object }) })
  return { status: res.statusCode, body: res.body === '' ? {} : res.json() }
}

async function allow (key: string, entry: Json, s: Built = svc): Promise<Json> {
  const res = await call(s, 'POST', '/api/v2/mgmt/allowlist', key, entry)
  assert.equal(res.status, 201, JSON.stringify(res.body))
  return res.body
}

async function remove (key: string, id: string, s: Built = svc): Promise<void> {
  assert.equal((await call(s, 'DELETE', `/api/v2/mgmt/allowlist/${id}`, key)).status, 204)
}

async function single (key: string, value: string, s: Built = svc): Promise<Json> {
  const res = await call(s, 'POST', '/api/v2/ioc/verdict', key, { indicator: { value }, signal_details: 'all', evidence_details: 'full' })
  assert.equal(res.status, 200, JSON.stringify(res.body))
  return res.body
}

async function bulk (key: string, values: string[], signalDetails: string, s: Built = svc): Promise<Json[]> {
  const res = await call(s, 'POST', '/api/v2/ioc/verdict/bulk', key, { indicators: values.map((value) => ({ value })), signal_details: signalDetails })
  assert.equal(res.status, 200, JSON.stringify(res.body))
  return res.body.results as Json[]
}

function assertAllowlisted (v: Json, entryId: string): void {
  assert.equal(v.risk.score, 0)
  assert.equal(v.risk.category, 'allowlisted')
  assert.deepEqual(v.recommended_actions, [{ action: 'allow', order: 1 }])
  if (v.signals.length > 0) {
    assert.equal(v.signals[0].signal_id, 'tenant_allowlist')
    assert.equal(v.signals[0].direction, 'safe')
    if (v.signals[0].evidence?.entry_id !== undefined) assert.equal(v.signals[0].evidence.entry_id, entryId)
  }
}

function assertNotAllowlisted (v: Json): void {
  assert.notEqual(v.risk.category, 'allowlisted')
  assert.ok(!(v.signals as Json[]).some((s) => s.signal_id === 'tenant_allowlist'))
}

function errorCode (res: { status: number, body: Json }, status: number, code: string): void {
  assert.equal(res.status, status, JSON.stringify(res.body))
  assert.equal(res.body.code, code)
}

test('an entry is stored normalized with its reason, the adding key and no expiry, and is listed', async () => {
  const k = await keysOf()
  const e = await allow(k.a, { kind: 'domain', value: 'HXXP://Listed-Once.Example.', reason: 'our mail relay' })
  assert.match(e.id, /^al_/)
  assert.equal(e.value, 'listed-once.example')
  assert.equal(e.kind, 'domain')
  assert.equal(e.reason, 'our mail relay')
  assert.equal(e.created_by, k.aId)
  assert.equal(e.expires_at, null)
  assert.ok(Number.isFinite(Date.parse(e.created_at)))
  const list = await call(svc, 'GET', '/api/v2/mgmt/allowlist', k.a)
  assert.equal(list.status, 200)
  assert.ok((list.body.entries as Json[]).some((x) => x.id === e.id))
  await remove(k.a, e.id)
})

test('an allowlisted indicator is benign for its tenant only, through the cache, in single verdicts', async () => {
  const k = await keysOf()
  const before = await single(k.b, kListed)
  assertNotAllowlisted(before)
  assert.ok(before.risk.score > 0, 'the engine\'s own verdict, which the entry must override')
  // Tenant B's verdict is in the cache now; tenant A's entry must still apply to A, and never reach B.
  const e = await allow(k.a, { kind: 'ip', value: kListed, reason: 'red team host', expires_at: new Date(Date.now() + 86_400_000).toISOString() })
  const a = await single(k.a, kListed)
  assertAllowlisted(a, e.id)
  assert.equal(a.meta.cache_hit, false)
  const ev = a.signals[0].evidence
  assert.equal(ev.reason, 'red team host')
  assert.equal(ev.created_by, k.aId)
  assert.equal(ev.expires_at, e.expires_at)
  assert.equal(ev.engine_score, before.risk.score)
  // The context is the engine's (network, who lists it), with the entry added.
  const { allowlist: entry, ...context } = a.threat_context
  assert.deepEqual(context, before.threat_context)
  assert.ok(Array.isArray(context.listed_by) && context.listed_by.length > 0 && context.ip_version === 4, JSON.stringify(context))
  assert.equal(entry.entry_id, e.id)
  const b = await single(k.b, kListed)
  assertNotAllowlisted(b)
  assert.equal(b.risk.score, before.risk.score)
  assert.deepEqual(b.signals, before.signals)
  // Removed: the next request of A gets the engine's verdict again.
  await remove(k.a, e.id)
  const after = await single(k.a, kListed)
  assertNotAllowlisted(after)
  assert.equal(after.risk.score, before.risk.score)
})

test('bulk verdicts carry the override for the owning tenant at every detail level and format, and not for another', async () => {
  const k = await keysOf()
  const values = [kListedDomain, 'sub.' + kListedDomain, kListed, '1.1.1.1']
  const plain = await bulk(k.b, values, 'none')
  const e = await allow(k.a, { kind: 'domain_suffix', value: '*.' + kListedDomain, reason: 'sinkholed by us' })
  const c = await allow(k.a, { kind: 'ip_block', value: '198.51.100.0/24', reason: 'lab range' })
  try {
    for (const level of ['none', 'top', 'all']) {
      const a = await bulk(k.a, values, level)
      const { allowlist: _entry, ...context } = a[2]!.threat_context
      assert.deepEqual(context, plain[2]!.threat_context, 'a bulk item keeps the engine\'s context too')
      assertAllowlisted(a[0]!, e.id)
      assertAllowlisted(a[1]!, e.id)
      assertAllowlisted(a[2]!, c.id)
      assertNotAllowlisted(a[3]!)
      assert.equal(a[3]!.risk.score, plain[3]!.risk.score)
      const b = await bulk(k.b, values, level)
      for (const [i, r] of b.entries()) {
        assertNotAllowlisted(r)
        assert.equal(r.risk.score, plain[i]!.risk.score)
      }
    }
    const res = await svc.app.inject({
      method: 'POST',
      url: '/api/v2/ioc/verdict/bulk',
      headers: { 'x-api-key': k.a, accept: 'application/msgpack' },
      payload: { indicators: values.map((value) => ({ value })), signal_details: 'top' }
    })
    assert.equal(res.statusCode, 200)
    const m = unpack(res.rawPayload) as Json
    assertAllowlisted(m.results[0], e.id)
    assertAllowlisted(m.results[2], c.id)
    assertNotAllowlisted(m.results[3])
  } finally {
    await remove(k.a, e.id)
    await remove(k.a, c.id)
  }
  const again = await bulk(k.a, values, 'none')
  for (const [i, r] of again.entries()) assert.equal(r.risk.score, plain[i]!.risk.score)
})

test('a suffix covers the name and names under it, not names that merely end alike; a block covers blocks inside it', async () => {
  const k = await keysOf()
  const s = await allow(k.a, { kind: 'domain_suffix', value: 'corp-suffix.example', reason: 'our zone' })
  const c = await allow(k.a, { kind: 'ip_block', value: '203.0.113.0/24', reason: 'our office' })
  const a = await bulk(k.a, ['corp-suffix.example', 'a.b.corp-suffix.example', 'xcorp-suffix.example', '203.0.113.9', '203.0.113.0/28', '203.0.112.0/23'], 'top')
  assertAllowlisted(a[0]!, s.id)
  assertAllowlisted(a[1]!, s.id)
  assertNotAllowlisted(a[2]!)
  assertAllowlisted(a[3]!, c.id)
  assertAllowlisted(a[4]!, c.id)
  assertNotAllowlisted(a[5]!)
  await remove(k.a, s.id)
  await remove(k.a, c.id)
})

test('an expired entry no longer applies', async () => {
  // Stored directly (the API refuses a past expiry) for a tenant whose list was never loaded.
  const key = await svc.makeKey(['verdict', 'mgmt'], { tenant: 'tenant-expired' })
  await svc.store.addAllowEntry({ tenant: 'tenant-expired', kind: 'ip', value: kListed, reason: 'old', createdBy: key.slice(5, 17), expiresAt: '2020-01-01T00:00:00.000Z' })
  assertNotAllowlisted(await single(key, kListed))
  const listed = await call(svc, 'GET', '/api/v2/mgmt/allowlist', key)
  assert.equal(listed.body.entries[0].expires_at, '2020-01-01T00:00:00.000Z')
})

test('a new entry applies however many expired ones its tenant holds', async (t) => {
  const own = await build(t)
  const key = await own.makeKey(['verdict', 'mgmt'], { tenant: 'many-expired' })
  // More expired entries than the active bound, all older than the new one (stored directly: the API refuses a past expiry).
  for (let i = 0; i < 1_600; i++) {
    await own.store.addAllowEntry({ tenant: 'many-expired', kind: 'domain', value: `gone-${i}.example`, reason: 'old', createdBy: 'test', expiresAt: '2020-01-01T00:00:00.000Z' })
  }
  const entry = await allow(key, { kind: 'ip', value: kListed, reason: 'our scanner' }, own)
  const res = await own.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'x-api-key': key }, payload: { indicator: { value: kListed } } })
  assert.equal(res.statusCode, 200)
  assertAllowlisted(res.json() as Json, entry.id as string)
})

test('entries page by cursor without overlap, and each tenant lists only its own', async () => {
  const key = await svc.makeKey(['mgmt'], { tenant: 'tenant-pages' })
  const ids: string[] = []
  for (let i = 0; i < 3; i++) ids.push((await allow(key, { kind: 'asn', value: `AS6450${i}`, reason: `r${i}` })).id)
  const p1 = await call(svc, 'GET', '/api/v2/mgmt/allowlist?limit=2', key)
  assert.deepEqual((p1.body.entries as Json[]).map((e) => e.id), ids.slice(0, 2))
  assert.equal(typeof p1.body.next_cursor, 'string')
  const p2 = await call(svc, 'GET', `/api/v2/mgmt/allowlist?limit=2&cursor=${p1.body.next_cursor as string}`, key)
  assert.deepEqual((p2.body.entries as Json[]).map((e) => e.id), ids.slice(2))
  assert.equal(p2.body.next_cursor, null)
  const k = await keysOf()
  const other = await call(svc, 'GET', '/api/v2/mgmt/allowlist?limit=500', k.b)
  assert.ok(!(other.body.entries as Json[]).some((e) => ids.includes(e.id)))
})

test('another tenant cannot delete an entry, and an unknown id is NOT_FOUND', async () => {
  const k = await keysOf()
  const e = await allow(k.a, { kind: 'file_hash_sha256', value: 'a'.repeat(64), reason: 'our build' })
  errorCode(await call(svc, 'DELETE', `/api/v2/mgmt/allowlist/${e.id as string}`, k.b), 404, 'NOT_FOUND')
  errorCode(await call(svc, 'DELETE', '/api/v2/mgmt/allowlist/al_000000000ffffffffff', k.a), 404, 'NOT_FOUND')
  await remove(k.a, e.id)
  errorCode(await call(svc, 'DELETE', `/api/v2/mgmt/allowlist/${e.id as string}`, k.a), 404, 'NOT_FOUND')
})

test('every route needs a key with the mgmt permission', async () => {
  const k = await keysOf()
  const entry = { kind: 'ip', value: '192.0.2.1', reason: 'x' }
  errorCode(await call(svc, 'POST', '/api/v2/mgmt/allowlist', k.aVerdictOnly, entry), 403, 'PERMISSION_DENIED')
  errorCode(await call(svc, 'GET', '/api/v2/mgmt/allowlist', k.aVerdictOnly), 403, 'PERMISSION_DENIED')
  errorCode(await call(svc, 'DELETE', '/api/v2/mgmt/allowlist/al_000000000ffffffffff', k.aVerdictOnly), 403, 'PERMISSION_DENIED')
  errorCode(await call(svc, 'POST', '/api/v2/mgmt/allowlist', null, entry), 401, 'MISSING_API_KEY')
  const list = await call(svc, 'GET', '/api/v2/mgmt/allowlist', k.a)
  assert.ok(!(list.body.entries as Json[]).some((e) => e.value === '192.0.2.1'))
})

test('bad input for each field is INVALID_REQUEST and stores nothing', async () => {
  const k = await keysOf()
  const good = { kind: 'ip', value: '192.0.2.77', reason: 'ok' }
  const bad: Json[] = [
    { value: '192.0.2.77', reason: 'ok' },
    { ...good, kind: 'url' },
    { ...good, kind: 7 },
    { kind: 'ip', reason: 'ok' },
    { ...good, value: '' },
    { ...good, value: '999.1.1.1' },
    { ...good, value: 'example.com' },
    { ...good, kind: 'asn', value: 'ASx' },
    { ...good, kind: 'ip_block', value: '10.0.0.0/99' },
    { ...good, kind: 'domain_suffix', value: '*.' },
    { ...good, value: 'x'.repeat(600) },
    { kind: 'ip', value: '192.0.2.77' },
    { ...good, reason: '' },
    { ...good, reason: '   ' },
    { ...good, reason: 'r'.repeat(501) },
    { ...good, expires_at: '2020-01-01T00:00:00Z' },
    { ...good, expires_at: 'tomorrow' },
    { ...good, expires_at: '2999-01-01' },
    { ...good, expires_at: '2999-02-30T00:00:00Z' },
    { ...good, expires_at: '2999-04-31T12:00:00+02:00' },
    { ...good, expires_at: '2999-01-01T23:59:60Z' },
    { ...good, expires_at: 5 },
    { ...good, created_by: 'someone-else' },
    { ...good, id: 'al_000000000ffffffffff' }
  ]
  for (const body of bad) errorCode(await call(svc, 'POST', '/api/v2/mgmt/allowlist', k.a, body), 400, 'INVALID_REQUEST')
  const poisoned = await svc.app.inject({
    method: 'POST',
    url: '/api/v2/mgmt/allowlist',
    headers: { 'x-api-key': k.a, 'content-type': 'application/json' },
    payload: '{"kind":"ip","value":"192.0.2.77","reason":"ok","__proto__":{"x":1}}'
  })
  errorCode({ status: poisoned.statusCode, body: poisoned.json() }, 400, 'INVALID_REQUEST')
  errorCode(await call(svc, 'GET', '/api/v2/mgmt/allowlist?limit=0', k.a), 400, 'INVALID_REQUEST')
  errorCode(await call(svc, 'GET', '/api/v2/mgmt/allowlist?limit=abc', k.a), 400, 'INVALID_REQUEST')
  errorCode(await call(svc, 'GET', '/api/v2/mgmt/allowlist?cursor=bm90LWFuLWlk', k.a), 400, 'INVALID_REQUEST')
  errorCode(await call(svc, 'GET', '/api/v2/mgmt/allowlist?tenant=tenant-b', k.a), 400, 'INVALID_REQUEST')
  const list = await call(svc, 'GET', '/api/v2/mgmt/allowlist?limit=500', k.a)
  assert.ok(!(list.body.entries as Json[]).some((e) => e.value === '192.0.2.77'))
  // The service still answers.
  assertNotAllowlisted(await single(k.a, '192.0.2.77'))
})

test('the override applies on scoring worker threads, to its tenant only', async (t) => {
  const s = await build(t, { IOC_POOL_SIZE: '2' })
  const a = await s.makeKey(['verdict', 'verdict_bulk', 'mgmt'], { tenant: 'pool-a' })
  const b = await s.makeKey(['verdict', 'verdict_bulk', 'mgmt'], { tenant: 'pool-b' })
  const values = [kListed, kListedDomain, '1.1.1.1']
  const plain = await bulk(b, values, 'none', s)
  const e = await allow(a, { kind: 'ip', value: kListed, reason: 'pool test' }, s)
  assertAllowlisted(await single(a, kListed, s), e.id)
  const ra = await bulk(a, values, 'none', s)
  assertAllowlisted(ra[0]!, e.id)
  assert.equal(ra[1]!.risk.score, plain[1]!.risk.score)
  const rb = await bulk(b, values, 'none', s)
  for (const [i, r] of rb.entries()) assert.equal(r.risk.score, plain[i]!.risk.score)
  assertNotAllowlisted(await single(b, kListed, s))
  await remove(a, e.id, s)
  assertNotAllowlisted(await single(a, kListed, s))
})

test('a tenant holds at most 1,000 active entries, concurrent adds included; an expired entry does not count', async (t) => {
  const own = await build(t)
  const key = await own.makeKey(['mgmt'], { tenant: 'capped' })
  // 994 active entries and one expired (a second-long expiry, past by the time the adds run).
  for (let i = 0; i < 994; i++) {
    await own.store.addAllowEntry({ tenant: 'capped', kind: 'domain', value: `pre-${i}.example`, reason: 'seed', createdBy: 'test', expiresAt: null })
  }
  await own.store.addAllowEntry({ tenant: 'capped', kind: 'domain', value: 'gone.example', reason: 'seed', createdBy: 'test', expiresAt: new Date(Date.now() + 1000).toISOString() })
  await new Promise((resolve) => setTimeout(resolve, 1100))
  const answers = await Promise.all(Array.from({ length: 40 }, async (_, i) => await call(own, 'POST', '/api/v2/mgmt/allowlist', key, { kind: 'domain', value: `race-${i}.example`, reason: 'race' })))
  const accepted = answers.filter((a) => a.status === 201).length
  assert.equal(accepted, 6, 'exactly the room left')
  for (const a of answers.filter((x) => x.status !== 201)) {
    errorCode(a, 400, 'INVALID_REQUEST')
    assert.match(String(a.body.message), /at most 1000 active allowlist entries/)
  }
  const all: Json[] = []
  for (let cursor: string | null = null; ;) {
    const page = await call(own, 'GET', `/api/v2/mgmt/allowlist?limit=500${cursor === null ? '' : `&cursor=${cursor}`}`, key)
    all.push(...(page.body.entries as Json[]))
    cursor = page.body.next_cursor as string | null
    if (cursor === null) break
  }
  assert.equal(all.filter((e) => e.expires_at === null).length, 1000)
})
