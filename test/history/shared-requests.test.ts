/**
 * Single calls of one key and millisecond share one request row in the SQLite store (docs/ARCHITECTURE.md "A single
 * call"): each call's item carries its own envelope members, so every search answers each record exactly as it was
 * sent, whatever filter, cursor or page size, and purge and usage count them as before.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import Database from 'better-sqlite3'
import { HistoryItems, type HistoryPart } from '../../src/history/block.ts'
import { historyParts } from '../../src/history/codec.ts'
import { memberNames, recordJson } from '../../src/history/record.ts'
import type { HistoryEnvelope } from '../../src/history/types.ts'
import { SqliteStore } from '../../src/store/sqlite.ts'
import type { SearchFilters } from '../../src/store/types.ts'
import { historyEnvelope, itemFragment } from '../fixtures/history-record.ts'

const kTenant = 'shared'
const kMs = Date.UTC(2026, 11, 6, 12, 0, 0, 250)

interface Call { envelope: HistoryEnvelope, fragment: string, value: string, type: string }

/** A single call at `ms` by `apikey`: its own request id, source and log-only fields. */
function call (i: number, ms: number, apikey = 'keyaaaaaaaaa', extra: Partial<HistoryEnvelope> = {}): Call {
  const value = `198.51.100.${i}`
  const envelope = historyEnvelope({
    tenant: kTenant,
    request_id: `req-${i}`,
    count: 1,
    date: new Date(ms).toISOString(),
    apikey,
    label_details: i % 2 === 0 ? 'top' : 'none',
    source: i % 3 === 0 ? null : { channel: 'siem', product: `p${i}` },
    query_type: i % 4 === 0 ? `q${i}` : null,
    ...extra
  })
  const fragment = itemFragment({ type: 'ip', value, normalized: value }, '"risk":null,"scores":null,"labels":[],"label_count":0', i % 5 === 0 ? 'blocked' : null, null)
  return { envelope, fragment, value, type: 'ip' }
}

/** Each call's part: every other one with its verdict as a tail (as scoring writes it), the rest whole fragments. */
function parts (calls: readonly Call[]): HistoryPart[] {
  const out: HistoryPart[] = []
  calls.forEach((c, i) => {
    const items = new HistoryItems(1)
    const indicator = `"indicator":${JSON.stringify({ type: c.type, value: c.value, normalized: c.value })},`
    if (i % 2 === 0) items.addVerdict(c.type, c.value, c.value, c.fragment.slice(indicator.length))
    else items.add(c.type, c.value, c.value, c.fragment)
    historyParts(c.envelope, [items.encode()], out)
  })
  return out
}

/** The record a search must answer for a call, as JSON text (member order included). */
function expected (c: Call): string {
  const { count: _count, ...fields } = c.envelope
  return JSON.stringify(JSON.parse(recordJson(JSON.stringify(fields), c.fragment)))
}

async function all (store: SqliteStore, filters: SearchFilters, limit: number): Promise<string[]> {
  const out: string[] = []
  let cursor: string | null = null
  for (let i = 0; i < 100; i++) {
    const page = await store.searchHistory(kTenant, filters, limit, cursor)
    out.push(...page.results.map((r) => JSON.stringify(r)))
    cursor = page.next_cursor
    if (cursor === null) return out
  }
  throw new Error('paging did not end')
}

test('single calls of one key and millisecond share a request row, and every search answers each as sent', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-shared-'))
  const store = new SqliteStore({ path: join(dir, 'h.db') })
  t.after(async () => {
    await store.close()
    rmSync(dir, { recursive: true, force: true })
  })
  await store.migrate()
  // Twelve calls in one millisecond by one key, five in the next (one of them a 400), one by another key, five more
  // of the first key, and one whose envelope lacks a member: the 400, the other key and that one join no row.
  const calls: Call[] = []
  for (let i = 0; i < 12; i++) calls.push(call(i, kMs))
  for (let i = 12; i < 17; i++) calls.push(call(i, kMs + 1, 'keyaaaaaaaaa', i === 14 ? { http_status: 400 } : {}))
  calls.push(call(17, kMs + 1, 'keybbbbbbbbb'))
  for (let i = 18; i < 23; i++) calls.push(call(i, kMs + 1))
  const odd = call(23, kMs + 1)
  const { project_name: _dropped, ...without } = odd.envelope
  calls.push({ ...odd, envelope: without as HistoryEnvelope })
  store.writeHistoryPartsSync(parts(calls.slice(0, 18)), { journal: 'j', position: 1 })
  store.writeHistoryPartsSync(parts(calls.slice(18)), { journal: 'j', position: 2 })

  const raw = new Database(join(dir, 'h.db'), { readonly: true })
  let rows: number
  try {
    rows = raw.prepare('SELECT count(*) FROM history_requests').pluck().get() as number
  } finally {
    raw.close()
  }
  // Rows: the first millisecond's run; in the next, the calls before the 400, the 400, those after it, the other
  // key, the first key's next five (in the next batch), and the call whose envelope lacks a member.
  assert.equal(rows, 7, 'request rows')

  const newestFirst = [...calls].reverse().map(expected)
  for (const limit of [1, 3, 100]) {
    assert.deepEqual(await all(store, {}, limit), newestFirst, `all, pages of ${limit}`)
  }
  const byKey = (k: string): string[] => [...calls].reverse().filter((c) => c.envelope.apikey === k).map(expected)
  assert.deepEqual(await all(store, { apikey: 'keyaaaaaaaaa' }, 4), byKey('keyaaaaaaaaa'))
  assert.deepEqual(await all(store, { apikey: 'keybbbbbbbbb' }, 4), byKey('keybbbbbbbbb'))
  assert.deepEqual(await all(store, { exclude_bulk_requests: true, indicator_type: 'ip' }, 5), newestFirst)
  assert.deepEqual(await all(store, { indicator_value: '198.51.100.7' }, 10), [expected(calls[7] as Call)])
  assert.deepEqual(await all(store, { indicator_type: 'ip' }, 7), newestFirst)
  const second = new Date(kMs + 1).toISOString()
  assert.deepEqual(await all(store, { date_gte: second }, 4), newestFirst.slice(0, 12))
  assert.deepEqual(await all(store, { date_lt: second }, 4), newestFirst.slice(12))
  const usage = await store.usage(kTenant, 'keyaaaaaaaaa', second.slice(0, 10))
  assert.equal(usage.total, 23)
  assert.equal(await store.purgeHistory(new Date(kMs + 1)), 12)
  assert.deepEqual(await all(store, {}, 100), newestFirst.slice(0, 12))
})

test('member names: an object\'s top-level names in order, strings and nesting skipped', () => {
  assert.equal(memberNames('{"a":1,"b":{"c":[1,{"d":"}"}]},"e":"x,\\"f\\":1","g":null}'), '"a","b","e","g"')
  assert.equal(memberNames('{}'), '')
  assert.equal(memberNames('[1]'), null)
  assert.equal(memberNames('{"a":1'), null)
})
