/**
 * Analysts' feedback (API.md "Feedback"): recorded with the verdict the service itself gives, listed with filters and
 * cursor paging, summarized per signal, deleted by its author (or an admin), tenant-isolated, validated at the edge.
 * Its scoring is a verdict query like any other (the `verdict` permission, history, usage, quota). Dashboard sessions
 * use it with their CSRF token.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { test } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { buildForFile, pgServices, type Built } from '../helper.ts'

type Json = Record<string, any>

const svc = buildForFile()

/** Listed by three sample feeds (data/feeds/README.md "Known entries"). */
const kListed = '198.51.100.23'
/** Listed by two sample feeds. */
const kListedDomain = 'malware-c2.example'

interface Keys { a: string, aId: string, a2: string, a2Id: string, aAdmin: string, b: string, aVerdictOnly: string, aMgmtOnly: string }
let keys: Keys | null = null

async function keysOf (): Promise<Keys> {
  if (keys !== null) return keys
  const a = await svc.makeKey(['verdict', 'mgmt'], { tenant: 'fb-a' })
  const a2 = await svc.makeKey(['verdict', 'mgmt'], { tenant: 'fb-a' })
  const aAdmin = await svc.makeKey(['admin'], { tenant: 'fb-a' })
  const b = await svc.makeKey(['verdict', 'mgmt'], { tenant: 'fb-b' })
  const aVerdictOnly = await svc.makeKey(['verdict', 'verdict_bulk'], { tenant: 'fb-a' })
  const aMgmtOnly = await svc.makeKey(['mgmt'], { tenant: 'fb-a' })
  keys = { a, aId: a.slice(5, 17), a2, a2Id: a2.slice(5, 17), aAdmin, b, aVerdictOnly, aMgmtOnly }
  return keys
}

async function call (method: 'GET' | 'POST' | 'DELETE', url: string, headers: Record<string, string>, payload?: unknown): Promise<{ status: number, body: Json }> {
  const res = await svc.app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload: payload as object }) })
  return { status: res.statusCode, body: res.body === '' ? {} : res.json() }
}

const as = (key: string | null): Record<string, string> => key === null ? {} : { 'x-api-key': key }

async function mark (key: string, value: string, verdict: string, note?: string): Promise<Json> {
  const res = await call('POST', '/api/v2/mgmt/feedback', as(key), { indicator: { value }, verdict, ...(note === undefined ? {} : { note }) })
  assert.equal(res.status, 201, JSON.stringify(res.body))
  return res.body
}

async function list (key: string, query = ''): Promise<Json> {
  const res = await call('GET', `/api/v2/mgmt/feedback${query}`, as(key))
  assert.equal(res.status, 200, JSON.stringify(res.body))
  return res.body
}

function errorCode (res: { status: number, body: Json }, status: number, code: string): void {
  assert.equal(res.status, status, JSON.stringify(res.body))
  assert.equal(res.body.code, code)
}

test('feedback records the verdict the service gives now (score, category, every signal id), not what the client says', async () => {
  const k = await keysOf()
  const verdict = await call('POST', '/api/v2/ioc/verdict', as(k.a), { indicator: { value: kListed }, signal_details: 'all' })
  assert.equal(verdict.status, 200)
  assert.ok(verdict.body.signals.length > 1, 'the sample verdict has several signals')
  const e = await mark(k.a, '198.51.100[.]23', 'false_positive', '  our scanner  ')
  assert.match(e.id, /^fb_[0-9a-z]{9}[0-9a-f]{10}$/)
  assert.deepEqual(e.indicator, { type: 'ip', value: '198.51.100[.]23', normalized: kListed })
  assert.equal(e.verdict, 'false_positive')
  assert.equal(e.note, 'our scanner')
  assert.equal(e.score, verdict.body.risk.score)
  assert.equal(e.category, verdict.body.risk.category)
  assert.deepEqual(e.signal_ids, (verdict.body.signals as Json[]).map((s) => s.signal_id))
  assert.equal(e.engine_version, verdict.body.meta.engine_version)
  assert.equal(e.data_timestamp, verdict.body.meta.data_timestamp)
  assert.equal(e.created_by, k.aId)
  assert.ok(Math.abs(Date.parse(e.created_at) - Date.now()) < 60_000)
  const listed = await list(k.a, `?indicator=${kListed}`)
  assert.deepEqual(listed.entries[0], e)
  // A client cannot supply the verdict's facts: they are unknown members.
  for (const extra of [{ signal_ids: ['made_up'] }, { score: 0 }, { category: 'benign' }, { created_by: 'someone' }, { tenant: 'fb-b' }]) {
    errorCode(await call('POST', '/api/v2/mgmt/feedback', as(k.a), { indicator: { value: kListed }, verdict: 'true_positive', ...extra }), 400, 'INVALID_REQUEST')
  }
})

test('feedback scores a verdict query like any other: recorded in history, counted in usage, refused past the quota', async () => {
  const key = await svc.makeKey(['verdict', 'mgmt'], { tenant: 'fb-usage', quota: 3 })
  assert.equal((await call('POST', '/api/v2/ioc/verdict', as(key), { indicator: { value: kListedDomain } })).status, 200)
  await mark(key, kListedDomain, 'true_positive')
  await mark(key, kListed, 'false_positive')
  // The quota of three indicators is spent: feedback is refused like a verdict, and stores nothing.
  errorCode(await call('POST', '/api/v2/mgmt/feedback', as(key), { indicator: { value: kListed }, verdict: 'true_positive' }), 429, 'QUOTA_EXCEEDED')
  assert.equal((await list(key)).entries.length, 2)
  await svc.history.flush()
  const history = await call('GET', '/api/v2/mgmt/enrich-logs/search-history', as(key))
  assert.equal(history.body.results.length, 3, 'the verdict query and both feedback scorings')
  const scored = (history.body.results as Json[]).filter((r) => r.source?.product === 'ioc-verdict feedback')
  assert.deepEqual(scored.map((r) => r.indicator.normalized), [kListed, kListedDomain])
  assert.ok(scored.every((r) => r.http_status === 200 && r.label_details === 'all' && r.label_count > 0))
  const usage = await call('GET', '/api/v2/mgmt/usage', as(key))
  assert.equal(usage.body.total, 3)
  assert.equal(usage.body.key.used, 3)
})

test('a key without the verdict permission gets no verdict through feedback: 403, nothing scored, recorded or counted', async () => {
  const k = await keysOf()
  const key = await svc.makeKey(['mgmt'], { tenant: 'fb-no-verdict', quota: 0 })
  const res = await call('POST', '/api/v2/mgmt/feedback', as(key), { indicator: { value: kListed }, verdict: 'false_positive' })
  errorCode(res, 403, 'PERMISSION_DENIED')
  assert.ok(!JSON.stringify(res.body).includes('score'))
  errorCode(await call('POST', '/api/v2/mgmt/feedback', as(k.aMgmtOnly), { indicator: { value: kListed }, verdict: 'true_positive' }), 403, 'PERMISSION_DENIED')
  assert.deepEqual((await list(key)).entries, [])
  await svc.history.flush()
  assert.deepEqual((await call('GET', '/api/v2/mgmt/enrich-logs/search-history', as(key))).body.results, [])
  assert.equal((await call('GET', '/api/v2/mgmt/usage', as(key))).body.total, 0)
})

test('an allowlisted indicator\'s feedback records the allowlisted verdict the tenant gets', async () => {
  const key = await svc.makeKey(['verdict', 'mgmt'], { tenant: 'fb-allow' })
  const entry = await call('POST', '/api/v2/mgmt/allowlist', as(key), { kind: 'ip', value: kListed, reason: 'our red team' })
  assert.equal(entry.status, 201)
  const e = await mark(key, kListed, 'true_positive', 'the allowlist hides a real threat')
  assert.equal(e.score, 0)
  assert.equal(e.category, 'allowlisted')
  assert.deepEqual(e.signal_ids, ['tenant_allowlist'])
  // Another tenant's feedback on the same indicator records the engine's own verdict.
  const other = await svc.makeKey(['verdict', 'mgmt'], { tenant: 'fb-allow-other' })
  const o = await mark(other, kListed, 'false_positive')
  assert.notEqual(o.category, 'allowlisted')
  assert.ok(!(o.signal_ids as string[]).includes('tenant_allowlist'))
})

test('the list filters by verdict, indicator, signal, author and date, and pages newest first without overlap', async () => {
  const key = await svc.makeKey(['verdict', 'mgmt'], { tenant: 'fb-list' })
  const other = await svc.makeKey(['verdict', 'mgmt'], { tenant: 'fb-list' })
  const made: Json[] = []
  made.push(await mark(key, kListed, 'false_positive', 'one'))
  made.push(await mark(key, 'hxxp://malware-c2[.]example/path', 'true_positive', 'two'))
  made.push(await mark(other, kListed, 'true_positive', 'three'))
  made.push(await mark(key, '8.8.8.8', 'false_positive', 'four'))
  const newest = made.map((e) => e.id).reverse()
  assert.deepEqual((await list(key)).entries.map((e: Json) => e.id), newest)
  // Paging: two, then two, then nothing more.
  const p1 = await list(key, '?limit=2')
  assert.deepEqual(p1.entries.map((e: Json) => e.id), newest.slice(0, 2))
  assert.equal(typeof p1.next_cursor, 'string')
  const p2 = await list(key, `?limit=2&cursor=${p1.next_cursor as string}`)
  assert.deepEqual(p2.entries.map((e: Json) => e.id), newest.slice(2))
  assert.equal(p2.next_cursor, null)
  const ids = async (q: string): Promise<string[]> => (await list(key, q)).entries.map((e: Json) => e.id)
  assert.deepEqual(await ids('?verdict=true_positive'), [made[2]!.id, made[1]!.id])
  assert.deepEqual(await ids(`?indicator=${encodeURIComponent('198.51.100[.]23')}`), [made[2]!.id, made[0]!.id])
  assert.deepEqual(await ids(`?indicator=${kListedDomain}&verdict=true_positive`), [made[1]!.id])
  assert.deepEqual(await ids(`?created_by=${other.slice(5, 17)}`), [made[2]!.id])
  const signal = (made[1]!.signal_ids as string[])[0] as string
  assert.deepEqual(await ids(`?signal_id=${encodeURIComponent(signal)}`), made.filter((e) => (e.signal_ids as string[]).includes(signal)).map((e) => e.id).reverse())
  assert.deepEqual(await ids('?signal_id=no_such_signal'), [])
  const future = new Date(Date.now() + 86_400_000).toISOString()
  assert.deepEqual(await ids(`?since=${encodeURIComponent(future)}`), [])
  assert.deepEqual(await ids(`?until=${encodeURIComponent(future)}`), newest)
  assert.deepEqual(await ids(`?since=${made[1]!.created_at as string}&until=${made[3]!.created_at as string}`),
    made.filter((e) => e.created_at >= made[1]!.created_at && e.created_at < made[3]!.created_at).map((e) => e.id).reverse())
  assert.deepEqual(await ids('?until=2020-01-01'), [])
})

test('the summary counts, per signal, the entries marked false and true positive whose verdict had it', async () => {
  const key = await svc.makeKey(['verdict', 'mgmt'], { tenant: 'fb-summary' })
  const fp1 = await mark(key, kListed, 'false_positive')
  await mark(key, kListed, 'false_positive')
  await mark(key, kListed, 'true_positive')
  const tp = await mark(key, kListedDomain, 'true_positive')
  const res = await call('GET', '/api/v2/mgmt/feedback/summary', as(key))
  assert.equal(res.status, 200)
  const s = res.body
  assert.deepEqual(s.totals, { false_positive: 2, true_positive: 2 })
  assert.equal(s.since, null)
  assert.equal(s.until, null)
  const expected = new Map<string, { fp: number, tp: number }>()
  for (const id of fp1.signal_ids as string[]) expected.set(id, { fp: 2, tp: 1 })
  for (const id of tp.signal_ids as string[]) {
    const e = expected.get(id) ?? { fp: 0, tp: 0 }
    expected.set(id, { fp: e.fp, tp: e.tp + 1 })
  }
  assert.equal(s.signals.length, expected.size)
  for (const row of s.signals as Json[]) {
    const e = expected.get(row.signal_id)
    assert.ok(e !== undefined, row.signal_id)
    assert.equal(row.false_positive, e.fp)
    assert.equal(row.true_positive, e.tp)
    assert.equal(row.false_positive_share, Math.round(e.fp / (e.fp + e.tp) * 10_000) / 10_000)
  }
  const fps = (s.signals as Json[]).map((r) => r.false_positive)
  assert.deepEqual(fps, [...fps].sort((x, y) => y - x), 'most false positives first')
  const later = await call('GET', `/api/v2/mgmt/feedback/summary?since=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`, as(key))
  assert.deepEqual(later.body.totals, { false_positive: 0, true_positive: 0 })
  assert.deepEqual(later.body.signals, [])
  const ranged = await call('GET', '/api/v2/mgmt/feedback/summary?since=2020-01-01&until=2999-01-01T00:00:00%2B02:00', as(key))
  assert.deepEqual([ranged.body.since, ranged.body.until], ['2020-01-01T00:00:00.000Z', '2998-12-31T22:00:00.000Z'])
  assert.deepEqual(ranged.body.totals, s.totals)
})

test('tenant A never sees, summarizes or deletes tenant B\'s feedback', async () => {
  const k = await keysOf()
  const a = await mark(k.a, kListedDomain, 'false_positive', 'tenant a only')
  const b = await mark(k.b, kListedDomain, 'true_positive', 'tenant b only')
  const seenByA = JSON.stringify((await list(k.a, '?limit=500')).entries)
  const seenByB = JSON.stringify((await list(k.b, '?limit=500')).entries)
  assert.ok(seenByA.includes(a.id) && !seenByA.includes(b.id))
  assert.ok(seenByB.includes(b.id) && !seenByB.includes(a.id))
  // A cursor made from another tenant's entry lists only the caller's entries.
  const cursor = Buffer.from(b.id as string, 'latin1').toString('base64url')
  assert.ok(!(await list(k.a, `?cursor=${cursor}`)).entries.some((e: Json) => e.id === b.id))
  const summaryB = await call('GET', '/api/v2/mgmt/feedback/summary', as(k.b))
  assert.equal(summaryB.body.totals.false_positive, 0)
  errorCode(await call('DELETE', `/api/v2/mgmt/feedback/${a.id as string}`, as(k.b)), 404, 'NOT_FOUND')
  assert.ok((await list(k.a, `?indicator=${kListedDomain}`)).entries.some((e: Json) => e.id === a.id))
})

test('an entry is deleted by its author or an admin of its tenant; others get PERMISSION_DENIED, unknown ids NOT_FOUND', async () => {
  const k = await keysOf()
  const mine = await mark(k.a, '203.0.113.5', 'false_positive')
  errorCode(await call('DELETE', `/api/v2/mgmt/feedback/${mine.id as string}`, as(k.a2)), 403, 'PERMISSION_DENIED')
  assert.equal((await call('DELETE', `/api/v2/mgmt/feedback/${mine.id as string}`, as(k.a))).status, 204)
  errorCode(await call('DELETE', `/api/v2/mgmt/feedback/${mine.id as string}`, as(k.a)), 404, 'NOT_FOUND')
  const theirs = await mark(k.a2, '203.0.113.6', 'true_positive')
  assert.equal((await call('DELETE', `/api/v2/mgmt/feedback/${theirs.id as string}`, as(k.aAdmin))).status, 204)
  errorCode(await call('DELETE', '/api/v2/mgmt/feedback/fb_000000000ffffffffff', as(k.a)), 404, 'NOT_FOUND')
  errorCode(await call('DELETE', '/api/v2/mgmt/feedback/not-an-id', as(k.a)), 404, 'NOT_FOUND')
  const left = await list(k.a, '?limit=500')
  assert.ok(!(left.entries as Json[]).some((e) => e.id === mine.id || e.id === theirs.id))
  // The deleted entries no longer count in the summary.
  const summary = await call('GET', '/api/v2/mgmt/feedback/summary', as(k.a))
  const total = summary.body.totals.false_positive + summary.body.totals.true_positive
  assert.equal(total, left.entries.length)
})

test('every route needs the mgmt permission', async () => {
  const k = await keysOf()
  const body = { indicator: { value: '192.0.2.1' }, verdict: 'false_positive' }
  errorCode(await call('POST', '/api/v2/mgmt/feedback', as(k.aVerdictOnly), body), 403, 'PERMISSION_DENIED')
  errorCode(await call('GET', '/api/v2/mgmt/feedback', as(k.aVerdictOnly)), 403, 'PERMISSION_DENIED')
  errorCode(await call('GET', '/api/v2/mgmt/feedback/summary', as(k.aVerdictOnly)), 403, 'PERMISSION_DENIED')
  errorCode(await call('DELETE', '/api/v2/mgmt/feedback/fb_000000000ffffffffff', as(k.aVerdictOnly)), 403, 'PERMISSION_DENIED')
  errorCode(await call('POST', '/api/v2/mgmt/feedback', as(null), body), 401, 'MISSING_API_KEY')
  errorCode(await call('GET', '/api/v2/mgmt/feedback', as('iocv_aaaaaaaaaaaa_not-a-real-secret')), 401, 'INVALID_API_KEY')
  assert.ok(!(await list(k.a, '?limit=500')).entries.some((e: Json) => e.indicator.normalized === '192.0.2.1'))
})

test('bad input is refused with the documented code and stores nothing', async () => {
  const k = await keysOf()
  const good = { indicator: { value: '192.0.2.99' }, verdict: 'false_positive', note: 'ok' }
  const bad: Json[] = [
    {},
    { verdict: 'false_positive' },
    { indicator: { value: '192.0.2.99' } },
    { ...good, verdict: 'maybe' },
    { ...good, verdict: 'FALSE_POSITIVE' },
    { ...good, verdict: 1 },
    { ...good, indicator: '192.0.2.99' },
    { ...good, indicator: { value: '' } },
    { ...good, indicator: { value: 5 } },
    { ...good, indicator: { value: '192.0.2.99', type: 'url' } },
    { ...good, indicator: { value: '192.0.2.99', extra: 1 } },
    { ...good, indicator: { value: 'x'.repeat(8193) } },
    { ...good, note: 'n'.repeat(1001) },
    { ...good, note: 7 },
    { ...good, id: 'fb_000000000ffffffffff' }
  ]
  for (const body of bad) errorCode(await call('POST', '/api/v2/mgmt/feedback', as(k.a), body), 400, 'INVALID_REQUEST')
  for (const indicator of [{ value: 'not an indicator!' }, { value: '999.1.1.1' }, { value: '192.0.2.99', type: 'domain' }, { value: 'a'.repeat(40) }]) {
    errorCode(await call('POST', '/api/v2/mgmt/feedback', as(k.a), { ...good, indicator }), 400, 'INVALID_INDICATOR')
  }
  for (const payload of [
    '{"indicator":{"value":"192.0.2.99"},"verdict":"false_positive","__proto__":{"x":1}}',
    '{"indicator":{"value":"192.0.2.99","constructor":{"prototype":{"x":1}}},"verdict":"false_positive"}',
    '{"indicator":{"value":"192.0.2.99"},"verdict":"false_positive","note":"x","prototype":1}'
  ]) {
    const res = await svc.app.inject({ method: 'POST', url: '/api/v2/mgmt/feedback', headers: { 'x-api-key': k.a, 'content-type': 'application/json' }, payload })
    errorCode({ status: res.statusCode, body: res.json() }, 400, 'INVALID_REQUEST')
  }
  assert.equal(({} as Json).x, undefined, 'no prototype was polluted')
  for (const q of ['?limit=0', '?limit=501', '?limit=abc', '?verdict=maybe', '?cursor=bm90LWFuLWlk', '?tenant=fb-b', '?since=yesterday',
    '?until=2024-02-30', '?indicator=not%20an%20indicator!', '?signal_id=']) {
    errorCode(await call('GET', `/api/v2/mgmt/feedback${q}`, as(k.a)), 400, 'INVALID_REQUEST')
  }
  for (const q of ['?since=soon', '?verdict=false_positive', '?until=2024-13-01']) {
    errorCode(await call('GET', `/api/v2/mgmt/feedback/summary${q}`, as(k.a)), 400, 'INVALID_REQUEST')
  }
  assert.ok(!(await list(k.a, '?limit=500')).entries.some((e: Json) => e.indicator.normalized === '192.0.2.99'))
  // The service still answers, and the same body without the fault is accepted.
  assert.equal((await call('POST', '/api/v2/ioc/verdict', as(k.a), { indicator: { value: '192.0.2.99' } })).status, 200)
  assert.equal((await mark(k.a, '192.0.2.99', 'false_positive', 'n'.repeat(1000))).note.length, 1000)
})

// ---- dashboard sessions -----------------------------------------------------------------------------------------

const kPassword = 'a long analyst password'
let users = 0

function cookieOf (res: LightMyRequestResponse): string {
  const set = res.headers['set-cookie']
  return ((Array.isArray(set) ? set : [set ?? '']).find((c) => c.startsWith('iocv_session=')) ?? '').split(';')[0] as string
}

async function session (tenant: string, role: 'analyst' | 'admin' = 'analyst'): Promise<{ name: string, cookie: string, csrf: string }> {
  const name = `fb${users++}.${tenant}`
  await svc.store.accounts.createUser({ tenant, username: name, role, password: kPassword })
  const res = await svc.app.inject({ method: 'POST', url: '/dashboard/api/session', payload: { username: name, password: kPassword } })
  assert.equal(res.statusCode, 200)
  return { name, cookie: cookieOf(res), csrf: (res.json() as Json).csrf }
}

test('a dashboard session records feedback with its CSRF token, as user:<name>, for its own tenant only', async () => {
  const ana = await session('fb-dash')
  const bob = await session('fb-dash')
  const eve = await session('fb-dash-other', 'admin')
  const body = { indicator: { value: kListed }, verdict: 'false_positive', note: 'from the dashboard' }
  errorCode(await call('POST', '/api/v2/mgmt/feedback', { cookie: ana.cookie }, body), 403, 'CSRF_FAILED')
  errorCode(await call('POST', '/api/v2/mgmt/feedback', { cookie: ana.cookie, 'x-csrf-token': eve.csrf }, body), 403, 'CSRF_FAILED')
  const made = await call('POST', '/api/v2/mgmt/feedback', { cookie: ana.cookie, 'x-csrf-token': ana.csrf }, body)
  assert.equal(made.status, 201)
  assert.equal(made.body.created_by, `user:${ana.name}`)
  assert.ok(!JSON.stringify(made.body).includes(ana.cookie.split('=')[1] as string), 'no session id in the entry')
  // Reading needs no token; another tenant's session sees nothing of it.
  const mine = await call('GET', '/api/v2/mgmt/feedback', { cookie: bob.cookie })
  assert.deepEqual(mine.body.entries.map((e: Json) => e.id), [made.body.id])
  const theirs = await call('GET', '/api/v2/mgmt/feedback', { cookie: eve.cookie })
  assert.deepEqual(theirs.body.entries, [])
  assert.deepEqual((await call('GET', '/api/v2/mgmt/feedback/summary', { cookie: eve.cookie })).body.totals, { false_positive: 0, true_positive: 0 })
  // Deleting: not without the token, not another analyst's, not another tenant's (even an admin's); the author may.
  errorCode(await call('DELETE', `/api/v2/mgmt/feedback/${made.body.id as string}`, { cookie: ana.cookie }), 403, 'CSRF_FAILED')
  errorCode(await call('DELETE', `/api/v2/mgmt/feedback/${made.body.id as string}`, { cookie: bob.cookie, 'x-csrf-token': bob.csrf }), 403, 'PERMISSION_DENIED')
  errorCode(await call('DELETE', `/api/v2/mgmt/feedback/${made.body.id as string}`, { cookie: eve.cookie, 'x-csrf-token': eve.csrf }), 404, 'NOT_FOUND')
  assert.equal((await call('DELETE', `/api/v2/mgmt/feedback/${made.body.id as string}`, { cookie: ana.cookie, 'x-csrf-token': ana.csrf })).status, 204)
  // An admin session deletes any entry of its tenant.
  const admin = await session('fb-dash', 'admin')
  const other = await call('POST', '/api/v2/mgmt/feedback', { cookie: bob.cookie, 'x-csrf-token': bob.csrf }, body)
  assert.equal((await call('DELETE', `/api/v2/mgmt/feedback/${other.body.id as string}`, { cookie: admin.cookie, 'x-csrf-token': admin.csrf })).status, 204)
  // Each scoring is in history, with the session as requester.
  await svc.history.flush()
  const history = (await call('GET', '/api/v2/mgmt/enrich-logs/search-history', { cookie: ana.cookie })).body.results as Json[]
  assert.deepEqual(history.map((r) => [r.auth_type, r.user_id, r.source.product]), [['session', bob.name, 'ioc-verdict feedback'], ['session', ana.name, 'ioc-verdict feedback']])
})

test('recorded feedback is counted in the metrics by verdict', async () => {
  const read = async (): Promise<number> => {
    const text = (await svc.app.inject({ url: '/metrics' })).body
    return Number(/^iocv_feedback_total\{verdict="true_positive"\} (\d+)$/m.exec(text)?.[1] ?? 0)
  }
  const before = await read()
  const k = await keysOf()
  await mark(k.a, kListedDomain, 'true_positive')
  assert.equal(await read(), before + 1)
})

const kDb = process.env.IOC_TEST_DATABASE_URL

test('on PostgreSQL, feedback recorded through one instance is listed and summarized by another, per tenant', {
  skip: kDb === undefined || kDb === '' ? 'IOC_TEST_DATABASE_URL not set' : false
}, async (t) => {
  const services = pgServices(t, kDb as string, `iocv_feedback_${randomBytes(4).toString('hex')}`)
  const apps = [await services.build(), await services.build()]
  const [one, two] = apps as [Built, Built]
  const a = await one.makeKey(['verdict', 'mgmt'], { tenant: 'pg-a' })
  const b = await one.makeKey(['verdict', 'mgmt'], { tenant: 'pg-b' })
  const post = async (s: Built, key: string, value: string, verdict: string): Promise<Json> => {
    const res = await s.app.inject({ method: 'POST', url: '/api/v2/mgmt/feedback', headers: { 'x-api-key': key }, payload: { indicator: { value }, verdict } })
    assert.equal(res.statusCode, 201, res.body)
    return res.json()
  }
  const e1 = await post(one, a, kListed, 'false_positive')
  const e2 = await post(two, a, kListedDomain, 'true_positive')
  await post(one, b, kListed, 'true_positive')
  const listed = (await two.app.inject({ url: '/api/v2/mgmt/feedback', headers: { 'x-api-key': a } })).json() as Json
  assert.deepEqual(listed.entries.map((e: Json) => e.id), [e2.id, e1.id])
  assert.deepEqual(listed.entries[1], e1)
  const page = (await one.app.inject({ url: '/api/v2/mgmt/feedback?limit=1', headers: { 'x-api-key': a } })).json() as Json
  const rest = (await two.app.inject({ url: `/api/v2/mgmt/feedback?limit=1&cursor=${page.next_cursor as string}`, headers: { 'x-api-key': a } })).json() as Json
  assert.deepEqual([...page.entries, ...rest.entries].map((e: Json) => e.id), [e2.id, e1.id])
  assert.equal(rest.next_cursor, null)
  const summary = (await two.app.inject({ url: '/api/v2/mgmt/feedback/summary', headers: { 'x-api-key': a } })).json() as Json
  assert.deepEqual(summary.totals, { false_positive: 1, true_positive: 1 })
  for (const id of e1.signal_ids as string[]) assert.ok((summary.signals as Json[]).some((r) => r.signal_id === id && r.false_positive === 1))
  assert.equal((await two.app.inject({ method: 'DELETE', url: `/api/v2/mgmt/feedback/${e1.id as string}`, headers: { 'x-api-key': b } })).statusCode, 404)
  assert.equal((await two.app.inject({ method: 'DELETE', url: `/api/v2/mgmt/feedback/${e1.id as string}`, headers: { 'x-api-key': a } })).statusCode, 204)
  const after = (await one.app.inject({ url: '/api/v2/mgmt/feedback/summary', headers: { 'x-api-key': a } })).json() as Json
  assert.deepEqual(after.totals, { false_positive: 0, true_positive: 1 })
})
