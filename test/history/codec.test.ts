/**
 * History records between threads (src/history/codec.ts, block.ts): what a scoring worker encodes, the writer expands into
 * rows whose stored JSON is exactly the envelope plus the item, for any text the caller sent.
 */
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { test } from 'node:test'
import { HistoryItems, historyParts } from '../../src/history/codec.ts'
import { swapWords, type HistoryPart } from '../../src/history/block.ts'
import { itemTail, kInvalidVerdictMembers } from '../../src/history/record.ts'
import { itemFragment } from '../fixtures/history-record.ts'
import { historyRows } from '../fixtures/history-rows.ts'
import type { HistoryEnvelope } from '../../src/history/types.ts'
import { newRequestUid, recordJson, type HistoryRow } from '../../src/history/rows.ts'

const kEnvelope: HistoryEnvelope = {
  date: '2026-11-21T10:00:00.000Z',
  request_id: 'req-1',
  bulk_request_id: 'b-1',
  http_status: 200,
  auth_type: 'api_key',
  tenant: 't1',
  apikey: 'abcdefabcdef',
  user_id: null,
  evidence_details: 'none',
  label_details: 'none',
  source: { channel: 'siem' },
  scoring_version: null,
  query_type: null,
  project_id: null,
  project_name: null,
  count: 3
}

test('encoded items expand into one row each, with the envelope and item JSON intact for any text', () => {
  const items = new HistoryItems()
  const odd = 'bücher.de \u0000 "quoted" \\ 😀'
  items.add('domain', odd, 'xn--bcher-kva.de', itemFragment({ type: 'domain', value: odd, normalized: 'xn--bcher-kva.de' }, '"risk":{"score":50},"scores":{},"labels":[],"label_count":0', 'block', 'edr'))
  items.add(null, '', null, itemFragment({ type: null, value: '', normalized: null }, kInvalidVerdictMembers, null, null))
  const other = new HistoryItems()
  other.add('ip', '1.2.3.4', '1.2.3.4', itemFragment({ type: 'ip', value: '1.2.3.4', normalized: '1.2.3.4' }, kInvalidVerdictMembers, null, null))
  const rows: HistoryRow[] = []
  historyRows(kEnvelope, [items.encode(), other.encode()], rows)
  assert.equal(rows.length, 3)
  assert.equal(new Set(rows.map((r) => r.uid)).size, 1)
  const first = rows[0] as HistoryRow
  assert.equal(first.indicatorValue, odd.replaceAll('\u0000', '\uFFFD'), 'the indexed column has no NUL')
  assert.equal(first.indicatorType, 'domain')
  assert.equal(rows[1]?.indicatorType, null)
  assert.equal(rows[1]?.indicatorNormalized, null)
  const record = JSON.parse(recordJson(first.envelope, first.item)) as Record<string, unknown>
  assert.deepEqual(record.indicator, { type: 'domain', value: odd, normalized: 'xn--bcher-kva.de' })
  assert.equal(record.request_id, 'req-1')
  assert.equal(record.action_source, 'edr')
  assert.deepEqual(record.source, { channel: 'siem' })
  assert.equal('count' in record, false)
  assert.equal(rows[2]?.indicatorValue, '1.2.3.4')
})

test('an empty chunk encodes and expands to no rows', () => {
  const rows: HistoryRow[] = []
  historyRows({ ...kEnvelope, count: 0 }, [new HistoryItems().encode()], rows)
  assert.deepEqual(rows, [])
})

test('a lone surrogate in one string leaves the strings after it intact', () => {
  const items = new HistoryItems()
  const lone = 'a\ud800'
  items.add('domain', lone, null, itemFragment({ type: 'domain', value: lone, normalized: null }, kInvalidVerdictMembers, null, null))
  items.add('domain', '\udc00b', null, itemFragment({ type: 'domain', value: 'c', normalized: null }, kInvalidVerdictMembers, 'allow', null))
  const rows: HistoryRow[] = []
  historyRows(kEnvelope, [items.encode()], rows)
  assert.equal(rows.length, 2)
  assert.equal(rows[0]?.indicatorValue, 'a\uFFFD', 'replaced as UTF-8 requires, and only that code unit')
  assert.equal(rows[1]?.indicatorValue, '\uFFFDb')
  const second = JSON.parse(recordJson((rows[1] as HistoryRow).envelope, (rows[1] as HistoryRow).item)) as Record<string, unknown>
  assert.deepEqual(second.indicator, { type: 'domain', value: 'c', normalized: null })
  assert.equal(second.action_taken, 'allow')
})

test('halves of a surrogate pair split across two strings are each replaced, never joined into one character', () => {
  const items = new HistoryItems()
  items.add('domain', 'a\ud83d', '\ude00b', itemFragment({ type: 'domain', value: 'v', normalized: null }, kInvalidVerdictMembers, null, null))
  const rows: HistoryRow[] = []
  historyRows(kEnvelope, [items.encode()], rows)
  assert.equal(rows[0]?.indicatorValue, 'a\uFFFD')
  assert.equal(rows[0]?.indicatorNormalized, '\uFFFDb')
})

/** Rows of one encoded part with the `kEnvelope`. */
function rowsOf (part: Uint8Array): HistoryRow[] {
  const rows: HistoryRow[] = []
  historyRows(kEnvelope, [part], rows)
  return rows
}

test('items added by verdict keep each record exact, and items that share members store them once', () => {
  const odd = 'bücher.de \u0000 "quoted" \\ 😀'
  const unknown = '"risk":{"score":50,"strength":"weak"},"scores":{"signal_groups":{},"signal_subgroups":{}},"labels":[],"label_count":0'
  const cases: Array<[string | null, string, string | null, string, string | null, string | null]> = [
    ['domain', odd, 'xn--bcher-kva.de', unknown, 'block', 'edr \u0000 😀'],
    ['ip', '1.2.3.4', '1.2.3.4', unknown, null, null],
    [null, '', null, kInvalidVerdictMembers, null, null],
    ['domain', 'a\ud800', null, kInvalidVerdictMembers, null, null], // lone surrogate: kept whole, still exact
    ['domain', 'example[.]com', 'example.com', unknown, null, null],
    ['ip', '5.6.7.8', '5.6.7.8', '"risk":{"score":90},"scores":{},"labels":[],"label_count":0', null, null]
  ]
  const items = new HistoryItems()
  for (const [type, value, normalized, members, taken, source] of cases) items.addVerdict(type, value, normalized, itemTail(members, taken, source))
  const rows = rowsOf(items.encode())
  assert.equal(rows.length, cases.length)
  cases.forEach(([type, value, normalized, members, taken, source], i) => {
    const row = rows[i] as HistoryRow
    assert.equal(row.item, itemFragment({ type, value, normalized }, members, taken, source), `item ${i}`)
    assert.equal(row.indicatorType, type)
    assert.equal(row.indicatorNormalized, normalized === null ? null : normalized.replaceAll('\u0000', '\uFFFD'))
    const record = JSON.parse(recordJson(row.envelope, row.item)) as Record<string, unknown>
    assert.deepEqual(record.indicator, { type, value, normalized })
  })
  assert.equal(rows[0]?.indicatorValue, odd.replaceAll('\u0000', '\uFFFD'))
  assert.equal(rows[3]?.indicatorValue, 'a\uFFFD')

  // 1,000 items with one set of members: the members are stored once, not 1,000 times.
  const shared = new HistoryItems(1000)
  const each = new HistoryItems(1000)
  for (let i = 0; i < 1000; i++) {
    const ip = `10.0.${i >> 8}.${i & 255}`
    shared.addVerdict('ip', ip, ip, itemTail(unknown, null, null))
    each.add('ip', ip, ip, itemFragment({ type: 'ip', value: ip, normalized: ip }, unknown, null, null))
  }
  const sharedPart = shared.encode()
  assert.ok(sharedPart.byteLength < 1000 * 60, `${sharedPart.byteLength} bytes`)
  assert.ok(each.encode().byteLength > 1000 * unknown.length)
  assert.deepEqual(rowsOf(sharedPart).map((r) => r.item), rowsOf(each.encode()).map((r) => r.item))
})

test('a chunk with more distinct members than a part shares still keeps every record exact', () => {
  const items = new HistoryItems(3000)
  const expected: string[] = []
  for (let i = 0; i < 3000; i++) {
    const members = `"risk":{"score":${i % 1500}},"scores":{},"labels":[],"label_count":0`
    items.addVerdict('domain', `d${i}.example`, `d${i}.example`, itemTail(members, i % 2 === 0 ? 'allow' : null, null))
    expected.push(itemFragment({ type: 'domain', value: `d${i}.example`, normalized: `d${i}.example` }, members, i % 2 === 0 ? 'allow' : null, null))
  }
  assert.deepEqual(rowsOf(items.encode()).map((r) => r.item), expected)
})

test('tails found by the caller\'s key give the same part, byte for byte, as tails found by their text', () => {
  const tails = Array.from({ length: 1500 }, (_, i) => itemTail(`"risk":{"score":${i}},"scores":{},"labels":[],"label_count":0`, null, null))
  const values = ['1.2.3.4', 'bücher.de', 'x\u0000y', 'a\ud800', '😀.example', 'plain.example', '']
  const byText = new HistoryItems(10)
  const byKey = new HistoryItems(10)
  for (let i = 0; i < 6000; i++) {
    // Past the part's 1,024 shared tails too: keys of tails that are not shared find nothing, as their text does not.
    const t = i % 3 === 0 ? i % 1500 : i % 40
    const v = values[i % values.length] as string
    byText.addVerdict('domain', v, i % 2 === 0 ? v : `n${i}`, tails[t] as string)
    byKey.addVerdict('domain', v, i % 2 === 0 ? v : `n${i}`, tails[t] as string, i % 5 === 0 ? -1 : t)
  }
  assert.ok(Buffer.from(byKey.encode()).equals(Buffer.from(byText.encode())))
})

test('a collector reset between parts encodes each part as a new collector would, byte for byte', () => {
  const tail = itemTail('"risk":{"score":1},"scores":{},"labels":[],"label_count":0', null, null)
  const reused = new HistoryItems()
  const calls: Array<[string | null, string, string | null, string, number]> = [
    ['ip', '1.2.3.4', '1.2.3.4', tail, 7],
    ['domain', 'Bücher.DE', 'xn--bcher-kva.de', itemTail(kInvalidVerdictMembers, 'blocked', null), -1],
    [null, 'a\ud800', null, tail, 7],
    ['ip', '5.6.7.8', '5.6.7.8', tail, 7]
  ]
  for (const [type, value, normalized, t, key] of calls) {
    reused.reset()
    reused.addVerdict(type, value, normalized, t, key)
    const fresh = new HistoryItems()
    fresh.addVerdict(type, value, normalized, t, key)
    const part = reused.encode()
    const freshPart = fresh.encode()
    assert.ok(Buffer.from(part).equals(Buffer.from(freshPart)))
    const rows: HistoryRow[] = []
    const freshRows: HistoryRow[] = []
    historyRows({ ...kEnvelope, count: 1 }, [part], rows)
    historyRows({ ...kEnvelope, count: 1 }, [freshPart], freshRows)
    assert.equal(rows.length, 1)
    assert.equal(rows[0]?.item, freshRows[0]?.item)
    assert.equal(rows[0]?.indicatorType, type)
  }
})

/** A part in format 1 (before shared members), as versions before format 2 stored it. */
function formatOnePart (items: Array<[string | null, string, string | null, string]>): Uint8Array {
  const strings = items.flat()
  const text = Buffer.from(strings.map((s) => s ?? '').join(''))
  const head = 12 + 8 * items.length + 4 * strings.length
  const out = Buffer.alloc(head + text.length)
  out.writeUInt32LE(1, 0)
  out.writeUInt32LE(strings.length, 4)
  let at = 12 + 8 * items.length
  let end = 0
  for (const s of strings) {
    if (s === null) {
      out.writeUInt32LE(0xffffffff, at)
    } else {
      end += s.length
      out.writeUInt32LE(end, at)
    }
    at += 4
  }
  text.copy(out, head)
  return out
}

test('parts stored in format 1 read as before', () => {
  const first = itemFragment({ type: 'domain', value: 'bücher.de', normalized: 'xn--bcher-kva.de' }, kInvalidVerdictMembers, 'block', null)
  const second = itemFragment({ type: null, value: '', normalized: null }, kInvalidVerdictMembers, null, null)
  const rows = rowsOf(formatOnePart([['domain', 'bücher.de', 'xn--bcher-kva.de', first], [null, '', null, second]]))
  assert.deepEqual(rows.map((r) => [r.indicatorType, r.indicatorValue, r.indicatorNormalized, r.item]),
    [['domain', 'bücher.de', 'xn--bcher-kva.de', first], [null, '', null, second]])
})

test('a part of an unknown format or with a damaged member table is refused, not misread', () => {
  const items = new HistoryItems()
  items.addVerdict('ip', '1.2.3.4', '1.2.3.4', itemTail(kInvalidVerdictMembers, null, null))
  const part = Buffer.from(items.encode())
  const unknown = Buffer.from(part)
  unknown.writeUInt32LE(3, 0)
  assert.throws(() => rowsOf(unknown), { code: 'INVALID_RECORD' })
  const damaged = Buffer.from(part)
  damaged.writeUInt32LE(7, 12 + 8 + 16) // the item's tail id: no such tail
  assert.throws(() => rowsOf(damaged), { code: 'INVALID_RECORD' })
  assert.equal(rowsOf(part).length, 1, 'the intact part still reads')
})

test('request uids of one process strictly increase, are unique and keep one form, one per request', () => {
  const uids = Array.from({ length: 50_000 }, () => newRequestUid())
  for (let i = 1; i < uids.length; i++) assert.ok((uids[i - 1] as string) < (uids[i] as string), `uid ${i} does not follow the one before`)
  assert.equal(new Set(uids).size, uids.length)
  for (const uid of [uids[0], uids[uids.length - 1]]) assert.match(uid as string, /^[0-9a-z]{9}[0-9a-z]{4}[0-9a-f]{12}$/)
  // The writer gives each request one, shared by its parts, and the next request a later one.
  const parts: HistoryPart[] = []
  const encoded = (n: number): Uint8Array => {
    const items = new HistoryItems()
    for (let i = 0; i < n; i++) items.add('ip', `192.0.2.${i}`, null, itemFragment({ type: 'ip', value: `192.0.2.${i}`, normalized: null }, kInvalidVerdictMembers, null, null))
    return items.encode()
  }
  historyParts(kEnvelope, [encoded(2), encoded(1)], parts)
  historyParts({ ...kEnvelope, request_id: 'req-2', count: 1 }, [encoded(1)], parts)
  assert.equal(parts.length, 3)
  assert.equal(parts[0]?.uid, parts[1]?.uid)
  assert.ok((parts[1]?.uid as string) < (parts[2]?.uid as string))
})

test('a part\'s bytes are pinned: 3,000 items of every kind encode to the bytes the word-by-word encoder wrote', () => {
  // The digest is of the part the encoder wrote before it copied its arrays whole (HistoryItems.encode): items with
  // tails shared by key and by text, more tails than a part shares, no type, a normalized form unlike the value, a
  // fragment of its own and a lone surrogate.
  const items = new HistoryItems(4)
  for (let i = 0; i < 3000; i++) {
    const v = i % 5 === 0 ? `Host${i}.Example.COM.` : `10.${i >> 8 & 255}.${i & 255}.${i % 7}`
    const norm = i % 5 === 0 ? `host${i}.example.com` : v
    const tail = `"risk":{"score":${i % 1100}},"scores":{},"labels":[],"label_count":0,"action_taken":null,"action_source":null`
    if (i % 97 === 0) items.add(null, `bad ${i}`, null, `"indicator":{"type":null,"value":"bad ${i}","normalized":null},${tail}`)
    else if (i % 89 === 0) items.addVerdict('domain', `x\ud800${i}`, null, tail)
    else items.addVerdict(i % 5 === 0 ? 'domain' : 'ip', v, norm, tail, i % 3 === 0 ? i % 1100 : -1)
  }
  const part = items.encode()
  assert.equal(part.byteLength, 272_840)
  assert.equal(createHash('sha256').update(part).digest('hex'), 'e0a5d7194562e97d85257569a3c803ca5b0f22a7b1970b8ec02ef79bdc7564aa')
})

test('swapWords turns host-order words into the other order, in place, and back', () => {
  const words = Uint32Array.of(0x01020304, 0xa0b0c0d0, 0, 0xffffffff)
  const bytes = new Uint8Array(words.buffer)
  const before = Buffer.from(bytes)
  swapWords(bytes, 4, 12)
  const native = Buffer.from(before)
  const other = Buffer.from(before)
  for (let i = 4; i < 12; i += 4) other.writeUInt32BE(native.readUInt32LE(i), i)
  assert.deepEqual(Buffer.from(bytes), other, 'words 1 and 2 reversed, 0 and 3 untouched')
  swapWords(bytes, 4, 12)
  assert.deepEqual(Buffer.from(bytes), before)
})
