/**
 * The bytes a bulk chunk's items travel in from the main thread to a scoring thread: encodeItems on the main thread,
 * decodeItems on the scoring thread. The bytes are MessagePack as `threadPackr` packs the items, so msgpackr decodes
 * them; the common chunk is written here directly, in one pass.
 *
 *   | bytes       | what                                                                   |
 *   | ----------- | ---------------------------------------------------------------------- |
 *   | 1, 3 or 5   | array header: fixarray (< 16 items), array 16, array 32                |
 *   | per item    | fixarray of 4 (0x94): type, value, action_taken, action_source         |
 *   |   type      | str, nil (0xc0), or msgpackr's undefined (fixext 1: 0xd4 0x00 0x00)     |
 *   |   value     | str                                                                    |
 *   |   log-only  | str or nil, each                                                       |
 *
 * Anything else a chunk may hold (a number or a boolean as the type or value: the scoring thread answers such items
 * with an item error) is packed by threadPackr itself. A chunk holding a string with a lone UTF-16 surrogate is not
 * encoded at all and goes by structured clone: msgpack writes a lone surrogate as three bytes that decode to three
 * U+FFFD, and the answer must echo the value as sent (JSON escapes it as \udXXX). A chunk where a type or value is
 * an object or an array goes by structured clone too, each such one as its JSON text (JsonItems): a body may hold one
 * object of 250,000 members, which msgpackr packed (and structured clone copied) in about half a second of the main
 * thread, JSON.stringify in a tenth of that; the scoring thread parses it back, lone surrogates kept (JSON escapes
 * them).
 *
 * Written by hand rather than with threadPackr.pack alone: msgpackr's generic walk cost the main thread more per item
 * than the rest of dispatching it; test/pool/chunk-codec.test.ts holds the two to the same bytes.
 */
import { Packr } from 'msgpackr'
import { ByteSink } from '../bytes/byte-sink.ts'
import { writePackedString } from './bulk-item.ts'
import type { ChunkItem } from './score-chunk.ts'

/** msgpack between the service's own threads. */
export const threadPackr = new Packr()

/**
 * A chunk whose types or values include objects or arrays: those as their JSON text, at the positions `json` names
 * (item index x 4 + field), so that the text is not taken for a string a client sent.
 */
export interface JsonItems { items: ChunkItem[], json: number[] }

/** A chunk's items as they travel: packed bytes (transferred), the items themselves (structured clone), or JsonItems. */
export type EncodedItems = Uint8Array<ArrayBuffer> | ChunkItem[] | JsonItems

/** The main thread's scratch sink for packing chunks (one at a time: packing is synchronous). */
const kPackSink = new ByteSink(256 * 1024)
/** A scratch sink grown past this (a chunk of very long values) is replaced by a small one after use. */
const kPackKeepBytes = 4 << 20
const kNotFast = 1
const kIllFormed = 2

/** Encodes a chunk's items for a scoring thread (see the header comment). */
export function encodeItems (items: readonly ChunkItem[]): EncodedItems {
  const fast = packItems(items)
  if (fast !== null) return fast
  const withJson = jsonItems(items)
  if (withJson !== null) return withJson
  for (const it of items) {
    if (illFormed(it[0]) || illFormed(it[1]) || illFormed(it[2]) || illFormed(it[3])) return items as ChunkItem[]
  }
  return copy(threadPackr.pack(items))
}

/** The items encodeItems encoded, on the scoring thread. */
export function decodeItems (encoded: EncodedItems): ChunkItem[] {
  if (encoded instanceof Uint8Array) return threadPackr.unpack(encoded) as ChunkItem[]
  if (Array.isArray(encoded)) return encoded
  const items = encoded.items
  for (const at of encoded.json) {
    const item = items[at >>> 2] as ChunkItem
    item[at & 3] = JSON.parse(item[at & 3] as string)
  }
  return items
}

/** JsonItems of a chunk whose types or values include an object or an array, else null. */
function jsonItems (items: readonly ChunkItem[]): JsonItems | null {
  let out: ChunkItem[] | null = null
  const json: number[] = []
  for (let i = 0; i < items.length; i++) {
    const it = items[i] as ChunkItem
    for (let f = 0; f < 2; f++) {
      const v = it[f]
      if (typeof v !== 'object' || v === null) continue
      out ??= items.slice()
      if (out[i] === it) out[i] = [...it] as ChunkItem
      ;(out[i] as ChunkItem)[f] = JSON.stringify(v)
      json.push(i * 4 + f)
    }
  }
  return out === null ? null : { items: out, json }
}

/** Whether a string holds a lone UTF-16 surrogate (String.prototype.isWellFormed, Node 20). */
function illFormed (s: unknown): boolean {
  return typeof s === 'string' && !(s as unknown as { isWellFormed: () => boolean }).isWellFormed()
}

/**
 * threadPackr.pack(items), written directly for the items a bulk carries (a string or no type, a string value, log-only
 * fields that are strings or null): the same bytes in one pass, without msgpackr's generic walk, and checking
 * well-formedness only of strings outside ASCII. Null for any other chunk (packed the general way).
 */
function packItems (items: readonly ChunkItem[]): Uint8Array<ArrayBuffer> | null {
  const sink = kPackSink
  sink.clear()
  const n = items.length
  sink.reserve(5)
  const b = sink.buf
  if (n < 16) {
    b[0] = 0x90 | n
    sink.len = 1
  } else if (n < 0x10000) {
    b[0] = 0xdc
    b.writeUInt16BE(n, 1)
    sink.len = 3
  } else {
    b[0] = 0xdd
    b.writeUInt32BE(n, 1)
    sink.len = 5
  }
  let state = 0
  for (let i = 0; i < n && state === 0; i++) {
    const [type, value, taken, source] = items[i] as ChunkItem
    sink.byte(0x94)
    if (type === undefined) {
      sink.reserve(3)
      sink.buf[sink.len++] = 0xd4 // msgpackr's undefined: fixext 1, type 0, data 0
      sink.buf[sink.len++] = 0
      sink.buf[sink.len++] = 0
    } else if (type === null) {
      sink.byte(0xc0)
    } else if (typeof type === 'string') {
      state = packString(sink, type)
    } else {
      state = kNotFast
    }
    if (state === 0) state = typeof value === 'string' ? packString(sink, value) : kNotFast
    if (state === 0) state = packNullable(sink, taken)
    if (state === 0) state = packNullable(sink, source)
  }
  const out = state === 0 ? sink.take() : null
  sink.shrink(kPackKeepBytes)
  return out
}

function packNullable (sink: ByteSink, s: string | null): number {
  if (s !== null) return packString(sink, s)
  sink.byte(0xc0)
  return 0
}

/** Packs a string as threadPackr does (bulk-item.ts writePackedString); a lone surrogate makes the chunk go unpacked. */
function packString (sink: ByteSink, s: string): number {
  if (illFormed(s)) return kIllFormed
  writePackedString(sink, s, threadPackr)
  return 0
}

/** msgpackr's pack() returns a view into its scratch buffer: copy into an owned buffer before transferring. */
function copy (b: Uint8Array): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(b.length)
  out.set(b)
  return out
}
