/**
 * Read side of a compiled snapshot: typed-array views over the shared buffer and the lookups the scorer needs.
 * Constructing one copies nothing, so every worker thread maps the same bytes.
 */
import { HashTableView } from './hash-table.ts'
import { hashString, hashWords, KeyTag, type KeyPair } from './hash.ts'
import { kAsnInfoStride, kEntryStride, type SnapshotData, type SnapshotHeader } from './compile.ts'
import { view } from './layout.ts'
import type { SourceMeta } from './source.ts'

/** A range table over IPv4 (width 1) or IPv6 (width 4) addresses. */
class RangeView {
  readonly starts: Uint32Array
  readonly ends: Uint32Array
  readonly width: number
  readonly count: number

  constructor (starts: Uint32Array, ends: Uint32Array, width: number) {
    this.starts = starts
    this.ends = ends
    this.width = width
    this.count = starts.length / width
  }

  /** Index of the range holding the address, or -1. */
  find (w: ArrayLike<number>): number {
    const { starts, ends, width } = this
    let lo = 0
    let hi = this.count - 1
    let found = -1
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
  }

  /** The plain data to post to another thread (the buffer is shared, not copied). */
  get data (): SnapshotData {
    return { header: this.header, buffer: this.buffer }
  }

  /** First listing entry for a key + 1, or 0. Walk with entryNext. */
  find (pair: KeyPair): number {
    return this.table.get(pair.h1, pair.h2)
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
    return this.find(hashWords(KeyTag.asn, asn, 0, 0, 0, 0, this.pair))
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

  /** Next listing of the same key, or 0. */
  entryNext (e: number): number { return this.entries[(e - 1) * kEntryStride + 4] as number }

  /** String `i` of the pool. */
  string (i: number): string {
    const start = this.strOffsets[i] as number
    const end = this.strOffsets[i + 1] as number
    return Buffer.from(this.strBytes.buffer, this.strBytes.byteOffset + start, end - start).toString('utf8')
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

  /** The registry range [start, end] (word arrays) holding the address, or null. */
  asnRangeOf (version: 4 | 6, words: ArrayLike<number>): { start: number[], end: number[] } | null {
    const r = version === 4 ? this.asn4 : this.asn6
    const i = r.find(words)
    if (i === -1) return null
    const w = r.width
    return { start: Array.from(r.starts.subarray(i * w, i * w + w)), end: Array.from(r.ends.subarray(i * w, i * w + w)) }
  }

  /** Two-letter country code of the address, or null. */
  countryOf (version: 4 | 6, words: ArrayLike<number>): string | null {
    const r = version === 4 ? this.cc4 : this.cc6
    const i = r.find(words)
    if (i === -1) return null
    const v = (version === 4 ? this.cc4v : this.cc6v)[i] as number
    return v === 0 ? null : String.fromCharCode(v >> 8, v & 0xff)
  }

  /** Registry facts of an AS number, or null when the registry does not know it. */
  asnInfo (asn: number): AsnInfo | null {
    const v = this.table.get(...pairOf(hashWords(KeyTag.asnInfo, asn, 0, 0, 0, 0, this.pair)))
    if (v === 0) return null
    const b = (v - 1) * kAsnInfoStride
    const org = this.asnInfoArr[b] as number
    return { asn, org: org === 0 ? null : this.string(org - 1), v4Ranges: this.asnInfoArr[b + 1] as number, v6Ranges: this.asnInfoArr[b + 2] as number }
  }
}

function pairOf (p: KeyPair): [number, number] {
  return [p.h1, p.h2]
}
