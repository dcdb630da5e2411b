/**
 * The chunk codec (src/pool/chunk-codec.ts): the bytes a bulk chunk travels in to a scoring thread are msgpackr's own
 * packing of the items, byte for byte, and decode back to the items; a chunk with a lone surrogate travels unencoded.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Packr, unpack } from 'msgpackr'
import { mixedCorpus } from '../../bench/corpus.ts'
import { decodeItems, encodeItems } from '../../src/pool/chunk-codec.ts'
import type { ChunkItem } from '../../src/pool/score-chunk.ts'

const plain: ChunkItem[] = mixedCorpus(3000, 23).map((x, i) => [x.type, x.value, i % 3 === 0 ? 'block' : null, i % 5 === 0 ? 'edr' : null])
const odd: ChunkItem[] = [
  [undefined, 'bücher.de', null, 'ÉDR'], [null, 'x'.repeat(40), null, null], ['domain', 'y'.repeat(300), 'allow', null],
  ['ip', 'z'.repeat(70_000), null, null], ['😀', '😀.example', null, null], ['domain', '', '', ''], ['ip', 'ü'.repeat(20_000), 'ß', null]
]
/** Items the direct writer leaves to msgpackr: a number or a boolean where a string is expected. */
const general: ChunkItem[] = [[7, 8.5, null, null], ['ip', 42, null, null], [true, 'a.example', null, null], ['ip', null, null, null]]
/** Chunks at every array header size: fixarray (< 16), array 16, array 32 (65,536 items and more). */
const chunks: ChunkItem[][] = [
  [], plain.slice(0, 1), plain.slice(0, 15), plain.slice(0, 16), plain, odd, [...plain, ...odd], general, [...odd, ...general],
  Array.from({ length: 65_536 }, (_, i) => plain[i % plain.length] as ChunkItem)
]

test('a chunk is encoded as msgpackr packs its items, byte for byte, at every array size and string length', () => {
  const packr = new Packr()
  for (const items of chunks) {
    const got = encodeItems(items)
    assert.ok(got instanceof Uint8Array, `${items.length} items are packed`)
    assert.ok(Buffer.from(got).equals(Buffer.from(packr.pack(items))), `${items.length} items`)
  }
})

test('an encoded chunk decodes to its items, with msgpackr and with decodeItems alike', () => {
  for (const items of chunks) {
    const encoded = encodeItems(items)
    assert.deepEqual(decodeItems(encoded), items, `${items.length} items`)
    assert.ok(encoded instanceof Uint8Array)
    assert.deepEqual(unpack(encoded), items, `${items.length} items, msgpackr's unpack`)
  }
})

test('an encoded chunk owns its buffer, so transferring it leaves the next chunk\'s bytes whole', () => {
  const first = encodeItems(plain.slice(0, 100)) as Uint8Array<ArrayBuffer>
  const second = encodeItems(plain.slice(100, 200)) as Uint8Array<ArrayBuffer>
  assert.notEqual(first.buffer, second.buffer)
  structuredClone(first.buffer, { transfer: [first.buffer] })
  assert.deepEqual(decodeItems(second), plain.slice(100, 200))
})

test('a chunk with a lone surrogate in any field travels unencoded, so the value is echoed as sent', () => {
  for (const at of [0, 1, 2, 3]) {
    const item: ChunkItem = ['domain', 'a.example', null, null]
    item[at] = 'a\ud800b'
    const lone: ChunkItem[] = [...plain.slice(0, 5), item]
    assert.equal(encodeItems(lone), lone, `field ${at}`)
    assert.equal(decodeItems(lone), lone)
  }
  // A well-formed pair is packed as usual.
  assert.ok(encodeItems([['domain', '\ud83d\ude00.example', null, null]]) instanceof Uint8Array)
})

test('a type or value that is an object or an array travels as its JSON text and decodes as sent, lone surrogates too', () => {
  for (const value of [{ a: 1 }, ['\ud800'], { k: 'a\udc00' }, { 'k\udc00': 1 }, [{ deep: ['x', '\ud800', null, true, 1.5] }], {}]) {
    for (const at of [0, 1]) {
      const item: ChunkItem = ['domain', 'a.example', 'block', null]
      item[at] = value
      const chunk: ChunkItem[] = [...plain.slice(0, 3), item, ['ip', 7, null, 'a\ud800']]
      const encoded = encodeItems(chunk)
      assert.ok(!(encoded instanceof Uint8Array) && !Array.isArray(encoded), `field ${at}: ${JSON.stringify(value)}`)
      // The caller's items are left as they were; the scoring thread gets them back as sent.
      assert.equal(chunk[3]?.[at], value)
      assert.deepEqual(decodeItems(structuredClone(encoded)), chunk)
    }
  }
  // A string that reads as JSON stays a string.
  const text: ChunkItem[] = [['domain', '{"a":1}', null, null], [null, { b: 2 }, null, null]]
  assert.deepEqual(decodeItems(structuredClone(encodeItems(text))), text)
})
