/**
 * The bulk answer's wire format (src/pool/bulk-item.ts): every way an item is written reads back as the object its
 * glossary describes, JSON and MessagePack alike, and an answer reads back as {meta, results} in request order.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { mixedCorpus } from '../../bench/corpus.ts'
import { mergeJson, mergeMsgpack, type EncodedChunk } from '../../src/bulk/merge.ts'
import type { Chunks } from '../../src/bulk/chunk.ts'
import { assess, normalize, render, selectProfile } from '../../src/engine/index.ts'
import { ByteSink } from '../../src/bytes/byte-sink.ts'
import type { Verdict } from '../../src/engine/types.ts'
import {
  answerHead, clientPackr, invalidIndicator, invalidItemJson, invalidItemObject, itemEnd, itemHead, itemObject, kJsonAnswerEnd,
  noneTail, packedNoneTail, packedWarnings, readBulkAnswer, readBulkItems, tailRest, verdictTail, writeItemHead, writePackedItemHead, writePackedNoneTail
} from '../../src/pool/bulk-item.ts'
import { createShardCache, scoreBulkChunk, type ChunkItem, type ScoringContext } from '../../src/pool/score-chunk.ts'
import { sampleSnapshot } from '../helper.ts'

const kItemOrder = ['indicator', 'risk', 'signals', 'signal_count', 'scores', 'threat_context', 'recommended_actions']

test('an invalid item\'s JSON text is the JSON of its object form, with and without warnings', () => {
  const cases: Array<[unknown, unknown, string[], string[]]> = [
    ['ip', 'not an ip', [], ['value is not a valid IPv4 or IPv6 address']],
    [undefined, undefined, ['w'], ['value is missing']],
    ['nope', 42, ['a', 'b'], ['e1', 'e2']]
  ]
  for (const [type, value, warnings, errors] of cases) {
    const indicator = invalidIndicator(type, value)
    assert.deepEqual(indicator, { type: type ?? null, value: value ?? null })
    const object = invalidItemObject(indicator, warnings, errors)
    assert.equal(invalidItemJson(indicator, warnings, errors), JSON.stringify(object))
    assert.deepEqual(Object.keys(object), [...kItemOrder, ...(warnings.length > 0 ? ['warnings'] : []), 'errors'])
    assert.deepEqual(clientPackr.unpack(clientPackr.pack(object)), object)
  }
})

test('an item head written from pieces is itemHead of its indicator JSON, copied value or not, past a full buffer', () => {
  const hash = 'ab'.repeat(32)
  const long = `${'a'.repeat(60)}.example.com`
  const cases: Array<['file_hash_sha256' | 'domain' | 'ip', string, string]> = [
    ['file_hash_sha256', hash, hash],
    ['file_hash_sha256', hash.toUpperCase(), hash],
    ['domain', long, long],
    ['domain', `${long}.`, long],
    ['domain', 'bücher.example', 'xn--bcher-kva.example'],
    ['domain', `"${'q'.repeat(50)}\\`, `"${'q'.repeat(50)}\\`],
    ['ip', '198.51.100.7', '198.51.100.7']
  ]
  // Fills around the end of the sink's first buffer (1,024 bytes): some copies start with too little room left.
  for (let fill = 800; fill < 1100; fill++) {
    for (const [type, value, normalized] of cases) {
      const sink = new ByteSink(1024)
      for (let i = 0; i < fill; i++) sink.byte(0x78)
      writeItemHead(sink, type, value, normalized)
      const text = Buffer.from(sink.buf.subarray(0, sink.len)).toString()
      assert.equal(text, 'x'.repeat(fill) + itemHead(JSON.stringify({ type, value, normalized })), `${type} ${value} after ${fill} bytes`)
    }
  }
})

test('a valid item written from pieces is the JSON of its object form at every signal detail level', async () => {
  const snapshot = await sampleSnapshot()
  const ctx: ScoringContext = { snapshot, cache: null }
  const items: ChunkItem[] = mixedCorpus(300, 5).map((x) => [x.type, x.value, null, null])
  const out = scoreBulkChunk(items, { mode: 'bulk', format: 'json', scoringVersion: null, signalDetails: 'all', evidenceDetails: 'none' }, ctx)
  const verdicts = readBulkItems('json', out.body, out.ends) as Array<Verdict & { errors?: string[] }>
  let withSignals = 0
  for (const v of verdicts.filter((x) => x.errors === undefined)) {
    const warnings = (v as { warnings?: string[] }).warnings ?? []
    const object = itemObject(v, warnings)
    const rest = tailRest(JSON.stringify(v.threat_context), JSON.stringify(v.recommended_actions))
    const text = itemHead(JSON.stringify(v.indicator)) + verdictTail(JSON.stringify(v.risk), JSON.stringify(v.signals), v.signal_count, JSON.stringify(v.scores), rest) + itemEnd(warnings)
    assert.equal(text, JSON.stringify(object))
    assert.deepEqual(Object.keys(object), [...kItemOrder, ...(warnings.length > 0 ? ['warnings'] : [])])
    if (v.signal_count > 0) withSignals++
    const none = itemHead(JSON.stringify(v.indicator)) + noneTail(JSON.stringify(v.risk), JSON.stringify(v.scores), rest) + itemEnd(warnings)
    assert.deepEqual(JSON.parse(none), { ...object, signals: [], signal_count: 0 })
  }
  assert.ok(withSignals > 0, 'some items carry signals')
  // itemObject drops only flags from a rendered verdict.
  const v = render({ type: 'ip', normalized: '192.0.2.1', risk: { score: 0, strength: 'none', category: 'unknown', evidence_saturation: 'none' } as never, signals: [], scores: { signal_groups: {}, signal_subgroups: {} }, threat_context: {}, flags: ['f'], recommended_actions: [] }, '192.0.2.1', [], { signalDetails: 'none', evidenceDetails: 'none' })
  assert.deepEqual(itemObject(v, []), { indicator: v.indicator, risk: v.risk, signals: [], signal_count: 0, scores: v.scores, threat_context: {}, recommended_actions: [] })
})

test('scored chunks read back the same in JSON and MessagePack, from the cache or not, one item per indicator', async () => {
  const snapshot = await sampleSnapshot()
  const items: ChunkItem[] = mixedCorpus(500, 11).map((x) => [x.type, x.value, null, null])
  items.push(['ip', 'not an ip', null, null], [undefined, 7, null, null], ['domain', 'EXAMPLE.com.', null, null])
  const cached: ScoringContext = { snapshot, cache: createShardCache(10_000) }
  for (const signalDetails of ['none', 'top', 'all'] as const) {
    const read = (format: 'json' | 'msgpack', ctx: ScoringContext): unknown[] => {
      const out = scoreBulkChunk(items, { mode: 'bulk', format, scoringVersion: null, signalDetails, evidenceDetails: 'none' }, ctx)
      assert.equal(out.ends.length, items.length)
      return readBulkItems(format, out.body, out.ends)
    }
    const json = read('json', { snapshot, cache: null })
    assert.deepEqual(read('msgpack', { snapshot, cache: null }), json, signalDetails)
    assert.deepEqual(read('json', cached), json, `${signalDetails}, cache filled`)
    assert.deepEqual(read('json', cached), json, `${signalDetails}, cache hits`)
    for (const [i, item] of (json as Array<{ indicator: { value: unknown } }>).entries()) assert.deepEqual(item.indicator.value, items[i]?.[1] ?? null)
  }
})

test('an answer reads back as meta and results in request order, JSON and MessagePack, at every array header size', () => {
  const meta = { bulk_request_id: 'b-1', record_count: 0 }
  for (const n of [0, 1, 15, 16, 65_535, 65_536]) {
    // n one-byte items (fixints in MessagePack, digits in JSON) spread over two shards, interleaved.
    const shard = Uint16Array.from({ length: n }, (_, i) => i % 2)
    const pos = Uint32Array.from({ length: n }, (_, i) => i >> 1)
    const outputs: EncodedChunk[] = [0, 1].map((s) => {
      const count = Math.ceil((n - s) / 2)
      return { body: Uint8Array.from({ length: count }, (_, j) => 0x30 + ((2 * j + s) % 10)), ends: Uint32Array.from({ length: count }, (_, j) => j + 1) }
    })
    const chunks = { items: [], shard, pos } as unknown as Chunks
    const want = Array.from({ length: n }, (_, i) => i % 10)
    const json = readBulkAnswer('json', mergeJson({ ...meta, record_count: n }, chunks, outputs))
    assert.deepEqual(json, { meta: { ...meta, record_count: n }, results: want }, `json ${n}`)
    const fix = outputs.map((o) => ({ body: o.body.map((b) => b - 0x30), ends: o.ends }))
    assert.deepEqual(readBulkAnswer('msgpack', mergeMsgpack({ ...meta, record_count: n }, chunks, fix)), { meta: { ...meta, record_count: n }, results: want }, `msgpack ${n}`)
  }
  assert.equal(answerHead('json', meta, 3).toString() + kJsonAnswerEnd.toString(), '{"meta":{"bulk_request_id":"b-1","record_count":0},"results":[]}')
})

test('a MessagePack item written from pieces is, byte for byte, clientPackr\'s packing of its object form', async () => {
  const snapshot = await sampleSnapshot()
  const { profile } = selectProfile(null)
  const values = [...mixedCorpus(400, 17).map((x) => x.value), '1.2.3[.]4', 'BÜCHER.de.', 'x'.repeat(27) + '.com', 'y'.repeat(28) + '.com',
    'z'.repeat(250) + '.com', 'w'.repeat(251) + '.com', 'пример.рф', 'hxxp://evil[.]example/x']
  let checked = 0
  for (const value of values) {
    const n = normalize(value, undefined)
    if (!n.ok) continue
    const a = assess(n.indicator, profile, snapshot)
    const warnings = n.indicator.warnings
    const want = Buffer.from(clientPackr.pack(itemObject(render(a, value, warnings, { signalDetails: 'none', evidenceDetails: 'none' }), warnings)))
    const sink = new ByteSink(1024)
    writePackedItemHead(sink, n.indicator.type, value, n.indicator.normalized, warnings.length > 0)
    sink.bytes(packedNoneTail(a.risk, a.scores, a.threat_context, a.recommended_actions))
    if (warnings.length > 0) sink.bytes(packedWarnings(warnings))
    assert.ok(Buffer.from(sink.take()).equals(want), value)
    const direct = new ByteSink(1024)
    writePackedItemHead(direct, n.indicator.type, value, n.indicator.normalized, warnings.length > 0)
    writePackedNoneTail(direct, a.risk, a.scores, a.threat_context, a.recommended_actions)
    if (warnings.length > 0) direct.bytes(packedWarnings(warnings))
    assert.ok(Buffer.from(direct.take()).equals(want), `${value}, packed directly`)
    checked++
  }
  assert.ok(checked > 300, `${checked} items`)
})

test('the packed none tail written directly is packedNoneTail\'s bytes for any plain data, and falls back for the rest', () => {
  const numbers = [0, 1, 127, 128, 255, 256, 65_535, 65_536, 2 ** 32 - 1, 2 ** 32, 2 ** 53, -1, -32, -33, -128, -129, -32_768, -32_769,
    -(2 ** 31), -(2 ** 31) - 1, 0.5, -0.25, -0, 1e-7, 1e21, Number.MAX_VALUE, NaN, Infinity, -Infinity]
  const long = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, i * 1.5]))
  const values: unknown[] = [
    { numbers }, { s: ['', 'é', 'x'.repeat(31), 'x'.repeat(32), 'y'.repeat(300), 'z'.repeat(70_000), '\ud800'] }, { b: [true, false, null] },
    { long: ['x'.repeat(23), 'x'.repeat(24), 'é'.repeat(24), 'x'.repeat(23) + 'é', 'x'.repeat(40) + '\ud800', '😀'.repeat(20), 'ü'.repeat(200)] },
    { ключ: 1, ['k'.repeat(40)]: 'v' },
    { nested: [[], [[1]], Array.from({ length: 20 }, (_, i) => i), Array.from({ length: 70_000 }, () => 0)] }, long, {},
    { 10: 'integer-like key first', a: 1 }, { u: undefined }, { d: new Date(0) }, [new Map([['a', 1]])]
  ]
  for (const v of values) {
    const sink = new ByteSink(64)
    sink.byte(0x2e)
    writePackedNoneTail(sink, v, v, v, v)
    const want = Buffer.concat([Buffer.from([0x2e]), Buffer.from(packedNoneTail(v, v, v, v))])
    assert.ok(Buffer.from(sink.take()).equals(want), JSON.stringify(v)?.slice(0, 80))
    // Frozen risk, scores and actions (as the engine shares them) are packed once and then copied, twice here.
    const frozen = Object.freeze(structuredClone(v) as object)
    for (let i = 0; i < 2; i++) {
      const again = new ByteSink(64)
      writePackedNoneTail(again, frozen, frozen, v, frozen)
      assert.ok(Buffer.from(again.take()).equals(Buffer.from(packedNoneTail(frozen, frozen, v, frozen))), `frozen ${JSON.stringify(v)?.slice(0, 80)}`)
    }
  }
})
