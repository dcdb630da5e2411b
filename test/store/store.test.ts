/**
 * Store contract: the same tests against every backend of test/store/backends.ts.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { toRows, type HistoryRow } from '../../src/history/rows.ts'
import type { HistoryRecord, SearchFilters } from '../../src/store/types.ts'
import { storeBackends, type ExplainableStore } from './backends.ts'
import { historyRecord } from '../fixtures/history-record.ts'
import { newHit } from '../fixtures/retro-hits.ts'

let seq = 0

function record (overrides: Partial<HistoryRecord> & { tenant: string, date: string }): HistoryRecord {
  seq++
  return historyRecord({
    request_id: `req-${seq}`,
    risk: { score: 10, strength: 'weak', category: 'benign' },
    scores: { signal_groups: {}, signal_subgroups: {} },
    source: { channel: 'siem', product: 'test' },
    ...overrides
  })
}

/** Newest first by (date, insertion order): the order searchHistory must return. */
function newestFirst (records: HistoryRecord[]): string[] {
  return records
    .map((r, i) => ({ r, i }))
    .sort((a, b) => (a.r.date < b.r.date ? 1 : a.r.date > b.r.date ? -1 : b.i - a.i))
    .map((x) => x.r.request_id)
}

async function searchAll (store: ExplainableStore, tenant: string, filters: SearchFilters, limit = 1000): Promise<HistoryRecord[]> {
  const out: HistoryRecord[] = []
  let cursor: string | null = null
  do {
    const page = await store.searchHistory(tenant, filters, limit, cursor)
    out.push(...page.results)
    cursor = page.next_cursor
  } while (cursor !== null)
  return out
}

/** A varied fixture: every filterable field takes several values, some dates are shared. */
function fixture (tenant: string, prefix: string): HistoryRecord[] {
  const values = [
    { type: 'ip', value: '192.0.2.1', normalized: '192.0.2.1' },
    { type: 'domain', value: 'Example.COM.', normalized: 'example.com' },
    { type: 'domain', value: 'example.com', normalized: 'example.com' },
    { type: null, value: 'not an indicator', normalized: null },
    { type: 'ip', value: '1.2.3[.]4', normalized: '1.2.3.4' }
  ]
  const out: HistoryRecord[] = []
  for (let i = 0; i < 30; i++) {
    const second = Math.floor(i / 2) // pairs share a timestamp: order falls back to insertion (id)
    out.push(record({
      tenant,
      request_id: `${prefix}-${i}`,
      date: new Date(Date.UTC(2024, 2, 1 + (i % 3), 10, 0, second, i % 4 === 0 ? 0 : 250)).toISOString(),
      apikey: i % 3 === 0 ? 'keyaaaaaaaaa' : 'keybbbbbbbbb',
      user_id: i % 5 === 0 ? null : i % 5 < 3 ? 'user-1' : 'user-2',
      bulk_request_id: i % 4 === 1 ? 'bulk-1' : i % 4 === 2 ? 'bulk-2' : null,
      auth_type: i % 7 === 0 ? 'session' : 'api_key',
      indicator: values[i % values.length] as HistoryRecord['indicator']
    }))
  }
  return out
}

interface FilterCase {
  name: string
  filters: SearchFilters
  keep: (r: HistoryRecord) => boolean
}

const kFilterCases: FilterCase[] = [
  { name: 'no filter', filters: {}, keep: () => true },
  { name: 'date_gte', filters: { date_gte: '2024-03-02T00:00:00Z' }, keep: (r) => r.date >= '2024-03-02T00:00:00.000Z' },
  { name: 'date_lt', filters: { date_lt: '2024-03-02' }, keep: (r) => r.date < '2024-03-02T00:00:00.000Z' },
  {
    name: 'date range with offset',
    filters: { date_gte: '2024-03-02T11:00:05+01:00', date_lt: '2024-03-03T10:00:10.250Z' },
    keep: (r) => r.date >= '2024-03-02T10:00:05.000Z' && r.date < '2024-03-03T10:00:10.250Z'
  },
  { name: 'user_id', filters: { user_id: 'user-2' }, keep: (r) => r.user_id === 'user-2' },
  { name: 'apikey', filters: { apikey: 'keyaaaaaaaaa' }, keep: (r) => r.apikey === 'keyaaaaaaaaa' },
  { name: 'exclude_bulk_requests', filters: { exclude_bulk_requests: true }, keep: (r) => r.bulk_request_id === null },
  { name: 'exclude_bulk_requests false', filters: { exclude_bulk_requests: false }, keep: () => true },
  { name: 'auth_type', filters: { auth_type: 'session' }, keep: (r) => r.auth_type === 'session' },
  { name: 'indicator_type', filters: { indicator_type: 'domain' }, keep: (r) => r.indicator.type === 'domain' },
  { name: 'indicator_value (as sent)', filters: { indicator_value: 'example.com' }, keep: (r) => r.indicator.value === 'example.com' },
  { name: 'indicator_value (defanged, as sent)', filters: { indicator_value: '1.2.3[.]4' }, keep: (r) => r.indicator.value === '1.2.3[.]4' },
  {
    name: 'apikey and date range',
    filters: { apikey: 'keybbbbbbbbb', date_gte: '2024-03-02', date_lt: '2024-03-03' },
    keep: (r) => r.apikey === 'keybbbbbbbbb' && r.date.startsWith('2024-03-02')
  },
  {
    name: 'indicator_type, exclude_bulk_requests and user_id',
    filters: { indicator_type: 'ip', exclude_bulk_requests: true, user_id: 'user-1' },
    keep: (r) => r.indicator.type === 'ip' && r.bulk_request_id === null && r.user_id === 'user-1'
  },
  { name: 'a value nobody queried', filters: { indicator_value: '203.0.113.9' }, keep: () => false },
  {
    name: 'indicator_value with request filters',
    filters: { indicator_value: 'example.com', apikey: 'keybbbbbbbbb', user_id: 'user-1', exclude_bulk_requests: true },
    keep: (r) => r.indicator.value === 'example.com' && r.apikey === 'keybbbbbbbbb' && r.user_id === 'user-1' && r.bulk_request_id === null
  },
  {
    name: 'indicator_type with auth_type and a date range',
    filters: { indicator_type: 'ip', auth_type: 'api_key', date_gte: '2024-03-02' },
    keep: (r) => r.indicator.type === 'ip' && r.auth_type === 'api_key' && r.date >= '2024-03-02T00:00:00.000Z'
  },
  {
    name: 'apikey, indicator_type and date_lt',
    filters: { apikey: 'keyaaaaaaaaa', indicator_type: 'domain', date_lt: '2024-03-03' },
    keep: (r) => r.apikey === 'keyaaaaaaaaa' && r.indicator.type === 'domain' && r.date < '2024-03-03T00:00:00.000Z'
  },
  {
    name: 'auth_type and exclude_bulk_requests',
    filters: { auth_type: 'api_key', exclude_bulk_requests: true },
    keep: (r) => r.auth_type === 'api_key' && r.bulk_request_id === null
  }
]

/** Records of one request (same envelope, one per indicator), as the service writes them. */
function requestRecords (tenant: string, date: string, requestId: string, n: number, extra: Partial<HistoryRecord> = {}): HistoryRecord[] {
  return Array.from({ length: n }, (_, i) => record({
    tenant,
    date,
    request_id: requestId,
    bulk_request_id: `bulk-${requestId}`,
    indicator: i % 2 === 0
      ? { type: 'ip', value: `198.51.100.${i}`, normalized: `198.51.100.${i}` }
      : { type: 'domain', value: `d${i}.example`, normalized: `d${i}.example` },
    ...extra
  }))
}

/** Rows of records under one uid (the service's writer cuts a request's rows into batches anywhere). */
function rowsOf (records: HistoryRecord[], uid: string): HistoryRow[] {
  return toRows(records).map((r) => ({ ...r, uid }))
}

for (const backend of storeBackends) {
  test(`${backend.name} store contract`, async (t) => {
    if (backend.skip !== null) {
      t.skip(backend.skip)
      return
    }
    const h = await backend.open()
    t.after(() => h.cleanup())
    const { store } = h

    await t.test('migrate is idempotent', async () => {
      await store.migrate()
      await store.migrate()
    })

    // ---- tenant allowlists

    await t.test('allowlist entries are stored per tenant, listed oldest first by cursor, and deleted only by their tenant', async () => {
      const added = []
      for (let i = 0; i < 3; i++) {
        added.push(await store.addAllowEntry({
          tenant: 'allow-a', kind: 'domain', value: `d${i}.example`, reason: `reason ${i}`, createdBy: 'keyid', expiresAt: i === 0 ? '2999-01-01T00:00:00.000Z' : null
        }))
      }
      const other = await store.addAllowEntry({ tenant: 'allow-b', kind: 'ip', value: '192.0.2.1', reason: 'b', createdBy: 'keyb', expiresAt: null })
      assert.equal(added[0]!.expiresAt, '2999-01-01T00:00:00.000Z')
      assert.ok(Number.isFinite(Date.parse(added[0]!.createdAt)))
      const p1 = await store.listAllowEntries('allow-a', 2, null)
      assert.deepEqual(p1.entries, added.slice(0, 2))
      assert.notEqual(p1.nextCursor, null)
      const p2 = await store.listAllowEntries('allow-a', 2, p1.nextCursor)
      assert.deepEqual(p2.entries, added.slice(2))
      assert.equal(p2.nextCursor, null)
      assert.deepEqual((await store.listAllowEntries('allow-b', 10, null)).entries, [other])
      await assert.rejects(store.listAllowEntries('allow-a', 2, 'bm90LWFuLWlk'), { code: 'INVALID_REQUEST' })
      assert.equal(await store.deleteAllowEntry('allow-b', added[0]!.id), false)
      assert.equal(await store.deleteAllowEntry('allow-a', added[0]!.id), true)
      assert.equal(await store.deleteAllowEntry('allow-a', added[0]!.id), false)
      assert.deepEqual((await store.listAllowEntries('allow-a', 10, null)).entries, added.slice(1))
      // activeAt leaves out what has expired by then, page by page (an expiry exactly then has expired).
      const soon = await store.addAllowEntry({ tenant: 'allow-a', kind: 'ip', value: '192.0.2.9', reason: 'soon', createdBy: 'keyid', expiresAt: '2030-01-01T00:00:00.000Z' })
      const later = await store.addAllowEntry({ tenant: 'allow-a', kind: 'ip', value: '192.0.2.10', reason: 'later', createdBy: 'keyid', expiresAt: '2031-01-01T00:00:00.000Z' })
      assert.deepEqual((await store.listAllowEntries('allow-a', 10, null, '2029-12-31T23:59:59.999Z')).entries, [...added.slice(1), soon, later])
      assert.deepEqual((await store.listAllowEntries('allow-a', 10, null, '2030-01-01T00:00:00.000Z')).entries, [...added.slice(1), later])
      const q1 = await store.listAllowEntries('allow-a', 1, null, '2030-06-01T00:00:00.000Z')
      assert.deepEqual(q1.entries, added.slice(1, 2))
      const q2 = await store.listAllowEntries('allow-a', 5, q1.nextCursor, '2030-06-01T00:00:00.000Z')
      assert.deepEqual(q2.entries, [added[2], later])
      assert.equal(q2.nextCursor, null)
    })

    // ---- feedback

    await t.test('feedback is stored per tenant with its signals, listed newest first by cursor and filter, and summarized per signal', async () => {
      const base = { indicatorType: 'ip', indicatorValue: '198.51.100[.]23', indicatorNormalized: '198.51.100.23', note: 'n', score: 80, category: 'malware', engineVersion: 'ev', dataTimestamp: '2026-01-01T00:00:00.000Z' }
      const a1 = await store.addFeedback({ ...base, tenant: 'fb-a', verdict: 'false_positive', signalIds: ['s1', 's2'], createdBy: 'k1' })
      const a2 = await store.addFeedback({ ...base, tenant: 'fb-a', verdict: 'true_positive', signalIds: ['s2', 's3', 's2'], createdBy: 'k2' })
      const a3 = await store.addFeedback({ ...base, tenant: 'fb-a', verdict: 'false_positive', signalIds: [], createdBy: 'k1', indicatorNormalized: 'x.example', indicatorType: 'domain' })
      const b1 = await store.addFeedback({ ...base, tenant: 'fb-b', verdict: 'false_positive', signalIds: ['s1'], createdBy: 'kb' })
      assert.match(a1.id, /^fb_/)
      assert.deepEqual(a2.signalIds, ['s2', 's3'], 'a signal counts once per entry')
      assert.ok(Number.isFinite(Date.parse(a1.createdAt)))
      const all = await store.listFeedback('fb-a', {}, 10, null)
      assert.deepEqual(all.entries, [a3, a2, a1])
      assert.equal(all.nextCursor, null)
      const p1 = await store.listFeedback('fb-a', {}, 2, null)
      assert.deepEqual(p1.entries, [a3, a2])
      const p2 = await store.listFeedback('fb-a', {}, 2, p1.nextCursor)
      assert.deepEqual(p2.entries, [a1])
      assert.equal(p2.nextCursor, null)
      const ids = async (filters: object): Promise<string[]> => (await store.listFeedback('fb-a', filters, 10, null)).entries.map((e) => e.id)
      assert.deepEqual(await ids({ verdict: 'false_positive' }), [a3.id, a1.id])
      assert.deepEqual(await ids({ signalId: 's2' }), [a2.id, a1.id])
      assert.deepEqual(await ids({ signalId: 's1' }), [a1.id], 'another tenant\'s signal rows are not read')
      assert.deepEqual(await ids({ indicator: 'x.example' }), [a3.id])
      assert.deepEqual(await ids({ createdBy: 'k2' }), [a2.id])
      // Entries made within one millisecond share a date: the expected set is computed from the dates.
      assert.deepEqual(await ids({ since: a2.createdAt }), [a3, a2, a1].filter((e) => e.createdAt >= a2.createdAt).map((e) => e.id))
      assert.deepEqual(await ids({ until: a2.createdAt }), [a3, a2, a1].filter((e) => e.createdAt < a2.createdAt).map((e) => e.id))
      assert.deepEqual(await ids({ until: '2000-01-01' }), [])
      assert.deepEqual(await ids({ since: '2000-01-01T00:00:00Z', until: '2999-01-01' }), [a3.id, a2.id, a1.id])
      assert.deepEqual((await store.listFeedback('fb-b', {}, 10, null)).entries, [b1])
      for (const bad of [{ verdict: 'maybe' }, { since: 'yesterday' }, { until: '2024-02-30' }]) {
        await assert.rejects(store.listFeedback('fb-a', bad as never, 10, null), { code: 'INVALID_REQUEST' })
      }
      await assert.rejects(store.listFeedback('fb-a', {}, 10, 'bm90LWFuLWlk'), { code: 'INVALID_REQUEST' })
      await assert.rejects(store.listFeedback('fb-a', {}, 0, null), { code: 'INVALID_REQUEST' })
      const summary = await store.feedbackSummary('fb-a', {})
      assert.deepEqual(summary, {
        since: null,
        until: null,
        falsePositive: 2,
        truePositive: 1,
        signals: [
          { signalId: 's1', falsePositive: 1, truePositive: 0 },
          { signalId: 's2', falsePositive: 1, truePositive: 1 },
          { signalId: 's3', falsePositive: 0, truePositive: 1 }
        ]
      })
      const none = await store.feedbackSummary('fb-a', { since: '2999-01-01' })
      assert.deepEqual([none.since, none.falsePositive, none.truePositive, none.signals], ['2999-01-01T00:00:00.000Z', 0, 0, []])
      await assert.rejects(store.feedbackSummary('fb-a', { since: 'soon' }), { code: 'INVALID_REQUEST' })
      assert.equal(await store.deleteFeedback('fb-b', a1.id, null), 'missing')
      assert.equal(await store.deleteFeedback('fb-a', a1.id, 'k2'), 'not_owner')
      assert.equal(await store.deleteFeedback('fb-a', 'not-an-id', null), 'missing')
      assert.equal(await store.deleteFeedback('fb-a', a1.id, 'k1'), 'deleted')
      assert.equal(await store.deleteFeedback('fb-a', a1.id, null), 'missing')
      assert.equal(await store.deleteFeedback('fb-a', a2.id, null), 'deleted')
      assert.deepEqual((await store.feedbackSummary('fb-a', {})).signals, [])
      assert.deepEqual((await store.feedbackSummary('fb-b', {})).signals, [{ signalId: 's1', falsePositive: 1, truePositive: 0 }])
      assert.deepEqual(await ids({}), [a3.id])
    })

    await t.test('ping succeeds on an open store', async () => {
      await store.ping()
    })

    // ---- keys

    await t.test('a created key verifies to its record, and the record never holds the secret', async () => {
      const before = await store.countKeys()
      const { key, record } = await store.createKey({ tenant: 'acme', permissions: ['verdict', 'verdict_bulk'], quota: 1000 })
      assert.match(key, /^iocv_[a-z2-7]{12}_[A-Za-z0-9_-]{43}$/)
      assert.equal(key.slice(5, 17), record.id)
      assert.deepEqual({ ...record, id: '', createdAt: '' }, {
        id: '',
        tenant: 'acme',
        permissions: ['verdict', 'verdict_bulk'],
        quota: 1000,
        createdAt: '',
        revokedAt: null,
        rateLimit: null,
        expiresAt: null,
        allowedCidrs: null,
        lastUsedAt: null
      })
      assert.ok(!Number.isNaN(Date.parse(record.createdAt)))
      assert.deepEqual(await store.verifyKey(key), record)
      assert.equal(await store.countKeys(), before + 1)
      const listed = await store.listKeys()
      assert.deepEqual(listed.find((k) => k.id === record.id), record)
      assert.ok(!JSON.stringify(listed).includes(key.slice(18)), 'listKeys must not expose the secret')
    })

    await t.test('a key keeps its rate limit, expiry and networks; touchKey records the last use and never moves it back', async () => {
      const { key, record } = await store.createKey({
        tenant: 'acme', permissions: ['verdict'], rateLimit: 120, expiresAt: '2099-06-01T12:00:00+02:00', allowedCidrs: ['192.0.2.77/24', '2001:db8::1']
      })
      assert.deepEqual([record.rateLimit, record.expiresAt, record.allowedCidrs, record.lastUsedAt], [120, '2099-06-01T10:00:00.000Z', ['192.0.2.0/24', '2001:db8::1/128'], null])
      assert.deepEqual(await store.verifyKey(key), record)
      await store.touchKey(record.id, '2026-11-25T10:00:00.000Z')
      await store.touchKey(record.id, '2026-11-25T09:00:00.000Z')
      assert.equal((await store.listKeys()).find((k) => k.id === record.id)?.lastUsedAt, '2026-11-25T10:00:00.000Z')
      for (const bad of [{ rateLimit: 0 }, { expiresAt: '2000-01-01T00:00:00Z' }, { expiresAt: 'soon' }, { allowedCidrs: ['10.0.0.0/33'] }, { allowedCidrs: [] }]) {
        await assert.rejects(store.createKey({ tenant: 'acme', permissions: ['verdict'], ...bad }), { code: 'INVALID_KEY_OPTIONS' }, JSON.stringify(bad))
      }
    })

    await t.test('a key past its expiry no longer verifies', async () => {
      const { key } = await store.createKey({ tenant: 'acme', permissions: ['verdict'], expiresAt: new Date(Date.now() + 300).toISOString() })
      assert.notEqual(await store.verifyKey(key), null)
      await new Promise((resolve) => setTimeout(resolve, 350))
      assert.equal(await store.verifyKey(key), null)
    })

    // ---- dashboard users and sessions

    await t.test('a user signs in with the right password only, never by name alone, and the hash is never listed', async () => {
      const user = await store.accounts.createUser({ tenant: 'acme', username: `ana-${seq++}`, role: 'analyst', password: 'correct horse battery' })
      assert.deepEqual({ ...user, createdAt: '' }, { username: user.username, tenant: 'acme', role: 'analyst', createdAt: '', disabledAt: null })
      assert.deepEqual(await store.accounts.verifyPassword(user.username, 'correct horse battery'), user)
      assert.equal(await store.accounts.verifyPassword(user.username, 'correct horse batterY'), null)
      assert.equal(await store.accounts.verifyPassword('nobody-here', 'correct horse battery'), null)
      assert.ok(!JSON.stringify(await store.accounts.listUsers()).includes('scrypt'), 'no password hash in the list')
      await assert.rejects(store.accounts.createUser({ tenant: 'acme', username: user.username, password: 'another long password' }), { code: 'INVALID_USER_OPTIONS' })
      for (const bad of [{ username: 'Bad Name' }, { password: 'short' }, { role: 'root' }, { tenant: '' }]) {
        await assert.rejects(store.accounts.createUser({ tenant: 'acme', username: `ok-${seq++}`, password: 'a long enough password', ...bad } as never), { code: 'INVALID_USER_OPTIONS' }, JSON.stringify(bad))
      }
    })

    await t.test('a session lives until sign-out, its idle or absolute expiry, or its user being disabled', async () => {
      const times = { idleMs: 60_000, absoluteMs: 3_600_000 }
      const user = await store.accounts.createUser({ tenant: 'acme', username: `sam-${seq++}`, role: 'admin', password: 'correct horse battery' })
      const { id, session } = await store.accounts.createSession(user, times)
      assert.match(id, /^[A-Za-z0-9_-]{43}$/)
      assert.deepEqual(await store.accounts.getSession(id, times), session)
      assert.equal(session.role, 'admin')
      assert.equal(await store.accounts.getSession(id.slice(0, -1) + (id.endsWith('A') ? 'B' : 'A'), times), null)
      await store.accounts.deleteSession(id)
      assert.equal(await store.accounts.getSession(id, times), null)
      const idle = await store.accounts.createSession(user, { idleMs: 1, absoluteMs: 3_600_000 })
      await new Promise((resolve) => setTimeout(resolve, 5))
      assert.equal(await store.accounts.getSession(idle.id, { idleMs: 1, absoluteMs: 3_600_000 }), null, 'idle expiry')
      const short = await store.accounts.createSession(user, { idleMs: 60_000, absoluteMs: 1 })
      await new Promise((resolve) => setTimeout(resolve, 5))
      assert.equal(await store.accounts.getSession(short.id, times), null, 'absolute expiry')
      const live = await store.accounts.createSession(user, times)
      assert.equal(await store.accounts.disableUser(user.username), true)
      assert.equal(await store.accounts.getSession(live.id, times), null)
      assert.equal(await store.accounts.verifyPassword(user.username, 'correct horse battery'), null)
      assert.equal(await store.accounts.disableUser(user.username), false)
    })

    await t.test('a user keeps their newest 100 sessions: one more sign-in ends the oldest, not another user\'s', async () => {
      const times = { idleMs: 60_000, absoluteMs: 3_600_000 }
      const user = await store.accounts.createUser({ tenant: 'acme', username: `many-${seq++}`, role: 'analyst', password: 'correct horse battery' })
      const other = await store.accounts.createUser({ tenant: 'acme', username: `other-${seq++}`, role: 'analyst', password: 'correct horse battery' })
      const theirs = await store.accounts.createSession(other, times)
      const ids: string[] = []
      for (let i = 0; i < 103; i++) {
        ids.push((await store.accounts.createSession(user, times)).id)
        // Distinct creation times, so "oldest" is one session (a store compares them to the millisecond).
        await new Promise((resolve) => setTimeout(resolve, 2))
      }
      for (const id of ids.slice(0, 3)) assert.equal(await store.accounts.getSession(id, times), null, 'the oldest three ended')
      for (const id of ids.slice(3)) assert.notEqual(await store.accounts.getSession(id, times), null)
      assert.notEqual(await store.accounts.getSession(theirs.id, times), null)
    })

    await t.test('a session in use outlives an idle window shorter than a minute, and ends once idle that long', async () => {
      const times = { idleMs: 1_500, absoluteMs: 3_600_000 }
      const user = await store.accounts.createUser({ tenant: 'acme', username: `ida-${seq++}`, role: 'analyst', password: 'correct horse battery' })
      const { id } = await store.accounts.createSession(user, times)
      const started = Date.now()
      while (Date.now() - started < 3_500) {
        assert.notEqual(await store.accounts.getSession(id, times), null, `in use ${Date.now() - started} ms after sign-in`)
        await new Promise((resolve) => setTimeout(resolve, 150))
      }
      await new Promise((resolve) => setTimeout(resolve, 1_700))
      assert.equal(await store.accounts.getSession(id, times), null, 'idle for longer than the window')
    })

    await t.test('permissions are deduplicated into canonical order and quota defaults to unlimited', async () => {
      const { record } = await store.createKey({ tenant: 'acme', permissions: ['admin', 'verdict', 'admin'] })
      assert.deepEqual(record.permissions, ['verdict', 'admin'])
      assert.equal(record.quota, null)
    })

    await t.test('a key with the right id but a wrong secret does not verify', async () => {
      const { key } = await store.createKey({ tenant: 'acme', permissions: ['verdict'] })
      const { key: other } = await store.createKey({ tenant: 'acme', permissions: ['verdict'] })
      const last = key.at(-1) === 'A' ? 'B' : 'A'
      assert.equal(await store.verifyKey(key.slice(0, -1) + last), null)
      assert.equal(await store.verifyKey(key.slice(0, 18) + other.slice(18)), null)
    })

    await t.test('malformed and unknown key strings do not verify', async () => {
      const { key } = await store.createKey({ tenant: 'acme', permissions: ['verdict'] })
      const malformed = [
        '', 'iocv_', 'iocv__', 'garbage', key.slice(0, -1), `${key}A`, key.toUpperCase(), key.replace('iocv_', 'iocx_'),
        ` ${key}`, `${key}\n`, key.replace(/_/g, '-'), `iocv_${'A'.repeat(12)}_${key.slice(18)}`,
        `iocv_${key.slice(5, 17)}_${'é'.repeat(43)}`, 'x'.repeat(100_000),
        `iocv_${'a'.repeat(12)}_${key.slice(18)}` // well-formed, unknown id
      ]
      for (const m of malformed) assert.equal(await store.verifyKey(m), null, `accepted ${JSON.stringify(m.slice(0, 30))}`)
      assert.equal(await store.verifyKey(undefined as unknown as string), null)
    })

    await t.test('a revoked key no longer verifies, and revoking twice or an unknown id returns false', async () => {
      const { key, record } = await store.createKey({ tenant: 'acme', permissions: ['verdict'] })
      const count = await store.countKeys()
      assert.equal(await store.revokeKey(record.id), true)
      assert.equal(await store.verifyKey(key), null)
      assert.equal(await store.revokeKey(record.id), false)
      assert.equal(await store.revokeKey('zzzzzzzzzzzz'), false)
      assert.equal(await store.revokeKey('not an id'), false)
      const listed = (await store.listKeys()).find((k) => k.id === record.id)
      assert.ok(listed?.revokedAt !== null && !Number.isNaN(Date.parse(listed?.revokedAt ?? '')))
      assert.equal(await store.countKeys(), count, 'revoked keys still count, so a bootstrap key is not re-created')
    })

    await t.test('invalid key options are rejected with INVALID_KEY_OPTIONS', async () => {
      const bad = [
        { tenant: 'acme', permissions: ['history'] },
        { tenant: 'acme', permissions: [] },
        { tenant: '', permissions: ['verdict'] },
        { tenant: ' acme', permissions: ['verdict'] },
        { tenant: 'a\nb', permissions: ['verdict'] },
        { tenant: 'x'.repeat(129), permissions: ['verdict'] },
        { tenant: 'acme', permissions: ['verdict'], quota: -1 },
        { tenant: 'acme', permissions: ['verdict'], quota: 1.5 }
      ]
      for (const options of bad) await assert.rejects(store.createKey(options), { code: 'INVALID_KEY_OPTIONS' })
    })

    // ---- history and usage

    await t.test('written history counts one usage increment per row, per tenant, key and UTC day', async () => {
      const tenant = 'usage-tenant'
      const batch = [
        record({ tenant, apikey: 'keyaaaaaaaaa', date: '2024-05-01T23:59:59.999Z' }),
        record({ tenant, apikey: 'keyaaaaaaaaa', date: '2024-05-01T00:00:00.000Z' }),
        record({ tenant, apikey: 'keybbbbbbbbb', date: '2024-05-01T12:00:00.000Z', bulk_request_id: 'b' }),
        record({ tenant, apikey: 'keyaaaaaaaaa', date: '2024-05-02T00:00:00.000Z' }),
        record({ tenant, apikey: 'keyaaaaaaaaa', date: '2024-05-02T01:30:00.000+02:00' }) // 2024-05-01 in UTC
      ]
      await store.writeHistory(batch)
      assert.deepEqual(await store.usage(tenant, null, '2024-05-01'), {
        tenant, day: '2024-05-01', keys: [{ apikey: 'keyaaaaaaaaa', count: 3 }, { apikey: 'keybbbbbbbbb', count: 1 }], total: 4
      })
      assert.deepEqual(await store.usage(tenant, 'keybbbbbbbbb', '2024-05-01'), {
        tenant, day: '2024-05-01', keys: [{ apikey: 'keybbbbbbbbb', count: 1 }], total: 1
      })
      assert.equal(await store.usageForKey('keyaaaaaaaaa', '2024-05-02'), 1)
      assert.equal(await store.usageForKey('keyaaaaaaaaa', '2024-05-03'), 0)
      assert.deepEqual(await store.usage('other-tenant', null, '2024-05-01'), { tenant: 'other-tenant', day: '2024-05-01', keys: [], total: 0 })

      await store.writeHistory(batch.slice(0, 2).map((r) => ({ ...r, request_id: `${r.request_id}-again` })))
      assert.equal(await store.usageForKey('keyaaaaaaaaa', '2024-05-01'), 5)
      for (const day of ['2024-05-01', '2024-05-02']) {
        const rows = await searchAll(store, tenant, { date_gte: day, date_lt: day === '2024-05-01' ? '2024-05-02' : '2024-05-03' })
        assert.equal((await store.usage(tenant, null, day)).total, rows.length, `counters equal rows on ${day}`)
      }
    })

    await t.test('a record is returned as written, with its date in canonical ISO form', async () => {
      const r = record({
        tenant: 'roundtrip',
        date: '2024-06-01T12:00:00+02:00',
        bulk_request_id: 'bulk-rt',
        indicator: { type: 'domain', value: 'EXAMPLE.org\u0000"\\', normalized: 'example.org' },
        labels: [{ signal_id: 's1', direction: 'malicious' }],
        label_count: 1,
        action_taken: 'block',
        action_source: 'fw-1',
        user_id: 'u-rt',
        project_id: 'p',
        project_name: 'Project ✓'
      })
      await store.writeHistory([r])
      const page = await store.searchHistory('roundtrip', {}, 10, null)
      assert.deepEqual(page, { results: [{ ...r, date: '2024-06-01T10:00:00.000Z' }], next_cursor: null })
      const byValue = await store.searchHistory('roundtrip', { indicator_value: 'EXAMPLE.org\u0000"\\' }, 10, null)
      assert.equal(byValue.results.length, 1)
    })

    await t.test('a value with a lone UTF-16 surrogate is stored, found and returned as sent', async () => {
      const value = 'x\ud800y'
      const r = record({ tenant: 'surrogate', date: '2024-06-02T00:00:00.000Z', indicator: { type: null, value, normalized: value }, user_id: '\udc00' })
      await store.writeHistory([r])
      const page = await store.searchHistory('surrogate', { indicator_value: value }, 10, null)
      assert.deepEqual(page.results, [r])
    })

    await t.test('a batch with one invalid record writes nothing and counts nothing', async () => {
      const tenant = 'atomic'
      const good = record({ tenant, apikey: 'keyaaaaaaaaa', date: '2024-07-01T00:00:00.000Z' })
      for (const bad of [
        { ...good, date: 'yesterday' },
        { ...good, date: '2024-07-01T00:00:00' }, // no offset: ambiguous
        { ...good, tenant: '' },
        { ...good, http_status: 'ok' as unknown as number },
        { ...good, indicator: null as unknown as HistoryRecord['indicator'] }
      ]) {
        await assert.rejects(store.writeHistory([good, bad]), { code: 'INVALID_RECORD' })
      }
      assert.equal((await store.searchHistory(tenant, {}, 10, null)).results.length, 0)
      assert.equal(await store.usageForKey('keyaaaaaaaaa', '2024-07-01'), 0)
      await store.writeHistory([])
    })

    await t.test('an indicator value longer than the indexed prefix still matches exactly', async () => {
      const long = 'a'.repeat(600)
      const emoji = '😀'.repeat(600) // astral characters: two UTF-16 units, one SQL character
      const values = [long, `${long}b`, emoji, `${emoji}b`]
      await store.writeHistory(values.map((value, i) =>
        record({ tenant: 'long', date: `2024-08-01T00:00:0${i}Z`, indicator: { type: null, value, normalized: null } })))
      for (const v of values) {
        const page = await store.searchHistory('long', { indicator_value: v }, 10, null)
        assert.deepEqual(page.results.map((r) => r.indicator.value), [v])
      }
      assert.equal((await store.searchHistory('long', { indicator_value: 'a'.repeat(599) }, 10, null)).results.length, 0)
    })

    const tenantA = fixture('tenant-a', 'A')
    const tenantB = fixture('tenant-b', 'B') // same keys, users and values as tenant A
    await store.writeHistory([...tenantA, ...tenantB])

    for (const c of kFilterCases) {
      await t.test(`filter ${c.name} returns exactly the matching rows of the tenant, newest first`, async () => {
        const expected = newestFirst(tenantA.filter(c.keep))
        const got = await searchAll(store, 'tenant-a', c.filters)
        assert.deepEqual(got.map((r) => r.request_id), expected)
        const paged = await searchAll(store, 'tenant-a', c.filters, 4)
        assert.deepEqual(paged.map((r) => r.request_id), expected, 'same rows when paginated by 4')
      })
    }

    await t.test("another tenant's rows are never returned, whatever the filters", async () => {
      for (const c of kFilterCases) {
        for (const [tenant, prefix] of [['tenant-a', 'A-'], ['tenant-b', 'B-']] as const) {
          const got = await searchAll(store, tenant, c.filters, 7)
          assert.ok(got.every((r) => r.tenant === tenant && r.request_id.startsWith(prefix)), `${c.name} leaked into ${tenant}`)
        }
        assert.deepEqual((await store.searchHistory('tenant-c', c.filters, 10, null)).results, [])
      }
      // A cursor carries a position, not a tenant: replayed on another tenant it still only reads that tenant.
      const page = await store.searchHistory('tenant-a', {}, 5, null)
      const other = await searchAll(store, 'tenant-b', {}, 1000)
      const replay = await store.searchHistory('tenant-b', {}, 1000, page.next_cursor)
      assert.ok(replay.results.every((r) => r.tenant === 'tenant-b'))
      assert.ok(replay.results.length < other.length)
    })

    for (const c of kFilterCases) {
      await t.test(`filter ${c.name} is served by a tenant-prefixed index without sorting`, async () => {
        const first = await store.searchHistory('tenant-a', {}, 3, null)
        for (const cursor of [null, first.next_cursor]) {
          const plan = await store.explainSearch('tenant-a', c.filters, cursor)
          assert.deepEqual(h.planProblems(plan), [], plan.join('\n'))
        }
      })
    }

    await t.test('cursor pagination over more rows than the limit returns every row once, in order', async () => {
      const tenant = 'pages'
      const rows: HistoryRecord[] = []
      for (let i = 0; i < 25; i++) {
        // Groups of three share a millisecond, so pages split inside a group and ordering relies on the id.
        rows.push(record({ tenant, date: new Date(Date.UTC(2024, 8, 1, 0, 0, Math.floor(i / 3))).toISOString(), apikey: i % 2 === 0 ? 'keyaaaaaaaaa' : 'keybbbbbbbbb' }))
      }
      await store.writeHistory(rows.slice(0, 10))
      await store.writeHistory(rows.slice(10))
      const expected = newestFirst(rows)
      const sizes: number[] = []
      const seen: string[] = []
      let cursor: string | null = null
      do {
        const page = await store.searchHistory(tenant, {}, 7, cursor)
        sizes.push(page.results.length)
        seen.push(...page.results.map((r) => r.request_id))
        cursor = page.next_cursor
      } while (cursor !== null)
      assert.deepEqual(sizes, [7, 7, 7, 4])
      assert.deepEqual(seen, expected)
      assert.equal(new Set(seen).size, 25)

      // A result count that is an exact multiple of the limit ends with next_cursor null, not an empty page.
      const exact = await store.searchHistory(tenant, {}, 25, null)
      assert.equal(exact.results.length, 25)
      assert.equal(exact.next_cursor, null)

      const filtered = await searchAll(store, tenant, { apikey: 'keyaaaaaaaaa' }, 2)
      assert.deepEqual(filtered.map((r) => r.request_id), newestFirst(rows.filter((r) => r.apikey === 'keyaaaaaaaaa')))
    })

    await t.test('requests with many records page through request boundaries and inside requests', async () => {
      const tenant = 'multi'
      const date = '2024-10-01T00:00:00.000Z'
      const written = [
        ...requestRecords(tenant, date, 'm1', 9),
        ...requestRecords(tenant, date, 'm2', 1),
        ...requestRecords(tenant, '2024-10-01T00:00:01.000Z', 'm3', 6),
        ...requestRecords(tenant, date, 'm4', 5) // older than m3 although written after it
      ]
      await store.writeHistory(written)
      const key = (r: HistoryRecord): string => `${r.request_id}/${r.indicator.value}`
      const cases: Array<[SearchFilters, (r: HistoryRecord) => boolean]> = [
        [{}, () => true],
        [{ apikey: 'aaaaaaaaaaaa' }, () => true],
        [{ indicator_type: 'ip' }, (r) => r.indicator.type === 'ip'],
        [{ date_gte: '2024-10-01', date_lt: '2024-10-01T00:00:01Z' }, (r) => r.date === date]
      ]
      for (const [filters, keep] of cases) {
        const want = written.map((r, i) => ({ r, i })).filter((x) => keep(x.r))
          .sort((x, y) => (x.r.date < y.r.date ? 1 : x.r.date > y.r.date ? -1 : y.i - x.i)).map((x) => key(x.r))
        for (const limit of [1, 2, 4, 7, 100]) {
          const got = (await searchAll(store, tenant, filters, limit)).map(key)
          assert.deepEqual(got, want, `limit ${limit}, filters ${JSON.stringify(filters)}`)
        }
      }
      const page = await store.searchHistory(tenant, {}, 3, null)
      assert.deepEqual(page.results[0], { ...written[15], date: '2024-10-01T00:00:01.000Z' }, 'records come back whole')
    })

    await t.test('a request written in two batches, continued after another write, or replayed, reads back in order', async () => {
      const tenant = 'split'
      const date = '2024-11-01T00:00:00.000Z'
      const a = requestRecords(tenant, date, 'sa', 7)
      const b = requestRecords(tenant, date, 'sb', 3)
      const c = requestRecords(tenant, date, 'sc', 4)
      const d = requestRecords(tenant, date, 'sd', 2)
      const inserted: HistoryRecord[] = []
      const write = async (records: HistoryRecord[], uid: string): Promise<void> => {
        await store.writeHistoryRows(rowsOf(records, uid))
        inserted.push(...records)
      }
      await write(a.slice(0, 3), 'uid-a') // a request cut across two consecutive batches
      await write(a.slice(3), 'uid-a')
      await write(b, 'uid-b')
      await write(c.slice(0, 2), 'uid-c') // continued after another request's batch: not contiguous
      await write(d, 'uid-d')
      await write(c.slice(2), 'uid-c')
      await write(b, 'uid-b') // a replayed batch is stored again (at-least-once), and counted again
      const key = (r: HistoryRecord): string => `${r.request_id}/${r.indicator.value}`
      const want = inserted.map(key).reverse() // one date: newest first is reverse insertion order
      for (const limit of [1, 3, 1000]) {
        assert.deepEqual((await searchAll(store, tenant, {}, limit)).map(key), want, `limit ${limit}`)
        assert.deepEqual((await searchAll(store, tenant, { apikey: 'aaaaaaaaaaaa' }, limit)).map(key), want)
        assert.deepEqual((await searchAll(store, tenant, { indicator_type: 'ip' }, limit)).map(key),
          inserted.filter((r) => r.indicator.type === 'ip').map(key).reverse())
      }
      assert.equal((await store.usage(tenant, null, '2024-11-01')).total, inserted.length, 'counters equal rows')
      // A uid repeated within one batch (not something the writer does) is still stored in order.
      const e = requestRecords(tenant, '2024-11-02T00:00:00.000Z', 'se', 3)
      const f = requestRecords(tenant, '2024-11-02T00:00:00.000Z', 'sf', 1)
      await store.writeHistoryRows([...rowsOf(e.slice(0, 1), 'uid-e'), ...rowsOf(f, 'uid-f'), ...rowsOf(e.slice(1), 'uid-e')])
      assert.deepEqual((await searchAll(store, tenant, { date_gte: '2024-11-02' }, 2)).map(key),
        [...e.slice(1).reverse(), ...f, e[0] as HistoryRecord].map(key))
    })

    await t.test('purge deletes a request larger than one purge batch, and only requests before the cutoff', async () => {
      const tenant = 'purge-big'
      const big = requestRecords(tenant, '2000-01-01T00:00:00.000Z', 'pb', 12_001, { apikey: 'keypurgebbbb' })
      const kept = requestRecords(tenant, '2003-01-01T00:00:00.000Z', 'pk', 3, { apikey: 'keypurgebbbb' }) // after the next test's cutoff
      await store.writeHistory([...big, ...kept])
      assert.equal(await store.purgeHistory(new Date('2000-01-02T00:00:00.000Z')), 12_001)
      assert.equal((await searchAll(store, tenant, {})).length, 3)
      assert.equal((await searchAll(store, tenant, { indicator_type: 'ip' })).length, 2)
      assert.equal(await store.usageForKey('keypurgebbbb', '2000-01-01'), 12_001)
    })

    await t.test('an invalid cursor, date filter or limit is rejected with INVALID_REQUEST', async () => {
      const b64 = (s: string): string => Buffer.from(s).toString('base64url')
      const cursors = [
        'not a cursor!', '', 'AAAA', b64('hello'), b64('[1,2]'), b64('["2024-01-01T00:00:00.000Z"]'),
        b64('["2024-01-01T00:00:00.000Z","-1"]'), b64('["2024-01-01T00:00:00.000Z","0"]'),
        b64('["2024-13-01T00:00:00.000Z","1"]'), b64('["2024-01-01T00:00:00Z","1"]'),
        b64('["2024-01-01T00:00:00.000Z","99999999999999999999"]'), b64('["2024-01-01T00:00:00.000Z",1]'),
        'A'.repeat(500)
      ]
      for (const cursor of cursors) {
        await assert.rejects(store.searchHistory('tenant-a', {}, 10, cursor), { code: 'INVALID_REQUEST' }, `cursor ${cursor.slice(0, 40)}`)
      }
      for (const filters of [
        { date_gte: 'yesterday' }, { date_lt: '2024-02-30' }, { date_gte: '2024-01-01T10:00:00' },
        { exclude_bulk_requests: 'yes' as unknown as boolean }, { apikey: 5 as unknown as string }
      ]) {
        await assert.rejects(store.searchHistory('tenant-a', filters, 10, null), { code: 'INVALID_REQUEST' })
      }
      for (const limit of [0, -1, 1001, 2.5, Number.NaN]) {
        await assert.rejects(store.searchHistory('tenant-a', {}, limit, null), { code: 'INVALID_REQUEST' })
      }
      await assert.rejects(store.usage('tenant-a', null, '2024-1-1'), { code: 'INVALID_REQUEST' })
    })

    await t.test('purge deletes rows older than the cutoff and keeps the usage counters', async () => {
      const tenant = 'purge'
      const old = [
        record({ tenant, apikey: 'keypurgeaaaa', date: '2001-01-01T00:00:00.000Z' }),
        record({ tenant, apikey: 'keypurgeaaaa', date: '2001-06-30T23:59:59.999Z' })
      ]
      const kept = [
        record({ tenant, apikey: 'keypurgeaaaa', date: '2001-07-01T00:00:00.000Z' }),
        record({ tenant, apikey: 'keypurgeaaaa', date: '2002-01-01T00:00:00.000Z' })
      ]
      await store.writeHistory([...old, ...kept])
      assert.equal(await store.purgeHistory(new Date('2001-07-01T00:00:00.000Z')), 2)
      assert.deepEqual((await searchAll(store, tenant, {})).map((r) => r.request_id), newestFirst(kept))
      assert.equal(await store.usageForKey('keypurgeaaaa', '2001-01-01'), 1, 'billing counters survive the purge')
      assert.equal(await store.purgeHistory(new Date('2001-07-01T00:00:00.000Z')), 0)
      await assert.rejects(store.purgeHistory(new Date('nope')), { code: 'INVALID_REQUEST' })
    })

    await t.test('a retro-hunt pass owed keeps the oldest lookback and is cleared only by the last note made; the snapshot hunted with is kept', async () => {
      const owed = store.retroHunt
      assert.equal(await owed.owed(), null)
      const first = await owed.noteOwed(5_000)
      const second = await owed.noteOwed(9_000) // a later pass with a shorter lookback
      assert.equal(await owed.owed(), 5_000)
      assert.notEqual(first, second)
      // The first pass finishing does not clear what was noted after it; the last note's pass does.
      await owed.clearOwed(first)
      assert.equal(await owed.owed(), 5_000)
      const third = await owed.noteOwed(1_000)
      await owed.clearOwed(second)
      assert.equal(await owed.owed(), 1_000)
      await owed.clearOwed(third)
      assert.equal(await owed.owed(), null)
      // The snapshot last hunted with: none, then the last one noted.
      assert.equal(await owed.hunted(), null)
      await owed.noteHunted({ version: '0123456789abcdef', inputKey: 'a'.repeat(64) })
      await owed.noteHunted({ version: 'fedcba9876543210', inputKey: 'b'.repeat(64) })
      assert.deepEqual(await owed.hunted(), { version: 'fedcba9876543210', inputKey: 'b'.repeat(64) })
    })

    await t.test('retro-hunt hits are handed to the webhooks once, at each webhook\'s min_score, by whichever store gets there', async () => {
      const hooks = store.webhooks
      const strict = await hooks.create({ tenant: 'hand-a', url: 'https://a.example/strict', minScore: 80, description: '', secretSealed: 's1' })
      const all = await hooks.create({ tenant: 'hand-a', url: 'https://a.example/all', minScore: 0, description: '', secretSealed: 's2' })
      const body = (id: string, hits: Array<{ id: string }>): string => JSON.stringify({ delivery_id: id, hits: hits.map((h) => h.id) })
      assert.equal(await hooks.handOnHits(10, 10, body), 0, 'nothing to hand on')
      const recorded = await store.retroHunt.addHits([
        newHit('hand-a', 'low.example', 70, 'malware'),
        newHit('hand-a', 'high.example', 90, 'malware'),
        newHit('hand-b', 'no-hook.example', 95, 'botnet'),
        ...Array.from({ length: 5 }, (_, i) => newHit('hand-a', `many-${i}.example`, 85, 'malware'))
      ])
      assert.equal(recorded.length, 8)
      // Two stores (two instances of a fleet): each hit is handed on by one of them. At once on PostgreSQL; SQLite's two
      // connections in one thread cannot both wait for its write lock (one instance owns a SQLite store).
      const other = await h.openAnother()
      let handed: number[]
      try {
        handed = backend.name === 'SQLite'
          ? [await hooks.handOnHits(3, 4, body), await other.webhooks.handOnHits(3, 4, body)]
          : await Promise.all([hooks.handOnHits(3, 4, body), other.webhooks.handOnHits(3, 4, body)])
        while (true) {
          const n = await other.webhooks.handOnHits(3, 4, body)
          handed.push(n)
          if (n === 0) break
        }
      } finally {
        await other.close()
      }
      assert.equal(handed.reduce((a, b) => a + b, 0), 8, `every hit handed on once (${handed.join(', ')})`)
      assert.equal(await hooks.handOnHits(10, 10, body), 0, 'and never again')
      const due = await hooks.claimDue(Date.now() + 60_000, 100, 1_000)
      const sent = (hook: string): string[] => due.filter((d) => d.webhookId === hook).flatMap((d) => (JSON.parse(d.body) as { hits: string[] }).hits).sort()
      const ids = (pred: (value: string) => boolean): string[] => recorded.filter((r) => pred(r.indicator.value)).map((r) => r.id).sort()
      assert.deepEqual(sent(all.id), ids((v) => v !== 'no-hook.example'), 'the min_score 0 webhook gets every hit of its tenant')
      assert.deepEqual(sent(strict.id), ids((v) => v !== 'no-hook.example' && v !== 'low.example'), 'min_score 80 leaves out the 70')
      assert.ok(due.every((d) => (JSON.parse(d.body) as { hits: string[], delivery_id: string }).hits.length <= 4 && JSON.parse(d.body).delivery_id === d.id), 'at most perDelivery hits each, under its own id')
    })

    await t.test('close is idempotent and later calls reject with STORE_CLOSED', async () => {
      const other = await h.openAnother()
      await other.ping()
      await other.close()
      await other.close()
      await assert.rejects(other.ping(), { code: 'STORE_CLOSED' })
      await assert.rejects(other.verifyKey('x'), { code: 'STORE_CLOSED' })
      await assert.rejects(other.writeHistory([record({ tenant: 'x', date: '2024-01-01T00:00:00Z' })]), { code: 'STORE_CLOSED' })
      await store.ping() // the first store is unaffected
    })
  })
}
