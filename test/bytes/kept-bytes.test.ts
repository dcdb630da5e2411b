/**
 * The bytes writers keep per key (fact groups' threat_context members, unlisted addresses' whole tails): what is kept
 * under a key comes back for that key only, across table and arena growth, for keys past 2^32, and the bounds empty
 * it instead of growing past them.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ByteSink } from '../../src/bytes/byte-sink.ts'
import { KeptBytes } from '../../src/bytes/kept-bytes.ts'

/** Keeps `text` under `key` as a writer does: written into the sink, kept from where it began. */
function keepText (kept: KeptBytes, sink: ByteSink, key: number, text: string): void {
  const start = sink.len
  sink.write(text)
  kept.keep(key, sink, start)
}

/** What copyTo appends for `key`, or null when nothing is kept. */
function copied (kept: KeptBytes, key: number): string | null {
  const sink = new ByteSink(1024)
  sink.write('>')
  return kept.copyTo(key, sink) ? Buffer.from(sink.take()).toString('utf8', 1) : null
}

const kKeys = [0, 1, 7, 8, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 32 + 1, 3 * 2 ** 32 + 5, 2 ** 42 + 123, 2 ** 53 - 1]

test('every key gets back its own bytes, through table and arena growth, keys past 2^32 included', () => {
  const kept = new KeptBytes(10_000, 1 << 20)
  const sink = new ByteSink(1024)
  const keys = [...kKeys]
  for (let i = 0; i < 2000; i++) keys.push(i * 8 + 3, 2 ** 33 + i * 977)
  keys.forEach((k, i) => { keepText(kept, sink, k, `{"k":${k},"pad":"${'é'.repeat(i % 50)}"}`) })
  assert.equal(kept.size, keys.length)
  keys.forEach((k, i) => { assert.equal(copied(kept, k), `{"k":${k},"pad":"${'é'.repeat(i % 50)}"}`, `key ${k}`) })
  for (const k of [2, 9, 2 ** 32 + 2, 2 ** 34, 2 ** 53 - 2]) assert.equal(copied(kept, k), null, `key ${k} was never kept`)
})

test('a key kept again keeps its first bytes; copyTo appends after what the sink holds', () => {
  const kept = new KeptBytes(16, 4096)
  const sink = new ByteSink(1024)
  sink.write('before ')
  keepText(kept, sink, 2 ** 40, 'first')
  keepText(kept, sink, 2 ** 40, 'second')
  assert.equal(kept.size, 1)
  assert.equal(copied(kept, 2 ** 40), 'first')
  sink.clear()
  sink.write('ab')
  assert.ok(kept.copyTo(2 ** 40, sink))
  assert.equal(Buffer.from(sink.take()).toString(), 'abfirst')
})

test('past its entries or its bytes, everything kept is dropped and keeping starts again', () => {
  const byCount = new KeptBytes(4, 4096)
  const sink = new ByteSink(1024)
  for (let k = 0; k < 4; k++) keepText(byCount, sink, k, `v${k}`)
  assert.equal(byCount.size, 4)
  keepText(byCount, sink, 99, 'v99')
  assert.equal(byCount.size, 1)
  assert.equal(copied(byCount, 0), null)
  assert.equal(copied(byCount, 99), 'v99')

  const byBytes = new KeptBytes(1000, 100)
  keepText(byBytes, sink, 1, 'a'.repeat(60))
  keepText(byBytes, sink, 2, 'b'.repeat(30))
  assert.equal(copied(byBytes, 1), 'a'.repeat(60))
  keepText(byBytes, sink, 3, 'c'.repeat(30))
  assert.equal(byBytes.size, 1, 'the third would pass 100 bytes: the first two went')
  assert.equal(copied(byBytes, 1), null)
  assert.equal(copied(byBytes, 3), 'c'.repeat(30))
  keepText(byBytes, sink, 4, 'd'.repeat(101))
  assert.equal(copied(byBytes, 4), null, 'bytes longer than the bound are not kept')
  assert.equal(copied(byBytes, 3), 'c'.repeat(30), 'and what was kept stays')
})
