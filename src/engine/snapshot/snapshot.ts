/**
 * Read side of a compiled snapshot: typed-array views over the shared buffer and the lookups the scorer needs.
 * Constructing one copies nothing of the shared buffer, so every worker thread maps the same bytes; each thread only
 * builds two small lookup accelerators of its own (a /16 index of the IPv4 range tables and a presence filter of the
 * hash table, about 0.8 MB together, a few milliseconds).
 */
import { HashTableView } from './hash-table.ts'
import { hashString, hashWords, KeyTag, type KeyPair } from './hash.ts'
import { kAsnInfoStride, kEntryStride, kNet4PresenceBytes, type SnapshotData, type SnapshotHeader, type SpecialAsnRange } from './format.ts'
import { view } from './layout.ts'
import { formatIPv4, formatIPv6 } from '../normalize/ip.ts'
import type { SourceMeta } from './source.ts'

/** A range table over IPv4 (width 1) or IPv6 (width 4) addresses. */
class RangeView {
  readonly starts: Uint32Array
  readonly ends: Uint32Array
  readonly width: number
  readonly count: number
  /**
   * IPv4 only: slash16[h] = number of ranges starting below h << 16 (h = 0..65536). A lookup then binary-searches
   * only the ranges that start inside the address's /16, instead of ~19 dependent reads over the whole table.
   * Built per thread from the shared starts (256 KB, about a millisecond).
   */
  readonly slash16: Uint32Array | null

  constructor (starts: Uint32Array, ends: Uint32Array, width: number) {
    this.starts = starts
    this.ends = ends
    this.width = width
    this.count = starts.length / width
    this.slash16 = null
    if (width === 1) {
      const index = new Uint32Array(65537)
      let i = 0
      for (let h = 0; h <= 65536; h++) {
        const bound = h * 65536
        while (i < this.count && (starts[i] as number) < bound) i++
        index[h] = i
      }
      this.slash16 = index
    }
  }

  /** Index of the range holding the address, or -1. */
  find (w: ArrayLike<number>): number {
    const { starts, ends, width } = this
    let lo = 0
    let hi = this.count - 1
    let found = -1
    const index = this.slash16
    if (index !== null) {
      // IPv4, the hot path: the last range starting at or below the address starts inside its /16, or is the
      // last one starting before that /16.
      const a = w[0] as number
      const h = a >>> 16
      lo = index[h] as number
      hi = (index[h + 1] as number) - 1
      found = lo - 1
      while (lo <= hi) {
        const mid = (lo + hi) >>> 1
        if ((starts[mid] as number) <= a) {
          found = mid
          lo = mid + 1
        } else {
          hi = mid - 1
        }
      }
      return found === -1 || (ends[found] as number) < a ? -1 : found
    }
    // Last range whose start <= address.
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1
      if (compare(starts, mid * width, w, width) <= 0) {
        found = mid
        lo = mid + 1
      } else {
        hi = mid - 1
      }
    }
    if (found === -1 || compare(ends, found * width, w, width) < 0) return -1
    return found
  }
}

/**
 * Index of the last range of the run from range `i` that holds every address up to `last` with the same value, or
 * -1: a block is described by its ranges' value (AS number, country) only when one value covers all of it. IPv4 runs
 * may continue over adjacent ranges of the same value; an IPv6 block must fit in one range.
 */
function coveringRun (r: RangeView, values: ArrayLike<number>, i: number, last: ArrayLike<number>): number {
  const { starts, ends, width } = r
  let j = i
  while (compare(ends, j * width, last, width) < 0) {
    if (width !== 1 || j + 1 >= r.count || values[j + 1] !== values[i] || (starts[j + 1] as number) !== (ends[j] as number) + 1) return -1
    j++
  }
  return j
}

/** Compares the stored address at `at` with `w`: negative, 0 or positive. */
function compare (arr: Uint32Array, at: number, w: ArrayLike<number>, width: number): number {
  for (let i = 0; i < width; i++) {
    const a = arr[at + i] as number
    const b = w[i] as number
    if (a !== b) return a < b ? -1 : 1
  }
  return 0
}

/** AS registry facts for one AS number. */
export interface AsnInfo { asn: number, org: string | null, v4Ranges: number, v6Ranges: number }

/** What the registry says about the range announcing an address: the same for every address in the range. */
export interface RegistryFacts {
  asn: number
  /** The AS's registry facts, or null when the registry does not know the AS. */
  info: AsnInfo | null
  /** The range as `first-last`. */
  range: string
  /** First listing entry of the AS (as findAsn), or 0. */
  listed: number
}

/** The registry range run announcing an address or a whole block (Snapshot.registryRun), reused by its caller. */
export class RegistryRun {
  version: 4 | 6 = 4
  /** Indexes of the first and last range of the run in the version's range table. */
  first = -1
  last = -1
  asn = 0
  /** The AS's registry facts, or null when the registry does not know the AS. */
  info: AsnInfo | null = null
  /** First listing entry of the AS (as findAsn), or 0. */
  listed = 0
}

/** A mapped snapshot. */
export class Snapshot {
  readonly header: SnapshotHeader
  readonly buffer: SharedArrayBuffer
  readonly sources: SourceMeta[]
  readonly version: string
  readonly dataTimestamp: string
  /** dataTimestamp in whole days since the epoch + 1 (the unit entries use). */
  readonly dataDay: number
  private readonly table: HashTableView
  private readonly net4Presence: Uint8Array
  private readonly entries: Uint32Array
  private readonly asnInfoArr: Uint32Array
  private readonly strOffsets: Uint32Array
  private readonly strBytes: Uint8Array
  private readonly asn4: RangeView
  private readonly asn4v: Uint32Array
  private readonly asn6: RangeView
  private readonly asn6v: Uint32Array
  private readonly cc4: RangeView
  private readonly cc4v: Uint16Array
  private readonly cc6: RangeView
  private readonly cc6v: Uint16Array
  private readonly pair: KeyPair = { h1: 0, h2: 0 }
  /** Decoded pool strings, filled on first use (a cache of immutable data: lookups stay pure). */
  private readonly decoded = new Map<number, string>()
  /**
   * Per AS number, filled on first use: its registry facts and its first listing entry (two hash-table reads each).
   * A cache of immutable data like `decoded`. Only AS numbers the snapshot knows enter it, so it is bounded by the
   * registry and the feeds (~80,000), whatever numbers callers send.
   */
  private readonly asns = new Map<number, { info: AsnInfo | null, listed: number }>()
  /** Country codes by their packed value. */
  private readonly codes = new Map<number, string>()
  /**
   * Presence filter over the hash table: bit (h2 & filterMask) is set for every stored key. The table is far larger
   * than the CPU caches and an IPv4 address needs one random read per listed prefix length (16 with the sample
   * feeds), nearly all of them misses; this bitmap is small enough to stay cached and answers most misses without
   * touching the table. No false negatives, so lookups give the same answers. Built per thread from the shared table.
   */
  private readonly filter: Uint32Array
  private readonly filterMask: number

  constructor (data: SnapshotData) {
    const { header, buffer } = data
    const s = header.sections
    this.header = header
    this.buffer = buffer
    this.sources = header.sources
    this.version = header.version
    this.dataTimestamp = header.dataTimestamp
    this.dataDay = Math.floor(Date.parse(header.dataTimestamp) / 86_400_000) + 1
    this.table = new HashTableView(view(buffer, s, 'table.keys', 'u32'), view(buffer, s, 'table.vals', 'u32'))
    this.net4Presence = view(buffer, s, 'net4.presence', 'u8')
    this.entries = view(buffer, s, 'entries', 'u32')
    this.asnInfoArr = view(buffer, s, 'asnInfo', 'u32')
    this.strOffsets = view(buffer, s, 'strings.offsets', 'u32')
    this.strBytes = view(buffer, s, 'strings.bytes', 'u8')
    this.asn4 = new RangeView(view(buffer, s, 'asn4.starts', 'u32'), view(buffer, s, 'asn4.ends', 'u32'), 1)
    this.asn4v = view(buffer, s, 'asn4.values', 'u32')
    this.asn6 = new RangeView(view(buffer, s, 'asn6.starts', 'u32'), view(buffer, s, 'asn6.ends', 'u32'), 4)
    this.asn6v = view(buffer, s, 'asn6.values', 'u32')
    this.cc4 = new RangeView(view(buffer, s, 'cc4.starts', 'u32'), view(buffer, s, 'cc4.ends', 'u32'), 1)
    this.cc4v = view(buffer, s, 'cc4.values', 'u16')
    this.cc6 = new RangeView(view(buffer, s, 'cc6.starts', 'u32'), view(buffer, s, 'cc6.ends', 'u32'), 4)
    this.cc6v = view(buffer, s, 'cc6.values', 'u16')
    const { keys, vals } = this.table
    let used = 0
    for (let i = 0; i < vals.length; i++) if (vals[i] !== 0) used++
    // About 8 bits per key (~12% false positives), between 64 KB and 1 MB.
    let bits = 1 << 19
    while (bits < used * 8 && bits < (1 << 23)) bits *= 2
    this.filter = new Uint32Array(bits >>> 5)
    this.filterMask = bits - 1
    for (let i = 0; i < vals.length; i++) {
      if (vals[i] === 0) continue
      const b = (keys[i * 2 + 1] as number) & this.filterMask
      this.filter[b >>> 5] = (this.filter[b >>> 5] as number) | (1 << (b & 31))
    }
  }

  /** False when the key is certainly not in the table. */
  private mayHave (h2: number): boolean {
    const b = h2 & this.filterMask
    return ((this.filter[b >>> 5] as number) & (1 << (b & 31))) !== 0
  }

  /**
   * Calls `fn` with every listing key of the hash table (its two lanes) and its first entry (as find returns it):
   * how a retro-hunt compares two snapshots (diff.ts). Registry (asnInfo) keys are walked too; their values are not
   * listing entries, and callers skip them with isListingKey.
   */
  forEachKey (fn: (h1: number, h2: number, head: number) => void): void {
    const { keys, vals } = this.table
    for (let i = 0; i < vals.length; i++) {
      const v = vals[i] as number
      if (v !== 0) fn(keys[i * 2] as number, keys[i * 2 + 1] as number, v)
    }
  }

  /** Whether a key of the table holds listing entries (not the registry facts of an AS number). */
  isListingKey (h1: number, h2: number): boolean {
    return this.asnInfoKeys().get(h1) !== h2
  }

  #asnInfoKeys: Map<number, number> | null = null

  /**
   * The keys of the registry's AS records (first lane to second), computed once: every AS number of the registry's
   * ranges (~80,000), which are the numbers the compiler gives a record (compile.ts insertAsnKeys).
   */
  private asnInfoKeys (): Map<number, number> {
    if (this.#asnInfoKeys !== null) return this.#asnInfoKeys
    const out = new Map<number, number>()
    const pair: KeyPair = { h1: 0, h2: 0 }
    const numbers = new Set<number>()
    for (const r of [this.asn4v, this.asn6v]) for (let i = 0; i < r.length; i++) numbers.add(r[i] as number)
    for (const asn of numbers) {
      hashWords(KeyTag.asnInfo, asn, 0, 0, 0, 0, pair)
      out.set(pair.h1, pair.h2)
    }
    this.#asnInfoKeys = out
    return out
  }

  /** Listing entries in the snapshot (entry values from find/entryNext are 1 to this). */
  get entryCount (): number {
    return this.entries.length / kEntryStride
  }

  /** The plain data to post to another thread (the buffer is shared, not copied). */
  get data (): SnapshotData {
    return { header: this.header, buffer: this.buffer }
  }

  /** First listing entry for a key + 1, or 0. Walk with entryNext. */
  /** False when no IPv4 listing of `prefix` bits can hold the address (its /16 holds none): skip the hash lookup. */
  mayHaveNet4 (prefix: number, address: number): boolean {
    const bit = prefix * kNet4PresenceBytes * 8 + (address >>> 16)
    return ((this.net4Presence[bit >>> 3] as number) & (1 << (bit & 7))) !== 0
  }

  find (pair: KeyPair): number {
    return this.mayHave(pair.h2) ? this.table.get(pair.h1, pair.h2) : 0
  }

  /** Listings of a domain name (exact key only). */
  findDomain (name: string): number {
    return this.find(hashString(KeyTag.domain, name, this.pair))
  }

  /** Listings of a SHA-256 (lowercase hex). */
  findSha256 (hex: string): number {
    return this.find(hashString(KeyTag.sha256, hex, this.pair))
  }

  /** Listings of an AS number. */
  findAsn (asn: number): number {
    return this.asnFacts(asn).listed
  }

  /** Source id of entry `e` (a value from find/entryNext, i.e. index + 1). */
  entrySource (e: number): number { return this.entries[(e - 1) * kEntryStride] as number }
  /** First-seen day (days since epoch + 1), 0 when unknown. */
  entryFirstDay (e: number): number { return this.entries[(e - 1) * kEntryStride + 1] as number }
  /** Last-seen day (days since epoch + 1), 0 when unknown. */
  entryLastDay (e: number): number { return this.entries[(e - 1) * kEntryStride + 2] as number }
  /** The feed's label for this listing, or null. */
  entryLabel (e: number): string | null {
    const l = this.entries[(e - 1) * kEntryStride + 3] as number
    return l === 0 ? null : this.string(l - 1)
  }

  /**
   * The label of entry `e` read as a positive decimal integer (a popularity rank), or null when it is none. Read from
   * the pool's bytes and not cached: a rank list has a distinct label per entry (a million for Tranco), which the
   * string cache would otherwise keep for the life of the thread.
   */
  entryLabelNumber (e: number): number | null {
    const l = this.entries[(e - 1) * kEntryStride + 3] as number
    if (l === 0) return null
    const start = this.strOffsets[l - 1] as number
    const end = this.strOffsets[l] as number
    if (end === start || end - start > 10) return null
    let n = 0
    for (let i = start; i < end; i++) {
      const c = this.strBytes[i] as number
      if (c < 48 || c > 57) return null
      n = n * 10 + (c - 48)
    }
    return n === 0 ? null : n
  }

  /** The special-purpose AS range (IANA) holding `asn` and the built-in source it belongs to, or null. */
  specialAsn (asn: number): { range: SpecialAsnRange, source: SourceMeta } | null {
    for (const range of this.header.specialAsns ?? []) {
      if (asn < range.first || asn > range.last) continue
      const source = this.sources.find((x) => x.name === range.source)
      return source === undefined ? null : { range, source }
    }
    return null
  }

  /** Next listing of the same key, or 0. */
  entryNext (e: number): number { return this.entries[(e - 1) * kEntryStride + 4] as number }

  /** String `i` of the pool. */
  string (i: number): string {
    let s = this.decoded.get(i)
    if (s === undefined) {
      const start = this.strOffsets[i] as number
      const end = this.strOffsets[i + 1] as number
      s = Buffer.from(this.strBytes.buffer, this.strBytes.byteOffset + start, end - start).toString('utf8')
      this.decoded.set(i, s)
    }
    return s
  }

  /** AS number announcing the address (IPv4: one word; IPv6: four), or -1. */
  asnOf (version: 4 | 6, words: ArrayLike<number>): number {
    if (version === 4) {
      const i = this.asn4.find(words)
      return i === -1 ? -1 : this.asn4v[i] as number
    }
    const i = this.asn6.find(words)
    return i === -1 ? -1 : this.asn6v[i] as number
  }

  /**
   * The registry facts of the range announcing the address, or null when no range holds it. With `last` (a block's
   * last address), null also when no one AS announces the whole block.
   */
  registryFacts (version: 4 | 6, words: ArrayLike<number>, last: ArrayLike<number> | null = null): RegistryFacts | null {
    const run = new RegistryRun()
    if (!this.registryRun(version, words, last, run)) return null
    return { asn: run.asn, info: run.info, range: this.registryRange(run), listed: run.listed }
  }

  /**
   * registryFacts into a run the caller reuses, without the range's text (registryRange, or registryV4First and
   * registryV4Last, make it when it is written): false when no range (no one AS, for a block) holds the address.
   */
  registryRun (version: 4 | 6, words: ArrayLike<number>, last: ArrayLike<number> | null, out: RegistryRun): boolean {
    const r = version === 4 ? this.asn4 : this.asn6
    const values = version === 4 ? this.asn4v : this.asn6v
    const i = r.find(words)
    if (i === -1) return false
    const j = last === null ? i : coveringRun(r, values, i, last)
    if (j === -1) return false
    const asn = values[i] as number
    const facts = this.asnFacts(asn)
    out.version = version
    out.first = i
    out.last = j
    out.asn = asn
    out.info = facts.info
    out.listed = facts.listed
    return true
  }

  /** The announcing range of a run as `first-last`. */
  registryRange (run: RegistryRun): string {
    const r = run.version === 4 ? this.asn4 : this.asn6
    if (run.version === 4) return `${formatIPv4(r.starts[run.first] as number)}-${formatIPv4(r.ends[run.last] as number)}`
    const b = run.first * 4
    const e = run.last * 4
    return `${formatIPv6(Array.from(r.starts.subarray(b, b + 4)))}-${formatIPv6(Array.from(r.ends.subarray(e, e + 4)))}`
  }

  /** First address of an IPv4 run's range (uint32). */
  registryV4First (run: RegistryRun): number {
    return this.asn4.starts[run.first] as number
  }

  /** Last address of an IPv4 run's range (uint32). */
  registryV4Last (run: RegistryRun): number {
    return this.asn4.ends[run.last] as number
  }

  private asnFacts (asn: number): { info: AsnInfo | null, listed: number } {
    let facts = this.asns.get(asn)
    if (facts === undefined) {
      const v = this.find(hashWords(KeyTag.asnInfo, asn, 0, 0, 0, 0, this.pair))
      const b = (v - 1) * kAsnInfoStride
      const org = this.asnInfoArr[b] as number
      const info = v === 0 ? null : { asn, org: org === 0 ? null : this.string(org - 1), v4Ranges: this.asnInfoArr[b + 1] as number, v6Ranges: this.asnInfoArr[b + 2] as number }
      facts = { info, listed: this.find(hashWords(KeyTag.asn, asn, 0, 0, 0, 0, this.pair)) }
      if (info !== null || facts.listed !== 0) this.asns.set(asn, facts)
    }
    return facts
  }

  /** Two-letter country code of the address (with `last`: of the whole block, when one country holds it), or null. */
  countryOf (version: 4 | 6, words: ArrayLike<number>, last: ArrayLike<number> | null = null): string | null {
    const r = version === 4 ? this.cc4 : this.cc6
    const values = version === 4 ? this.cc4v : this.cc6v
    const i = r.find(words)
    if (i === -1) return null
    if (last !== null && coveringRun(r, values, i, last) === -1) return null
    const v = values[i] as number
    if (v === 0) return null
    let code = this.codes.get(v)
    if (code === undefined) {
      code = String.fromCharCode(v >> 8, v & 0xff)
      this.codes.set(v, code)
    }
    return code
  }

  /** Registry facts of an AS number, or null when the registry does not know it. */
  asnInfo (asn: number): AsnInfo | null {
    return this.asnFacts(asn).info
  }
}
