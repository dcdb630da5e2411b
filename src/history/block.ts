/**
 * History items as bytes: the encoding a scoring worker writes once per chunk, which travels to the history writer
 * and is stored as is by the SQLite store (a block of items per request run, see sqlite.ts), plus the hashes that
 * let a value or type search skip blocks without reading their items.
 *
 * Part layout, format 2 (one chunk's items; m items, n = 4m strings, t tails; little-endian uint32s):
 *   format (2) | n | type mask | 2 value hashes per item | n end offsets | m tail ids | t | t tail end offsets |
 *   joined text, UTF-8 (the items' strings, then the tails)
 * An item's four strings are its type, value, normalized form and head. Its record's JSON members (the fragment,
 * record.ts) are `"indicator":<indicator>,<tail>` where the indicator is the head, or indicatorJson(type, value,
 * normalized) where the head is null; an item with no tail (tail id 0xffffffff) has its whole fragment as its head. A tail is the
 * record's verdict and log-only members, kept once per part however many items share it: most items of a bulk share
 * a handful ("unknown, no signals" above all), so a part is about a fifth of the bytes of format 1, and the history
 * writer's cost is mostly the bytes it hands the file system (WAL write, then checkpoint).
 * A normalized form equal to the value has the end offset 0xfffffffe and no text.
 * Format 1 (still read): format (1) | n | type mask | 2 value hashes per item | n end offsets | joined text, with the
 * whole fragment as each item's fourth string.
 * SQLite stores parts as they are, so the layout is an on-disk format: a reader refuses a format it does not know.
 * End offsets count UTF-16 code units into the joined text (0xffffffff for a null string), so the reader decodes the
 * text with one native call and slices it; counting code units, the offsets hold even where UTF-8 replaced a lone
 * surrogate (one unit either way). An item whose strings hold a lone surrogate keeps its whole fragment as its head
 * (the fragment's JSON escapes it; the replaced text could not rebuild it).
 */
import { endianness } from 'node:os'
import { ByteSink, outputBuffer } from '../bytes/byte-sink.ts'
import { StoreError } from '../errors.ts'
import { fmix32, fnv1a, kFnvOffset, kFnvPrime } from '../bytes/fnv.ts'
import { column, requestFields, type HistoryRequestFields, type HistoryRow } from './rows.ts'
import { indicatorJson, recordFragment } from './record.ts'

/** Strings per encoded item: type, value, normalized, head (format 1: the JSON fragment). */
export const kStride = 4
/** End offset marking a null string; tail id of an item with no tail. */
const kNull = 0xffffffff
/** End offset of a normalized form that is the value itself (format 2). */
const kSame = 0xfffffffe
/** Format the encoder writes (the layout above); a change to the layout needs a new number and a reader for the old. */
const kFormat = 2
/** The format before tails, still read. */
const kFormat1 = 1
/** Distinct tails a part indexes to share them; a chunk with more keeps the rest once per item (bounded memory). */
const kMaxSharedTails = 1024
/** Header slots (byte offsets of uint32s): the format, the string count n, the type mask. */
const kSlotFormat = 0
const kSlotStrings = 4
const kSlotTypes = 8
/** Bytes before the hashes: the header. */
const kHead = 12
/** Whether this host stores words little-endian, as a part's words are (HistoryItems.encode). */
const kLittleEndian = endianness() === 'LE'

/**
 * A history value or type as both stores compare it: NUL as U+FFFD (column()) and a lone surrogate as U+FFFD (what
 * its UTF-8 encoding stores).
 */
export function comparable (s: string): string {
  const c = column(s) as WellFormed
  return c.isWellFormed() ? c : c.toWellFormed()
}

/** String methods of ES2024 that Node 20 has (the project's lib is ES2023). */
type WellFormed = string & { isWellFormed: () => boolean, toWellFormed: () => string }

/** Two independent 32-bit hashes of comparable(value), for the blocks' value filters. */
export function hashValue (value: string, out: Uint32Array, at: number): void {
  const s = comparable(value)
  let h1 = kFnvOffset
  let h2 = 0x9747b28c
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    h1 = Math.imul(h1 ^ c, kFnvPrime)
    h2 = Math.imul(h2 ^ c, 0x5bd1e995)
    h2 ^= h2 >>> 13
  }
  out[at] = fmix32(h1)
  out[at + 1] = (h2 | 1) >>> 0 // odd: the probe step of the filter must not be 0
}

/** Type bits computed so far: a chunk asks for one of a handful of types thousands of times. */
const kTypeBits = new Map<string, number>()

/** The bit a type sets in a type mask: one of 31 by hash of comparable(type), bit 31 for no type. */
export function typeBit (type: string | null): number {
  if (type === null) return 0x80000000
  let bit = kTypeBits.get(type)
  if (bit === undefined) {
    bit = 2 ** (fnv1a(comparable(type)) % 31)
    // Bounded: a type as sent is any string a caller chose (an invalid item keeps it).
    if (kTypeBits.size < 64) kTypeBits.set(type, bit)
  }
  return bit
}

/** Collects one chunk's history items (worker side). */
export class HistoryItems {
  /** The items' strings so far, as UTF-8, back to back: written as each arrives, so none of them outlives its item. */
  private readonly text: ByteSink
  /** The tails' text, UTF-8, back to back (joined after the items' strings by encode()). */
  private readonly tailText: ByteSink
  /** End offset of each string in UTF-16 code units (kNull for null, kSame for a normalized form equal to the value). */
  private ends: Uint32Array
  private hashes: Uint32Array
  /** Tail id of each item (kNull: none). */
  private tailIds: Uint32Array
  /** Tail ids by text, for the first kMaxSharedTails distinct tails (a new map on reset(): see there). */
  private shared = new Map<string, number>()
  /** Tail ids of those by the caller's number for their text (addVerdict's `tailKey`). */
  private sharedKeys = new Map<number, number>()
  /** End offset of each tail in UTF-16 code units, from the start of the tails. */
  private tailEnds: Uint32Array
  private tails = 0
  private tailEnd = 0
  private types = 0
  private n = 0
  private end = 0

  /**
   * `expected`: items the chunk will add, to size the buffers once (they grow past it). `text`, `tailText`: empty
   * sinks to write the strings into, for a thread that reuses them from chunk to chunk (encode() copies out of them).
   */
  constructor (expected = 1, text?: ByteSink, tailText?: ByteSink) {
    const m = Math.max(1, expected)
    this.text = text ?? new ByteSink(m * 64)
    this.tailText = tailText ?? new ByteSink(1024)
    this.ends = new Uint32Array(m * kStride)
    this.hashes = new Uint32Array(m * 2)
    this.tailIds = new Uint32Array(m)
    this.tailEnds = new Uint32Array(16)
  }

  /**
   * Adds one record whose indicator is `{type, value, normalized}` as JSON.stringify writes it (keys in that order).
   * `tail`: the record's JSON members after the indicator, `"risk":...,"scores":...,"labels":...,"label_count":...,
   * "action_taken":...,"action_source":...`, without the leading comma. `tailKey`: a number the caller gives this very
   * tail text every time (never another text), so that a tail seen before is found without hashing its text; -1
   * when it has none. The part's bytes are the same either way.
   */
  addVerdict (type: string | null, value: string, normalized: string | null, tail: string, tailKey = -1): void {
    if (!wellFormed(type) || !wellFormed(value) || !wellFormed(normalized)) {
      this.add(type, value, normalized, recordFragment(indicatorJson(type, value, normalized), tail))
      return
    }
    let id = tailKey < 0 ? undefined : this.sharedKeys.get(tailKey)
    if (id === undefined) {
      id = this.shared.get(tail)
      if (id === undefined) {
        id = this.tails
        if (this.shared.size < kMaxSharedTails) this.shared.set(tail, id)
        this.pushTail(tail)
      }
      // Only a shared id: a tail past kMaxSharedTails is kept once per item, as without a key.
      if (tailKey >= 0 && this.shared.get(tail) === id) this.sharedKeys.set(tailKey, id)
    }
    this.item(type, value, normalized, null, id)
  }

  /**
   * Adds one record with its fragment as given: the JSON members `"indicator":...,"risk":...,"scores":...,
   * "labels":...,"label_count":...,"action_taken":...,"action_source":...` without braces.
   */
  add (type: string | null, value: string, normalized: string | null, fragment: string): void {
    this.item(type, value, normalized, fragment, kNull)
  }

  private item (type: string | null, value: string, normalized: string | null, head: string | null, tailId: number): void {
    const m = this.n / kStride
    if (m === this.tailIds.length) {
      this.ends = grown(this.ends)
      this.hashes = grown(this.hashes)
      this.tailIds = grown(this.tailIds)
    }
    this.tailIds[m] = tailId
    this.types = (this.types | typeBit(type)) >>> 0
    const same = normalized === value
    this.push(type)
    this.push(value)
    if (same) this.ends[this.n++] = kSame
    else this.push(normalized)
    this.push(head)
    // Each string written on its own: offsets count UTF-16 units, so they hold for the joined text, and no string's
    // high surrogate can pair with the next one's low surrogate (each half alone is replaced, as when joined).
    const text = this.text
    if (type !== null) text.text(type)
    if (!writeHashed(text, value, this.hashes, 2 * m)) {
      hashValue(value, this.hashes, 2 * m)
      text.write(value)
    }
    if (!same && normalized !== null) text.text(normalized)
    if (head !== null) text.write(head)
  }

  private push (str: string | null): void {
    if (str === null) {
      this.ends[this.n++] = kNull
      return
    }
    this.end += str.length
    this.ends[this.n++] = this.end
  }

  private pushTail (tail: string): void {
    if (this.tails === this.tailEnds.length) this.tailEnds = grown(this.tailEnds)
    this.tailEnd += tail.length
    this.tailEnds[this.tails++] = this.tailEnd
    this.tailText.write(tail)
  }

  /**
   * Forgets every item and tail, keeping the buffers: a thread that encodes one part per call (single verdicts)
   * reuses one collector instead of making its sinks and arrays again each time. encode() after reset() writes the
   * bytes a new collector would.
   */
  reset (): void {
    this.text.clear()
    this.tailText.clear()
    // New maps, not clear(): clearing a map that has reached the old generation gives it a new table there and leaves
    // the dead one holding the last call's tail texts, which then outlive the young generation's collections as if
    // referenced (each call's tail promoted). A new map is young, and is dropped young.
    if (this.shared.size > 0) this.shared = new Map()
    if (this.sharedKeys.size > 0) this.sharedKeys = new Map()
    this.tails = 0
    this.tailEnd = 0
    this.types = 0
    this.n = 0
    this.end = 0
  }

  /** Items added so far. */
  get count (): number {
    return this.n / kStride
  }

  /**
   * The encoded items (the part layout above), in a buffer of their own that can be transferred (outputBuffer, over
   * `spare` if it suits).
   */
  encode (spare?: ArrayBuffer): Uint8Array<ArrayBuffer> {
    const n = this.n
    const m = n / kStride
    const t = this.tails
    const head = kHead + 4 * (2 * m) + 4 * n + 4 * m + 4 + 4 * t
    const size = head + this.text.len + this.tailText.len
    const out = Buffer.from(outputBuffer(size, spare), 0, size)
    out.writeUInt32LE(kFormat, kSlotFormat)
    out.writeUInt32LE(n, kSlotStrings)
    out.writeUInt32LE(this.types, kSlotTypes)
    // The head is whole words from the buffer's start: the arrays go in as three copies, not a call per word (each
    // writeUInt32LE cost about 18 ns; a 5,000-item part took 0.6 ms), in the host's order, made little-endian after.
    const words = new Uint32Array(out.buffer, 0, head >>> 2)
    let w = kHead >>> 2
    words.set(this.hashes.subarray(0, 2 * m), w)
    w += 2 * m
    words.set(this.ends.subarray(0, n), w)
    w += n
    words.set(this.tailIds.subarray(0, m), w)
    w += m
    words[w++] = t
    for (let i = 0; i < t; i++) words[w++] = this.end + (this.tailEnds[i] as number)
    if (!kLittleEndian) swapWords(out, kHead, head)
    this.text.buf.copy(out, head, 0, this.text.len)
    this.tailText.buf.copy(out, head + this.text.len, 0, this.tailText.len)
    return new Uint8Array(out.buffer, 0, size) as Uint8Array<ArrayBuffer>
  }
}

/** Reverses the bytes of each 4-byte word of `buf` from `start` to `end` (a multiple of 4 apart), in place. */
export function swapWords (buf: Uint8Array, start: number, end: number): void {
  for (let i = start; i < end; i += 4) {
    const a = buf[i] as number
    const b = buf[i + 1] as number
    buf[i] = buf[i + 3] as number
    buf[i + 1] = buf[i + 2] as number
    buf[i + 2] = b
    buf[i + 3] = a
  }
}

function grown (a: Uint32Array): Uint32Array {
  const next = new Uint32Array(a.length * 2)
  next.set(a)
  return next
}

/**
 * Writes `value` (UTF-8) into `sink` and its two hashes into `out` at `at`, as hashValue does, in one pass over its
 * characters, when it is ASCII without NUL (so that comparable(value) is the value itself and its UTF-8 is one byte
 * a character); returns false, having written nothing, for any other value.
 */
function writeHashed (sink: ByteSink, value: string, out: Uint32Array, at: number): boolean {
  const n = value.length
  sink.reserve(n)
  const buf = sink.buf
  const p = sink.len
  let h1 = kFnvOffset
  let h2 = 0x9747b28c
  for (let i = 0; i < n; i++) {
    const c = value.charCodeAt(i)
    if (c === 0 || c >= 0x80) return false
    buf[p + i] = c
    h1 = Math.imul(h1 ^ c, kFnvPrime)
    h2 = Math.imul(h2 ^ c, 0x5bd1e995)
    h2 ^= h2 >>> 13
  }
  sink.len = p + n
  out[at] = fmix32(h1)
  out[at + 1] = (h2 | 1) >>> 0
  return true
}

function wellFormed (s: string | null): boolean {
  return s === null || (s as WellFormed).isWellFormed()
}

/** The part as a Buffer (no copy), after checking its format. */
function bufferOf (part: Uint8Array): Buffer {
  const buf = Buffer.isBuffer(part) ? part : Buffer.from(part.buffer, part.byteOffset, part.byteLength)
  const format = buf.length < kHead ? 0 : buf.readUInt32LE(kSlotFormat)
  if (format !== kFormat && format !== kFormat1) throw new StoreError('INVALID_RECORD', 'history part of an unknown format')
  return buf
}

/** Items in an encoded part. */
export function partCount (part: Uint8Array): number {
  return bufferOf(part).readUInt32LE(kSlotStrings) / kStride
}

/** Type mask of an encoded part (typeBit of each item, or-ed). */
export function partTypes (part: Uint8Array): number {
  return bufferOf(part).readUInt32LE(kSlotTypes)
}

/** Value hashes of item `i` of an encoded part, into out[0..1]. */
export function partHash (part: Buffer, i: number, out: Uint32Array): void {
  out[0] = part.readUInt32LE(kHead + 8 * i)
  out[1] = part.readUInt32LE(kHead + 8 * i + 4)
}

function invalidPart (): StoreError {
  return new StoreError('INVALID_RECORD', 'history part is damaged')
}

/** The strings of an encoded part: type, value, normalized, fragment per item (null where null). */
export function partStrings (part: Uint8Array): Array<string | null> {
  const buf = bufferOf(part)
  const format = buf.readUInt32LE(kSlotFormat)
  const n = buf.readUInt32LE(kSlotStrings)
  const m = n / kStride
  if (!Number.isInteger(m)) throw invalidPart()
  const endsAt = kHead + 4 * (2 * m)
  let at = endsAt + 4 * n
  let tailIdsAt = 0
  let tailEndsAt = 0
  let t = 0
  if (format !== kFormat1) {
    tailIdsAt = at
    at += 4 * m
    if (at + 4 > buf.length) throw invalidPart()
    t = buf.readUInt32LE(at)
    tailEndsAt = at + 4
    at = tailEndsAt + 4 * t
  }
  if (at > buf.length) throw invalidPart()
  const text = buf.toString('utf8', at)
  const slice = (start: number, end: number): string => {
    if (end < start || end > text.length) throw invalidPart()
    return text.slice(start, end)
  }
  const out: Array<string | null> = new Array(n)
  let start = 0
  for (let i = 0; i < n; i++) {
    const end = buf.readUInt32LE(endsAt + 4 * i)
    if (end === kNull) {
      out[i] = null
    } else if (end === kSame && i % kStride === 2 && format !== kFormat1) {
      out[i] = out[i - 1] as string
    } else {
      out[i] = slice(start, end)
      start = end
    }
  }
  if (format === kFormat1) return out
  const tails: string[] = new Array(t)
  for (let i = 0; i < t; i++) {
    const end = buf.readUInt32LE(tailEndsAt + 4 * i)
    tails[i] = slice(start, end)
    start = end
  }
  for (let i = 0; i < m; i++) {
    const id = buf.readUInt32LE(tailIdsAt + 4 * i)
    const j = i * kStride
    const head = out[j + 3] as string | null
    if (id === kNull) {
      if (head === null) throw invalidPart()
      continue
    }
    const tail = tails[id]
    if (tail === undefined) throw invalidPart()
    out[j + 3] = recordFragment(head ?? indicatorJson(out[j] ?? null, out[j + 1] ?? null, out[j + 2] ?? null), tail)
  }
  return out
}

/**
 * A request's share of a history batch: the request-level fields and one encoded part of `count` items. Every part
 * of one request carries the same uid and envelope.
 */
export interface HistoryPart extends HistoryRequestFields {
  count: number
  part: Uint8Array
}

/**
 * A one-item part with `members` (JSON members text) appended to its record's item: `..."action_source":..,<members>`
 * (record.ts ownEnvelopeMembers). The item's text ends the part, whether it is its tail or, without one, its whole
 * fragment: the members are appended to the bytes and that text's end offset moved, no re-encoding. Null for a part
 * of any other shape (several items, format 1), which must then keep a request row of its own.
 */
export function withMembersAppended (part: Uint8Array, members: string): Uint8Array | null {
  const buf = Buffer.isBuffer(part) ? part : Buffer.from(part.buffer, part.byteOffset, part.byteLength)
  if (buf.length < kHead || buf.readUInt32LE(kSlotFormat) !== kFormat || buf.readUInt32LE(kSlotStrings) !== kStride) return null
  const tailsAt = kHead + 4 * 2 + 4 * kStride + 4 // after the item's two hashes, four end offsets and tail id
  const t = buf.readUInt32LE(tailsAt)
  if (t > 1) return null
  // The end offset of the part's last text: the one tail's, or (no tail) the fragment's, the item's fourth string.
  const endAt = t === 1 ? tailsAt + 4 : kHead + 4 * 2 + 4 * (kStride - 1)
  const end = buf.readUInt32LE(endAt)
  if (end === kNull || end === kSame) return null
  const text = `,${members}`
  const out = Buffer.allocUnsafe(buf.length + Buffer.byteLength(text))
  buf.copy(out, 0)
  out.write(text, buf.length, 'utf8')
  out.writeUInt32LE(end + text.length, endAt)
  return out
}

/** The rows of parts, in order (for stores that keep a row per item, and for history.rejected). */
export function partRows (parts: readonly HistoryPart[], out: HistoryRow[] = []): HistoryRow[] {
  for (const p of parts) {
    const flat = partStrings(p.part)
    const head = requestFields(p)
    for (let i = 0; i + kStride <= flat.length; i += kStride) {
      out.push({
        ...head,
        indicatorType: flat[i] === null ? null : column(flat[i] as string),
        indicatorValue: column(flat[i + 1] ?? ''),
        indicatorNormalized: flat[i + 2] === null ? null : column(flat[i + 2] as string),
        item: flat[i + 3] as string
      })
    }
  }
  return out
}

/** Bits of the value filter of a block of n items: 16 per item, a power of two (false positives about 0.25%). */
export function filterBits (n: number): number {
  let bits = 64
  while (bits < n * 16) bits *= 2
  return bits
}

/** Probes per value. */
const kProbes = 4

/** Adds a value's hashes to a filter of filter.length * 8 bits. */
export function filterAdd (filter: Uint8Array, h1: number, h2: number): void {
  const mask = filter.length * 8 - 1
  for (let j = 0; j < kProbes; j++) {
    const bit = (h1 + j * h2) & mask
    filter[bit >>> 3] = (filter[bit >>> 3] as number) | (1 << (bit & 7))
  }
}

/**
 * The bits filterAdd sets for a value's hashes in a filter of `bytes` bytes, for a store that tests them in SQL: bit k
 * is bit k % 8 (least significant first) of byte k / 8, as PostgreSQL's get_bit numbers the bits of a bytea.
 */
export function filterProbeBits (bytes: number, h1: number, h2: number): number[] {
  const mask = bytes * 8 - 1
  return Array.from({ length: kProbes }, (_, j) => (h1 + j * h2) & mask)
}

/** False when the value with these hashes is certainly not in the filter's block. */
export function filterHas (filter: Uint8Array, h1: number, h2: number): boolean {
  const mask = filter.length * 8 - 1
  for (let j = 0; j < kProbes; j++) {
    const bit = (h1 + j * h2) & mask
    if (((filter[bit >>> 3] as number) & (1 << (bit & 7))) === 0) return false
  }
  return true
}

/**
 * One encoded part read for a retro-hunt scan: its text decoded once, each item's type and normalized form at hand,
 * and an item's record fragment built only when asked for (partStrings builds every item's).
 */
export class PartView {
  /** Items. */
  readonly count: number
  readonly #buf: Buffer
  readonly #format: number
  readonly #text: string
  /** Start and end (UTF-16 units into #text) of each string; -1 for null. */
  readonly #starts: Int32Array
  readonly #ends: Int32Array
  readonly #tailIdsAt: number
  readonly #tailEndsAt: number
  readonly #tails: number

  constructor (part: Uint8Array) {
    const buf = bufferOf(part)
    this.#buf = buf
    const format = buf.readUInt32LE(kSlotFormat)
    this.#format = format
    const n = buf.readUInt32LE(kSlotStrings)
    const m = n / kStride
    if (!Number.isInteger(m)) throw invalidPart()
    this.count = m
    const endsAt = kHead + 4 * (2 * m)
    let at = endsAt + 4 * n
    this.#tailIdsAt = 0
    this.#tailEndsAt = 0
    this.#tails = 0
    if (format !== kFormat1) {
      this.#tailIdsAt = at
      at += 4 * m
      if (at + 4 > buf.length) throw invalidPart()
      this.#tails = buf.readUInt32LE(at)
      this.#tailEndsAt = at + 4
      at = this.#tailEndsAt + 4 * this.#tails
    }
    if (at > buf.length) throw invalidPart()
    this.#text = buf.toString('utf8', at)
    const starts = new Int32Array(n)
    const ends = new Int32Array(n)
    let start = 0
    for (let i = 0; i < n; i++) {
      const end = buf.readUInt32LE(endsAt + 4 * i)
      if (end === kNull) {
        starts[i] = -1
        ends[i] = -1
      } else if (end === kSame && i % kStride === 2 && format !== kFormat1) {
        starts[i] = starts[i - 1] as number
        ends[i] = ends[i - 1] as number
      } else {
        if (end < start || end > this.#text.length) throw invalidPart()
        starts[i] = start
        ends[i] = end
        start = end
      }
    }
    this.#starts = starts
    this.#ends = ends
  }

  #string (k: number): string | null {
    const s = this.#starts[k] as number
    return s < 0 ? null : this.#text.slice(s, this.#ends[k])
  }

  /** Item i's type as stored (null for an invalid item without one). */
  type (i: number): string | null {
    return this.#string(i * kStride)
  }

  /** Item i's normalized form (null for an invalid item). */
  normalized (i: number): string | null {
    return this.#string(i * kStride + 2)
  }

  /** The decoded text the spans below index. */
  get text (): string {
    return this.#text
  }

  /** Start of item i's normalized form in `text` (-1 when null); it ends at normalizedEnd(i). */
  normalizedStart (i: number): number {
    return this.#starts[i * kStride + 2] as number
  }

  /** End of item i's normalized form in `text`. */
  normalizedEnd (i: number): number {
    return this.#ends[i * kStride + 2] as number
  }

  /** Item i's record fragment (record.ts), as partStrings gives it. */
  fragment (i: number): string {
    const j = i * kStride
    const head = this.#string(j + 3)
    if (this.#format === kFormat1) return head ?? ''
    const id = this.#buf.readUInt32LE(this.#tailIdsAt + 4 * i)
    if (id === kNull) {
      if (head === null) throw invalidPart()
      return head
    }
    if (id >= this.#tails) throw invalidPart()
    // Tails follow the items' strings: tail k runs from the end of tail k - 1 (or of the last string) to its end.
    const end = this.#buf.readUInt32LE(this.#tailEndsAt + 4 * id)
    const begin = id === 0 ? this.#lastEnd() : this.#buf.readUInt32LE(this.#tailEndsAt + 4 * (id - 1))
    if (end < begin || end > this.#text.length) throw invalidPart()
    return recordFragment(head ?? indicatorJson(this.#string(j), this.#string(j + 1), this.#string(j + 2)), this.#text.slice(begin, end))
  }

  #itemsEnd = -1

  /** Where the items' strings end (the tails begin). */
  #lastEnd (): number {
    if (this.#itemsEnd >= 0) return this.#itemsEnd
    let last = 0
    for (let k = this.#ends.length - 1; k >= 0; k--) {
      if ((this.#ends[k] as number) >= 0) {
        last = this.#ends[k] as number
        break
      }
    }
    this.#itemsEnd = last
    return last
  }
}
