/**
 * The byte sink the scoring threads write verdicts and history into: UTF-8 as Buffer#write gives it, growth, and
 * reuse from chunk to chunk without one chunk's output changing when the next is written.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { mixedCorpus } from '../../bench/corpus.ts'
import { ByteSink, utf8Into } from '../../src/bytes/byte-sink.ts'
import { scoreBulkChunk, type ChunkItem, type ChunkParams } from '../../src/pool/score-chunk.ts'
import { sampleSnapshot } from '../helper.ts'

test('utf8Into writes what Buffer#write writes, cutting at a character boundary when the buffer is short', () => {
  for (const s of ['', 'plain ascii', 'BÜCHER.de', 'x\u{1f600}y', 'lone \ud800 surrogate', 'end high \udbff', '\u0000nul']) {
    for (const room of [0, 1, 2, 3, 5, 64]) {
      const a = Buffer.alloc(room + 4, 0xee)
      const b = Buffer.alloc(room + 4, 0xee)
      const got = utf8Into(a.subarray(0, room), s, 0)
      const want = b.subarray(0, room).write(s, 0, 'utf8')
      assert.equal(got, want, `${JSON.stringify(s)} in ${room} bytes`)
      assert.deepEqual(a, b, `${JSON.stringify(s)} in ${room} bytes`)
    }
  }
  const buf = Buffer.alloc(8, 0x2e)
  assert.equal(utf8Into(buf, 'ab', 8), 0)
  assert.equal(utf8Into(buf, 'ab', 6), 2)
  assert.equal(buf.toString('latin1'), '......ab')
})

test('text() writes what write() writes, and jsonString() the UTF-8 of JSON.stringify, for any string', () => {
  const strings = ['', 'plain ascii', '192.0.2.1', 'BÜCHER.de', 'xü', 'x\u{1f600}y', 'lone \ud800 surrogate', 'end high \udbff', '\udc00 low first',
    '\u0000nul', 'tab\there', 'line\nfeed', 'quote"d', 'back\\slash', 'del\u007f', 'sep\u2028', '\u001f', 'a'.repeat(5000)]
  for (const s of strings) {
    const a = new ByteSink(1024)
    const b = new ByteSink(1024)
    a.byte(0x2e)
    b.byte(0x2e)
    a.text(s)
    b.write(s)
    assert.ok(Buffer.from(a.take()).equals(Buffer.from(b.take())), `text ${JSON.stringify(s)}`)
    const j = new ByteSink(1024)
    j.byte(0x2e)
    j.jsonString(s)
    assert.equal(Buffer.from(j.take()).toString('utf8', 1), Buffer.from(JSON.stringify(s)).toString(), `jsonString ${JSON.stringify(s)}`)
  }
})

test('a sink grows past its first buffer, and take() copies: clearing and rewriting leaves taken bytes alone', () => {
  const sink = new ByteSink(1024)
  const text = 'é'.repeat(3000)
  sink.write(text)
  sink.byte(0x21)
  sink.bytes(Uint8Array.of(0x41, 0x42))
  sink.copy(Buffer.from('xyz'), 1, 3)
  const first = sink.take()
  assert.equal(Buffer.from(first).toString(), `${text}!AByz`)
  assert.equal(first.byteOffset, 0)
  assert.ok(first.buffer.byteLength >= first.length && first.buffer.byteLength <= first.length * 2, 'a buffer of its own (transferable)')
  assert.notEqual(first.buffer, sink.buf.buffer)
  sink.clear()
  assert.equal(sink.len, 0)
  sink.write('second')
  assert.equal(Buffer.from(sink.take()).toString(), 'second')
  assert.equal(Buffer.from(first).toString(), `${text}!AByz`)
})

test('bytes() and copy() append short and long arrays alike, at the end of a sink that grows for them', () => {
  for (const n of [0, 1, 31, 32, 33, 64, 300, 5000]) {
    const src = Uint8Array.from({ length: n + 6 }, (_, i) => (i * 7 + 3) & 255)
    const sink = new ByteSink(1024)
    sink.write('x'.repeat(1020))
    sink.bytes(src.subarray(3, 3 + n))
    sink.copy(src, 3, 3 + n)
    sink.byte(0x21)
    const out = Buffer.from(sink.take())
    assert.equal(out.length, 1020 + 2 * n + 1, `${n} bytes`)
    assert.ok(out.subarray(1020, 1020 + n).equals(src.subarray(3, 3 + n)), `bytes() of ${n}`)
    assert.ok(out.subarray(1020 + n, 1020 + 2 * n).equals(src.subarray(3, 3 + n)), `copy() of ${n}`)
    assert.equal(out[out.length - 1], 0x21)
  }
})

test('shrink lets a grown buffer go and keeps a small one', () => {
  const sink = new ByteSink(1024)
  sink.write('a'.repeat(100_000))
  assert.ok(sink.buf.length >= 100_000)
  sink.shrink(4096)
  assert.equal(sink.len, 0)
  assert.equal(sink.buf.length, 4096)
  sink.write('b'.repeat(10))
  const kept = sink.buf
  sink.shrink(4096)
  assert.equal(sink.buf, kept, 'a buffer within the bound is kept')
  sink.write('ok')
  assert.equal(Buffer.from(sink.take()).toString(), 'ok')
})

test('a scoring thread reuses its sinks: a chunk\'s output is unchanged after the next chunks are scored', async () => {
  const snapshot = await sampleSnapshot()
  const ctx = { snapshot, cache: null }
  const params: ChunkParams = { mode: 'bulk', format: 'json', scoringVersion: null, signalDetails: 'none', evidenceDetails: 'none' }
  const chunk = (n: number, seed: number): ChunkItem[] => mixedCorpus(n, seed).map((x) => [x.type, x.value, null, null])
  const a = scoreBulkChunk(chunk(3000, 1), params, ctx)
  const body = Buffer.from(a.body)
  const history = Buffer.from(a.history)
  const b = scoreBulkChunk(chunk(500, 2), params, ctx)
  scoreBulkChunk(chunk(4000, 3), params, ctx)
  assert.ok(Buffer.from(a.body).equals(body), 'first body unchanged')
  assert.ok(Buffer.from(a.history).equals(history), 'first history unchanged')
  assert.notEqual(a.body.buffer, b.body.buffer)
  // The same chunk scored again (fresh context, no cache) gives the same bytes.
  const again = scoreBulkChunk(chunk(3000, 1), params, { snapshot, cache: null })
  assert.ok(Buffer.from(again.body).equals(body))
  assert.ok(Buffer.from(again.history).equals(history))
  const items = JSON.parse(`[${Array.from(a.ends, (end, i) => body.subarray(i === 0 ? 0 : a.ends[i - 1], end).toString()).join(',')}]`) as unknown[]
  assert.equal(items.length, 3000)
})

test('each bulk item echoes its indicator as JSON.stringify of {type, value, normalized}, escapes and all', async () => {
  const snapshot = await sampleSnapshot()
  const params: ChunkParams = { mode: 'bulk', format: 'json', scoringVersion: null, signalDetails: 'none', evidenceDetails: 'none' }
  const values = ['BÜCHER.de.', 'xn--bcher-kva.de', 'evil[.]example', 'hxxp://bad.example/path', '  192.0.2.1  ', '2001:DB8::1', 'AS13335',
    'E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855', '10.0.0.0/8', 'пример.рф', 'münchen.de', '\t192.0.2.2\n', 'tab\u0009.example']
  const out = scoreBulkChunk(values.map((v) => [undefined, v, null, null]), params, { snapshot, cache: null })
  const body = Buffer.from(out.body)
  let checked = 0
  out.ends.forEach((end, i) => {
    const text = body.subarray(i === 0 ? 0 : out.ends[i - 1], end).toString()
    const item = JSON.parse(text) as { indicator: { type: string, value: string, normalized: string | null }, errors?: string[] }
    if (item.errors !== undefined) return
    const { type, value, normalized } = item.indicator
    assert.equal(value, values[i])
    assert.ok(text.startsWith(`{"indicator":${JSON.stringify({ type, value, normalized })},`), text.slice(0, 120))
    checked++
  })
  assert.ok(checked >= 9, `${checked} valid items`)
})
