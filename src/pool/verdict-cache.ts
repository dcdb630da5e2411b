/**
 * A scoring thread's verdict cache shard, kept off the JavaScript heap.
 *
 * Each verdict is stored once as bytes in a ring buffer: a small header, the cache key, and the assessment as JSON
 * text, laid out so that the bulk item's members after `indicator` at `signal_details` none (the bulk default) are one
 * contiguous run of those bytes. A bulk hit at that level copies the run into the response with no parsing; any other
 * use (single calls, other detail levels, msgpack) parses the JSON back into the assessment.
 *
 * The index is an LRU map of small integers in typed arrays (int-lru.ts: a 30-bit hash of the key -> the entry's
 * offset in the ring), so
 * neither the index nor the entries hold JavaScript objects that the garbage collector must copy or trace: holding
 * 100,000 assessment object graphs per thread cost about a quarter of a cold bulk's CPU (docs/OPERATIONS.md).
 *
 * Bounds: at most `max` verdicts (least recently used evicted) and `max * kBytesPerVerdict` bytes of ring (oldest
 * bytes overwritten first; a hit on an entry in the older half of the ring copies it to the head). An entry is read
 * only after its stored key matches the key asked for, so a hash collision or an overwritten entry is a miss, never a
 * wrong verdict.
 */
import type { Assessment } from '../engine/index.ts'
import { kFnvOffset, kFnvPrime } from '../bytes/fnv.ts'
import { kCopy, textInto, utf8Into } from '../bytes/byte-sink.ts'
import { kTailRisk as kRisk, kTailSignalsNone as kTailSignals } from './bulk-item.ts'
import { Facets, kNoFacet } from './facets.ts'
import { IntLru } from './int-lru.ts'

/**
 * Ring bytes reserved per verdict of capacity. An entry holding the assessment (header, key, assessment JSON) took
 * 540-1,300 bytes (10th to 90th percentile; mean 713) on the bench's mixed corpus: the ring then holds about as many
 * verdicts as the index. Entries of a bulk's tail only are smaller, so the index bound is reached first.
 */
export const kBytesPerVerdict = 768
const kMinRingBytes = 1 << 20
/**
 * Entry layout: a 44-byte header, the key (UTF-8), then the verdict: `head` of VerdictTexts, the none tail of the bulk
 * item (bulk-item.ts: kTailRisk, risk, kTailSignalsNone, scores, rest) and a closing `}`, so that head to `}` is the
 * JSON object StoredAssessment; then, once a MessagePack call has asked for it, the none tail in MessagePack
 * (bulk-item.ts packedNoneTail) up to the entry's end.
 *
 * An entry holds the forms its callers have asked for (kSlotForms): the assessment (head and tail: single calls, bulks
 * at signal_details top or all), the JSON tail (JSON bulks at none), the packed tail (MessagePack bulks at none).
 * Risk and scores are always there (the history record's members). A bulk at none stores only its own tail, because
 * the JSON texts no caller has asked for cost a miss a sixth (JSON: the head, mostly the signals) to a third
 * (MessagePack: head and tail) of its scoring time, for callers a deployment rarely mixes. A caller that needs a
 * form the entry lacks takes it as a miss, assesses again and stores the entry whole (the packed tail is made again
 * when a MessagePack caller asks).
 * Header slots (byte offsets; uint32 little-endian but the stamp):
 */
const kSlotLength = 0 // entry length in bytes, header included
const kSlotKeyBytes = 4 // key length in bytes
const kSlotTailStart = 8 // where the none tail starts (relative to the entry)
const kSlotTailEnd = 12 // where it ends
const kSlotRiskEnd = 16 // where the risk's JSON ends
const kSlotScoresEnd = 20 // where the scores' JSON ends
/** float64: the logical position the entry was written at (bytes written before it), which tells whether it is whole. */
const kSlotStamp = 24
const kSlotFacet = 32 // the verdict's facet number (facets.ts), kNoFacet when it has none
const kSlotJsonEnd = 36 // where the JSON ends (after its `}`): the MessagePack tail, if any, runs from here to the end
const kSlotForms = 40 // kFormTail | kFormAssessment: the JSON forms the entry holds (see above); and kFormCanonical
const kHeader = 44
/** The JSON tail (risk, scores and rest). */
const kFormTail = 1
/** The assessment: head and JSON tail. */
const kFormAssessment = 2
/**
 * Not a form: the entry's normalized value, sent as its own value with its type given, normalizes to itself with no
 * warning (so a caller that sends it so may skip normalizing it: CachedVerdict.canonical). normalize() is a pure
 * function of value and type, so a call that saw it once holds for every later one; the bit is set by such a call.
 */
const kFormCanonical = 4
/**
 * Not a form of the verdict: the bytes between the key and the JSON tail are the bulk item's head for the key's value
 * sent as it normalizes (bulk-item.ts writeItemHead), so that such an item is one copy, head to the tail's closing
 * `}` (which is also the item's end). Only in an entry without the assessment, whose head would stand there.
 */
const kFormItemHead = 8
/** Entries larger than this share of the ring are not cached (they would evict too much at once). */
const kMaxEntryShare = 16

/** The texts of one verdict, as the chunk scorer has them on a miss. */
export interface VerdictTexts {
  /**
   * JSON text `{"type":..,"normalized":..,"flags":..,"all_signals":..,` (the part before the bulk tail), for an entry
   * that holds the assessment; else null.
   */
  head: string | null
  risk: string
  scores: string
  /**
   * The members of the bulk tail after scores: `,"threat_context":...,"recommended_actions":...`; null for an entry of
   * the packed tail only (then `packed` is required and `head` null).
   */
  rest: string | null
  /** The facet number of risk and scores (facets.ts); absent or kNoFacet when they have none. */
  facet?: number
  /** The none tail in MessagePack (bulk-item.ts packedNoneTail), when a MessagePack call has made it. */
  packed?: Uint8Array
}

/** VerdictTexts.head from the JSON texts of its members (CachedVerdict.assessment reads them back). */
export function verdictHead (type: string, normalizedJson: string, flagsJson: string, signalsJson: string): string {
  return `{"type":"${type}","normalized":${normalizedJson},"flags":${flagsJson},"all_signals":${signalsJson},`
}

/**
 * FNV-1a of a string's UTF-16 units, cut to 30 bits (a small integer in V8, so the index allocates nothing). With
 * `rest`, of `s + rest`, without joining them: a key may be given as two strings (its constant head and the value).
 */
export function hash30 (s: string, rest = ''): number {
  return (fnvOn(fnvOn(kFnvOffset, s), rest) >>> 0) >>> 2
}

/** FNV-1a state `h` carried on over the UTF-16 units of `s`. */
function fnvOn (h: number, s: string): number {
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), kFnvPrime)
  return h
}

/**
 * What the cache keeps of a key's head (the constant part before the normalized value, VerdictCache.hash): its
 * FNV-1a state and its UTF-8 bytes, so that neither is made again for every value.
 */
interface KeyHead { state: number, bytes: Uint8Array }
/** Key heads kept per cache (a few per snapshot version and profile: one per type); past it they are made again. */
const kMaxKeyHeads = 256

/** Stores `v` (0 to 2^32 - 1) at `at` as uint32 little-endian, as writeUInt32LE does, without its argument checks. */
function putU32 (r: Buffer, at: number, v: number): void {
  r[at] = v & 255
  r[at + 1] = (v >>> 8) & 255
  r[at + 2] = (v >>> 16) & 255
  r[at + 3] = v >>> 24
}

const kWhole = 0
const kOtherKey = 1
const kOverwritten = 2

/** The two constant pieces of the none tail as bytes: copied with a typed-array set, the cheapest write there is. */
const kRiskBytes = Buffer.from(kRisk, 'latin1')
const kTailSignalsBytes = Buffer.from(kTailSignals, 'latin1')

/** A stored verdict: offsets into the ring, valid until the cache's next set or get. */
export class CachedVerdict {
  readonly ring: Buffer
  readonly off: number

  constructor (ring: Buffer, off: number) {
    this.ring = ring
    this.off = off
  }

  private u32 (at: number): number {
    return this.ring.readUInt32LE(this.off + at)
  }

  /** Start of the bulk tail (the members after `indicator` at signal_details none) in `ring`. */
  get tailStart (): number {
    return this.off + this.u32(kSlotTailStart)
  }

  /** End of the bulk tail in `ring`. */
  get tailEnd (): number {
    return this.off + this.u32(kSlotTailEnd)
  }

  /** Whether the entry holds the JSON tail (tailStart to tailEnd): what a JSON bulk at signal_details none copies. */
  get hasTail (): boolean {
    return ((this.ring[this.off + kSlotForms] as number) & kFormTail) !== 0
  }

  /** Whether the entry holds the assessment (assessment()): what single calls and bulks at top or all need. */
  get hasAssessment (): boolean {
    return ((this.ring[this.off + kSlotForms] as number) & kFormAssessment) !== 0
  }

  /**
   * Whether the key's normalized value, sent as the value with the key's type, is known to normalize to itself with
   * no warning (kFormCanonical).
   */
  get canonical (): boolean {
    return ((this.ring[this.off + kSlotForms] as number) & kFormCanonical) !== 0
  }

  /**
   * Start of the bulk item's head for the key's value sent as it normalizes (kFormItemHead), or -1 when the entry
   * has none: the item is then `ring[itemStart, tailEnd + 1)`.
   */
  get itemStart (): number {
    return ((this.ring[this.off + kSlotForms] as number) & kFormItemHead) !== 0 ? this.off + kHeader + this.u32(kSlotKeyBytes) : -1
  }

  /** Records that normalize(value, type) of the key's own value and type gave them back with no warning. */
  markCanonical (): void {
    this.ring[this.off + kSlotForms] = (this.ring[this.off + kSlotForms] as number) | kFormCanonical
  }

  /** Start of the MessagePack none tail in `ring` (equal to packedEnd when the entry has none). */
  get packedStart (): number {
    return this.off + this.u32(kSlotJsonEnd)
  }

  /** End of the MessagePack none tail in `ring`. */
  get packedEnd (): number {
    return this.off + this.u32(kSlotLength)
  }

  /** The texts the verdict was stored from (to store it again with more); an entry with its JSON tail. */
  texts (): VerdictTexts {
    const o = this.off
    const tailStart = o + this.u32(kSlotTailStart)
    const riskEnd = o + this.u32(kSlotRiskEnd)
    const scoresEnd = o + this.u32(kSlotScoresEnd)
    return {
      head: this.hasAssessment ? this.ring.toString('utf8', o + kHeader + this.u32(kSlotKeyBytes), tailStart) : null,
      risk: this.ring.toString('utf8', tailStart + kRisk.length, riskEnd),
      scores: this.ring.toString('utf8', riskEnd + kTailSignals.length, scoresEnd),
      rest: this.ring.toString('utf8', scoresEnd, o + this.u32(kSlotTailEnd)),
      facet: this.facet
    }
  }

  /** The facet number stored with the verdict (facets.ts), or kNoFacet. */
  get facet (): number {
    return this.u32(kSlotFacet)
  }

  /** JSON text of the assessment's risk. */
  riskJson (): string {
    return this.ring.toString('utf8', this.off + this.u32(kSlotTailStart) + kRisk.length, this.off + this.u32(kSlotRiskEnd))
  }

  /** JSON text of the assessment's scores. */
  scoresJson (): string {
    return this.ring.toString('utf8', this.off + this.u32(kSlotRiskEnd) + kTailSignals.length, this.off + this.u32(kSlotScoresEnd))
  }

  /**
   * The members of the none tail as objects (risk, scores, threat_context, recommended_actions), parsed from the
   * stored JSON; an entry with its JSON tail.
   */
  tailMembers (): Pick<Assessment, 'risk' | 'scores' | 'threat_context' | 'recommended_actions'> {
    return JSON.parse(`{${this.ring.toString('utf8', this.off + this.u32(kSlotTailStart), this.off + this.u32(kSlotTailEnd))}}`) as StoredAssessment
  }

  /** The assessment, parsed from the stored JSON; an entry that holds it. */
  assessment (): Assessment {
    const s = JSON.parse(this.ring.toString('utf8', this.off + kHeader + this.u32(kSlotKeyBytes), this.off + this.u32(kSlotJsonEnd))) as StoredAssessment
    return {
      type: s.type,
      normalized: s.normalized,
      risk: s.risk,
      signals: s.all_signals,
      scores: s.scores,
      threat_context: s.threat_context,
      flags: s.flags,
      recommended_actions: s.recommended_actions
    }
  }
}

/** One verdict cache shard. */
export class VerdictCache {
  readonly max: number
  readonly ring: Buffer
  /** The facets its entries are numbered in (facets.ts): a cache belongs to one scoring context. */
  readonly facets = new Facets()
  private readonly index: IntLru
  /** Logical write position: bytes written so far (skipped ring ends included); the physical offset is head % size. */
  private head = 0
  private readonly size: number
  private readonly keyHeads = new Map<string, KeyHead>()

  constructor (max: number) {
    this.max = max
    this.size = Math.max(kMinRingBytes, Math.min(max * kBytesPerVerdict, 2 ** 29))
    this.ring = Buffer.alloc(this.size)
    this.index = new IntLru(Math.max(1, max))
  }

  /** Number of indexed verdicts (some may since have been overwritten in the ring; those miss on lookup). */
  get entries (): number {
    return this.index.size
  }

  /** hash30(key, rest), from the kept state of `key` (a key's constant head: the callers give a few heads). */
  hash (key: string, rest: string): number {
    return (fnvOn(this.keyHead(key).state, rest) >>> 0) >>> 2
  }

  private keyHead (key: string): KeyHead {
    let kh = this.keyHeads.get(key)
    if (kh === undefined) {
      if (this.keyHeads.size >= kMaxKeyHeads) this.keyHeads.clear()
      kh = { state: fnvOn(kFnvOffset, key), bytes: Buffer.from(key, 'utf8') }
      this.keyHeads.set(key, kh)
    }
    return kh
  }

  /** Writes the key `key` + `rest` at `at` and returns its bytes. The caller has made room for 3 bytes per unit. */
  private writeKey (key: string, rest: string, at: number): number {
    const head = this.keyHead(key).bytes
    this.ring.set(head, at)
    return head.length + textInto(this.ring, rest, at + head.length)
  }

  /** The verdict stored under `key` + `rest`, or undefined. */
  get (key: string, h = hash30(key), rest = ''): CachedVerdict | undefined {
    const off = this.index.get(h)
    if (off < 0) return undefined
    const state = this.check(off, key, rest)
    if (state !== kWhole) {
      // An overwritten entry leaves the index; one of another key with the same hash stays (this key simply misses).
      if (state === kOverwritten) this.index.delete(h)
      return undefined
    }
    // A hit in the older half of the ring is copied to the head, so that new entries do not overwrite it soon.
    if (this.head - this.ring.readDoubleLE(off + kSlotStamp) > this.size / 2) {
      const len = this.ring.readUInt32LE(off + kSlotLength)
      const moved = this.reserve(len)
      this.ring.copy(this.ring, moved, off, off + len)
      this.ring.writeDoubleLE(this.head - len, moved + kSlotStamp)
      this.index.set(h, moved)
      return new CachedVerdict(this.ring, moved)
    }
    return new CachedVerdict(this.ring, off)
  }

  /**
   * Stores the verdict of `key` + `rest` (replacing any entry with the same hash); null when it is too large to keep.
   * `hash`: hash30(key, rest), when the caller has it from the get() that missed.
   */
  set (key: string, v: VerdictTexts, hash = hash30(key), rest = ''): CachedVerdict | null {
    // Reserve the most UTF-8 can take, write, then give back what was not used (nothing is written after it).
    const packed = v.packed?.length ?? 0
    const head = v.head ?? ''
    const tail = v.rest ?? ''
    const keyRest = rest
    if (v.rest === null && (v.head !== null || v.packed === undefined)) throw new TypeError('an entry without its JSON tail holds the packed tail only')
    const most = kHeader + 3 * (key.length + keyRest.length + head.length + v.risk.length + v.scores.length + tail.length) + kRisk.length + kTailSignals.length + 1 + packed
    if (most > this.size / kMaxEntryShare) return null
    const off = this.reserve(most)
    const stamp = this.head - most
    const r = this.ring
    let p = off + kHeader
    // Each piece written on its own: joined, each string would first be copied into a flat one (garbage the collector
    // then pays for on every thread). Where a piece is ASCII (bytes = UTF-16 units) its end follows from its length.
    const keyBytes = this.writeKey(key, keyRest, p)
    p += keyBytes
    if (head.length > 0) p += utf8Into(r, head, p)
    const tailStart = p
    r.set(kRiskBytes, p)
    p += kRiskBytes.length
    p += utf8Into(r, v.risk, p)
    const riskEnd = p
    r.set(kTailSignalsBytes, p)
    p += kTailSignalsBytes.length
    p += utf8Into(r, v.scores, p)
    const scoresEnd = p
    if (tail.length > 0) p += utf8Into(r, tail, p)
    const tailEnd = p
    r[p++] = 0x7d // }
    const jsonEnd = p
    if (v.packed !== undefined) {
      r.set(v.packed, p)
      p += packed
    }
    const len = p - off
    this.head -= most - len
    putU32(r, off + kSlotLength, len)
    putU32(r, off + kSlotKeyBytes, keyBytes)
    putU32(r, off + kSlotTailStart, tailStart - off)
    putU32(r, off + kSlotTailEnd, tailEnd - off)
    putU32(r, off + kSlotRiskEnd, riskEnd - off)
    putU32(r, off + kSlotScoresEnd, scoresEnd - off)
    r.writeDoubleLE(stamp, off + kSlotStamp)
    putU32(r, off + kSlotFacet, v.facet ?? kNoFacet)
    putU32(r, off + kSlotJsonEnd, jsonEnd - off)
    putU32(r, off + kSlotForms, v.rest === null ? 0 : v.head === null ? kFormTail : kFormTail | kFormAssessment)
    this.index.set(hash, off)
    return new CachedVerdict(r, off)
  }

  /**
   * Stores the JSON tail of a verdict written elsewhere (a chunk's answer bytes): `src[start, end)` is the none tail,
   * its risk's JSON ending at `riskEnd` and its scores' at `scoresEnd`; the entry holds that tail only (kFormTail), as
   * set() with texts {head: null, risk, scores, rest} would store it. `canonical`: the caller normalized `rest`, sent
   * with the key's type given, to itself with no warning (kFormCanonical); then `src[headStart, start)`, when not
   * empty, is the bulk item's head for it, kept before the tail (kFormItemHead). False when it is too large to keep.
   */
  setTail (key: string, hash: number, src: Uint8Array, start: number, riskEnd: number, scoresEnd: number, end: number, facet: number, rest = '', canonical = false, headStart = start): boolean {
    const from = canonical ? headStart : start
    const most = kHeader + 3 * (key.length + rest.length) + (end - from) + 1
    if (most > this.size / kMaxEntryShare) return false
    const off = this.reserve(most)
    const stamp = this.head - most
    const r = this.ring
    const keyBytes = this.writeKey(key, rest, off + kHeader)
    const headAt = off + kHeader + keyBytes
    kCopy.call(src, r, headAt, from, end)
    const tailStart = headAt + start - from
    const tailEnd = tailStart + end - start
    r[tailEnd] = 0x7d // }
    const len = tailEnd + 1 - off
    this.head -= most - len
    putU32(r, off + kSlotLength, len)
    putU32(r, off + kSlotKeyBytes, keyBytes)
    putU32(r, off + kSlotTailStart, tailStart - off)
    putU32(r, off + kSlotTailEnd, tailEnd - off)
    putU32(r, off + kSlotRiskEnd, tailStart + riskEnd - start - off)
    putU32(r, off + kSlotScoresEnd, tailStart + scoresEnd - start - off)
    r.writeDoubleLE(stamp, off + kSlotStamp)
    putU32(r, off + kSlotFacet, facet)
    putU32(r, off + kSlotJsonEnd, len)
    let forms = kFormTail
    if (canonical) forms |= kFormCanonical
    if (from < start) forms |= kFormItemHead
    putU32(r, off + kSlotForms, forms)
    this.index.set(hash, off)
    return true
  }

  /**
   * Whether the entry at offset `off` is whole (its header is sane and at most a ring's size of bytes were written
   * since its own position, so nothing has overwritten it) and stored under `key` (compared in full).
   */
  private check (off: number, key: string, rest: string): number {
    const r = this.ring
    if (off + kHeader > this.size) return kOverwritten
    const len = r.readUInt32LE(off + kSlotLength)
    const keyBytes = r.readUInt32LE(off + kSlotKeyBytes)
    const stamp = r.readDoubleLE(off + kSlotStamp)
    if (len < kHeader + keyBytes || off + len > this.size || stamp % this.size !== off) return kOverwritten
    const age = this.head - stamp
    if (age < len || age > this.size) return kOverwritten
    return sameKey(r, off + kHeader, keyBytes, key, rest) ? kWhole : kOtherKey
  }

  /** Claims `len` contiguous bytes at the head (wrapping to the start when the end is too short); returns the offset. */
  private reserve (len: number): number {
    let off = this.head % this.size
    if (off + len > this.size) {
      // The end of the ring is skipped; counting the skipped bytes as written keeps head % size the physical offset.
      this.head += this.size - off
      off = 0
    }
    this.head += len
    return off
  }
}

/**
 * Whether the `bytes` UTF-8 bytes at `at` are `key` + `rest`. An ASCII key (nearly every key: the normalized forms are
 * ASCII but for a few odd values) is compared a character at a time, without decoding the stored bytes into a string.
 */
function sameKey (r: Buffer, at: number, bytes: number, key: string, rest: string): boolean {
  const n = key.length
  const m = n + rest.length
  // UTF-8 takes at least a byte per UTF-16 unit.
  if (bytes < m) return false
  for (let i = 0; i < m; i++) {
    const c = i < n ? key.charCodeAt(i) : rest.charCodeAt(i - n)
    if (c >= 0x80) return r.toString('utf8', at, at + bytes) === key + rest
    if (r[at + i] !== c) return false
  }
  return bytes === m
}

interface StoredAssessment {
  type: Assessment['type']
  normalized: string
  flags: string[]
  all_signals: Assessment['signals']
  risk: Assessment['risk']
  scores: Assessment['scores']
  threat_context: Assessment['threat_context']
  recommended_actions: Assessment['recommended_actions']
}
