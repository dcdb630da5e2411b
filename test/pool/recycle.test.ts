/**
 * Body buffers go back to their shard once merged: the next chunk writes into one that fits, over the thread
 * boundary too; answer buffers serve later answers. Every answer stays byte for byte what a fresh buffer gives.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { mixedCorpus } from '../../bench/corpus.ts'
import { AnswerBuffers, mergeJson, mergeMsgpack } from '../../src/bulk/merge.ts'
import { chunkIndicators } from '../../src/bulk/chunk.ts'
import { scoreBulkChunk, type ChunkItem, type ChunkParams } from '../../src/pool/score-chunk.ts'
import { ScoringPool } from '../../src/pool/scoring-pool.ts'
import { SpareBuffers } from '../../src/bytes/byte-sink.ts'
import { HistoryItems } from '../../src/history/codec.ts'
import { kInvalidVerdictMembers } from '../../src/history/record.ts'
import { itemFragment } from '../fixtures/history-record.ts'
import { sampleSnapshot, sampleSnapshotData } from '../helper.ts'

const kParams: ChunkParams = { mode: 'bulk', format: 'json', scoringVersion: null, signalDetails: 'none', evidenceDetails: 'none' }
const chunk = (n: number, seed: number): ChunkItem[] => mixedCorpus(n, seed).map((x) => [x.type, x.value, null, null])

test('a chunk writes its body into a spare buffer that fits, and only then', async () => {
  const snapshot = await sampleSnapshot()
  const items = chunk(1000, 11)
  const want = Buffer.from(scoreBulkChunk(items, kParams, { snapshot, cache: null }).body)
  const fits = new ArrayBuffer(want.length + 100)
  const got = scoreBulkChunk(items, kParams, { snapshot, cache: null }, fits)
  assert.equal(got.body.buffer, fits)
  assert.equal(got.body.byteOffset, 0)
  assert.equal(got.body.byteLength, want.length)
  assert.ok(Buffer.from(got.body).equals(want))
  for (const size of [want.length - 1, 2 * want.length + 64 * 1024 + 1]) {
    const spare = new ArrayBuffer(size)
    const other = scoreBulkChunk(items, kParams, { snapshot, cache: null }, spare)
    assert.notEqual(other.body.buffer, spare, `a spare of ${size} bytes is not used for ${want.length}`)
    assert.ok(Buffer.from(other.body).equals(want))
  }
})

test('inline, a recycled body buffer is the next chunk\'s body; answers are unchanged', async () => {
  const pool = new ScoringPool(await sampleSnapshotData(), { size: 0, cacheSize: 0 })
  try {
    const first = await pool.runBulk(0, chunk(800, 21), kParams)
    const buffer = first.body.buffer
    pool.recycle(0, first.body)
    const items = chunk(800, 22)
    const second = await pool.runBulk(0, items, kParams)
    assert.equal(second.body.buffer, buffer)
    const fresh = scoreBulkChunk(items, kParams, { snapshot: pool.snapshot, cache: null })
    assert.ok(Buffer.from(second.body).equals(Buffer.from(fresh.body)))
    // An empty body is not kept.
    pool.recycle(0, new Uint8Array(0))
    const third = await pool.runBulk(0, chunk(10, 23), kParams)
    assert.notEqual(third.body.buffer.byteLength, 0)
  } finally {
    await pool.close()
  }
})

test('with workers, a recycled buffer is transferred to its shard, and every chunk answers as inline does', async () => {
  const data = await sampleSnapshotData()
  const pool = new ScoringPool(data, { size: 2, cacheSize: 1000 })
  const reference = new ScoringPool(data, { size: 0, cacheSize: 0 })
  try {
    await pool.ready()
    let previous: Uint8Array[] = []
    for (let round = 0; round < 4; round++) {
      const outputs = await Promise.all([0, 1].map(async (s) => await pool.runBulk(s, chunk(600 + 50 * round, 100 * round + s), kParams)))
      for (const [s, o] of outputs.entries()) {
        const want = await reference.runBulk(0, chunk(600 + 50 * round, 100 * round + s), kParams)
        assert.ok(Buffer.from(o.body).equals(Buffer.from(want.body)), `round ${round} shard ${s}`)
        assert.deepEqual([...o.ends], [...want.ends])
      }
      // The buffers recycled last round went to the workers with this round's chunks: detached here.
      for (const body of previous) assert.equal(body.byteLength, 0, `round ${round}`)
      outputs.forEach((o, s) => { pool.recycle(s, o.body) })
      previous = outputs.map((o) => o.body)
    }
  } finally {
    await pool.close()
    await reference.close()
  }
})

test('answer buffers: exact sizes, a finished answer\'s buffer serves the next one that fits, within the bounds', () => {
  const buffers = new AnswerBuffers(2, 1 << 20)
  const a = buffers.take(100_000)
  assert.equal(a.length, 100_000)
  assert.ok(a.buffer.byteLength >= 100_000)
  buffers.give(a)
  buffers.give(a) // handed back twice: kept once
  const b = buffers.take(90_000)
  assert.equal(b.buffer, a.buffer, 'reused')
  assert.equal(b.length, 90_000)
  assert.notEqual(buffers.take(90_000).buffer, a.buffer, 'kept once, so taken once')
  // Too small, or far too large (over twice the size plus 64 KiB), for the size asked: not used.
  buffers.give(b)
  assert.notEqual(buffers.take(200_000).buffer, a.buffer)
  assert.notEqual(buffers.take(20_000).buffer, a.buffer)
  assert.equal(buffers.take(100_000).buffer, a.buffer)
  // At most `keep` buffers, none over maxBytes.
  const big = buffers.take(2 << 20)
  buffers.give(big)
  assert.notEqual(buffers.take(2 << 20).buffer, big.buffer, 'over maxBytes: not kept')
  const kept = [buffers.take(100), buffers.take(100), buffers.take(100)]
  for (const k of kept) buffers.give(k)
  const again = [buffers.take(100), buffers.take(100), buffers.take(100)].map((x) => x.buffer)
  assert.equal(again.filter((x) => kept.some((k) => k.buffer === x)).length, 2)
})

test('merging into a reused answer buffer gives the same bytes as a fresh one', async () => {
  const snapshot = await sampleSnapshot()
  const items = chunk(300, 77)
  const chunks = chunkIndicators(items.map(([type, value]) => ({ type, value })) as never, 1)
  const outputs = [scoreBulkChunk(chunks.items[0] as ChunkItem[], kParams, { snapshot, cache: null })]
  const meta = { took_ms: 1 }
  const want = mergeJson(meta, chunks, outputs)
  const buffers = new AnswerBuffers()
  const dirty = buffers.take(want.length + 10)
  dirty.fill(0x58)
  buffers.give(dirty)
  const got = mergeJson(meta, chunks, outputs, buffers)
  assert.equal(got.buffer, dirty.buffer)
  assert.ok(got.equals(want))
  assert.equal(JSON.parse(got.toString()).results.length, 300)
  const packed = mergeMsgpack(meta, chunks, [scoreBulkChunk(chunks.items[0] as ChunkItem[], { ...kParams, format: 'msgpack' }, { snapshot, cache: null })], buffers)
  assert.ok(packed.length > 0)
})

test('a history part is encoded into a spare buffer that suits it, with the same bytes', () => {
  const fill = (items: HistoryItems): void => {
    for (let i = 0; i < 500; i++) items.add('ip', `198.51.100.${i & 255}`, `198.51.100.${i & 255}`, itemFragment({ type: 'ip', value: `v${i}`, normalized: null }, kInvalidVerdictMembers, null, null))
  }
  const a = new HistoryItems(500)
  fill(a)
  const want = Buffer.from(a.encode())
  const spare = new ArrayBuffer(want.length + 1000)
  const b = new HistoryItems(500)
  fill(b)
  const got = b.encode(spare)
  assert.equal(got.buffer, spare)
  assert.ok(Buffer.from(got).equals(want))
  const c = new HistoryItems(500)
  fill(c)
  assert.notEqual(c.encode(new ArrayBuffer(10)).buffer.byteLength, 10, 'a spare too small is not used')
})

test('the pool hands a history spare to the chunk it scores; the part is the same as a fresh one', async () => {
  const data = await sampleSnapshotData()
  const historySpares = new SpareBuffers(4)
  const pool = new ScoringPool(data, { size: 2, cacheSize: 0, historySpares })
  const inlineSpares = new SpareBuffers(4)
  const inline = new ScoringPool(data, { size: 0, cacheSize: 0, historySpares: inlineSpares })
  try {
    await pool.ready()
    const items = chunk(2000, 5)
    const fresh = await pool.runBulk(1, items, kParams)
    const spare = new ArrayBuffer(fresh.history.byteLength + 100)
    historySpares.give(spare)
    const again = await pool.runBulk(1, items, kParams)
    assert.equal(spare.byteLength, 0, 'transferred to the worker')
    assert.equal(historySpares.size, 0)
    assert.ok(Buffer.from(again.history).equals(Buffer.from(fresh.history)))
    const own = new ArrayBuffer(fresh.history.byteLength + 100)
    inlineSpares.give(own)
    const inlined = await inline.runBulk(0, items, kParams)
    assert.equal(inlined.history.buffer, own, 'inline, the part is written into the spare')
    assert.ok(Buffer.from(inlined.history).equals(Buffer.from(fresh.history)))
  } finally {
    await pool.close()
    await inline.close()
  }
})
