/**
 * A source's compiled form, its "part": every distinct listing key the source holds, in order of first appearance,
 * with the seen-window and label of each, plus what the snapshot header says about the source (lines, rejects,
 * prefix lengths). The compiler merges parts into a snapshot (compile.ts); the part cache keeps them on disk
 * (part-cache.ts), so a rebuild after one feed changed re-parses that feed alone.
 *
 * Building a part is where a feed's entries are normalized. Entries arrive one at a time (the loaders' EntrySink)
 * and are folded at once into flat typed arrays, deduplicated through an open-addressing table of indexes into
 * those arrays: a million-entry feed costs about 40 bytes per distinct entry while it is read, and 20 once done,
 * never a million entry objects and a string-keyed map.
 *
 * A part file (section-file.ts container, magic IOCVPRT1) holds the header fields of PartHeader and the sections
 * `keys` (u32, two lanes per entry), `first`, `last`, `label` (u32 per entry: days since the epoch + 1, or 0 when
 * unknown; label = index into `labels` + 1, or 0) and, when the source lists IPv4 networks, `net4` (u8, the
 * presence bitmaps of snapshot format.ts).
 */
import { normalize } from '../engine/normalize/index.ts'
import { kNet4PresenceBytes, listingKey } from '../engine/snapshot/format.ts'
import type { KeyPair } from '../engine/snapshot/hash.ts'
import type { FeedEntry, IndicatorType, RejectedLine } from '../engine/types.ts'
import type { EntrySink } from './feeds/index.ts'
import { readSectionFile, writeSectionFile } from './section-file.ts'

/** Bumped whenever what a part holds, or how a source becomes one, changes: older part files are then never read. */
export const kPartFormat = 1
const kPartMagic = 'IOCVPRT1'
const kMaxRejectedSamples = 20
const kDayMs = 86_400_000
const kNet4Bytes = 33 * kNet4PresenceBytes

/** One source's compiled listings and facts. */
export interface SourcePart {
  /** Lines (or items) the loader examined. */
  lines: number
  /** Lines the loader rejected plus values that did not normalize. */
  rejected: number
  rejectedSamples: RejectedLine[]
  /** Distinct labels, in order of first appearance among the entries that normalized. */
  labels: string[]
  /** Prefix lengths of the networks listed (addresses count as /32 or /128), ascending. */
  v4Prefixes: number[]
  v6Prefixes: number[]
  /** Distinct listing keys (the source's `indexed`). */
  count: number
  keys: Uint32Array
  first: Uint32Array
  last: Uint32Array
  label: Uint32Array
  /** IPv4 presence bitmaps (33 prefix lengths x one bit per /16), or null when the source lists no IPv4 network. */
  net4: Uint8Array | null
}

/** Days since the epoch + 1 (0: unknown), as the snapshot stores seen dates. */
function toDay (ms: number | undefined): number {
  return ms === undefined || !Number.isFinite(ms) ? 0 : Math.floor(ms / kDayMs) + 1
}

/** Sets the presence bits of an IPv4 network of `prefix` bits: its /16, or every /16 it covers. */
function markNet4 (bitmaps: Uint8Array, address: number, prefix: number): void {
  const base = prefix * kNet4PresenceBytes * 8
  const first = address >>> 16
  const count = prefix >= 16 ? 1 : 2 ** (16 - prefix)
  const start = prefix >= 16 ? first : first & ~(count - 1)
  for (let i = start; i < start + count; i++) {
    const bit = base + i
    bitmaps[bit >>> 3] = (bitmaps[bit >>> 3] as number) | (1 << (bit & 7))
  }
}

/**
 * A copy of `s` that shares no memory with it: a label or reason cut from a feed's text may be a slice that keeps
 * the whole text alive (V8 substrings point into their parent), and a part outlives its text.
 */
function detached (s: string): string {
  return JSON.parse(JSON.stringify(s)) as string
}

/** Slots of the dedup table for `cap` entries: a power of two, load factor at most 2/3. */
function slotsFor (cap: number): number {
  let n = 16
  while (n * 2 < cap * 3) n *= 2
  return n
}

/** Folds one source's entries, as they are read, into its part. */
export class PartBuilder {
  private n = 0
  private cap: number
  private keys: Uint32Array
  // Seen days are compared (signed) while repeated lines merge. Int32 holds every day of years 0-9999; a value
  // beyond it (a bogus epoch) widens both arrays to float64, so the comparisons stay those of plain numbers.
  private first: Int32Array | Float64Array
  private last: Int32Array | Float64Array
  private label: Uint32Array
  /** Dedup table: index + 1 of the entry holding a key, 0 = empty; the key itself is read from `keys`. */
  private slots: Uint32Array
  private readonly labelIndex = new Map<string, number>()
  private readonly labels: string[] = []
  private readonly v4 = new Set<number>()
  private readonly v6 = new Set<number>()
  private net4: Uint8Array | null = null
  private normRejected = 0
  private readonly normSamples: RejectedLine[] = []
  private readonly pair: KeyPair = { h1: 0, h2: 0 }

  /** `expected`: a guess at the entry count (a feed's line count), so the arrays rarely grow. */
  constructor (expected = 1024) {
    this.cap = Math.max(16, expected)
    this.keys = new Uint32Array(this.cap * 2)
    this.first = new Int32Array(this.cap)
    this.last = new Int32Array(this.cap)
    this.label = new Uint32Array(this.cap)
    this.slots = new Uint32Array(slotsFor(this.cap))
  }

  /** The loaders' sink: each entry goes straight into the part. */
  readonly sink: EntrySink = (type, value, line, facts) => {
    this.add(type, value, line, facts?.firstSeen, facts?.lastSeen, facts?.label)
  }

  /** Adds a whole entry (built-in lists, and loaders that return entries instead of using the sink). */
  addEntry (e: FeedEntry): void {
    this.add(e.type, e.value, e.line, e.firstSeen, e.lastSeen, e.label)
  }

  /** Normalizes one entry and folds it in: a key already held merges into the widest seen-window. */
  add (type: IndicatorType | null, value: string, line: number, firstSeen?: number, lastSeen?: number, labelText?: string): void {
    const res = normalize(value, type ?? undefined)
    if (!res.ok) {
      this.normRejected++
      if (this.normSamples.length < kMaxRejectedSamples) this.normSamples.push({ line, reason: res.errors.join('; ') })
      return
    }
    const ind = res.indicator
    if (ind.type === 'ip' || ind.type === 'ip_block') {
      const v4 = ind.ip?.version === 4
      const bits = ind.type === 'ip' ? (v4 ? 32 : 128) : ind.prefix as number
      ;(v4 ? this.v4 : this.v6).add(bits)
      if (v4) markNet4(this.net4 ??= new Uint8Array(kNet4Bytes), ind.ip?.words[0] as number, bits)
    }
    const { h1, h2 } = listingKey(ind, this.pair)
    const first = toDay(firstSeen)
    const last = toDay(lastSeen ?? firstSeen)
    if (((first | 0) !== first || (last | 0) !== last) && this.first instanceof Int32Array) this.widen()
    // Interned before the merge test, so label order is first appearance among every entry that normalized.
    let label = 0
    if (labelText !== undefined && labelText !== '') {
      let i = this.labelIndex.get(labelText)
      if (i === undefined) {
        i = this.labels.length
        this.labels.push(detached(labelText))
        this.labelIndex.set(labelText, i)
      }
      label = i + 1
    }
    const mask = this.slots.length - 1
    let slot = h1 & mask
    for (;;) {
      const held = this.slots[slot] as number
      if (held === 0) break
      const e = held - 1
      if (this.keys[e * 2] === h1 && this.keys[e * 2 + 1] === h2) {
        if (first !== 0 && (this.first[e] === 0 || first < (this.first[e] as number))) this.first[e] = first
        if (last > (this.last[e] as number)) this.last[e] = last
        if (this.label[e] === 0) this.label[e] = label
        return
      }
      slot = (slot + 1) & mask
    }
    if (this.n === this.cap) {
      this.grow()
      slot = h1 & (this.slots.length - 1)
      while (this.slots[slot] !== 0) slot = (slot + 1) & (this.slots.length - 1)
    }
    const e = this.n++
    this.keys[e * 2] = h1
    this.keys[e * 2 + 1] = h2
    this.first[e] = first
    this.last[e] = last
    this.label[e] = label
    this.slots[slot] = e + 1
  }

  private widen (): void {
    this.first = Float64Array.from(this.first)
    this.last = Float64Array.from(this.last)
  }

  private grow (): void {
    this.cap *= 2
    const Days = this.first instanceof Int32Array ? Int32Array : Float64Array
    const keys = new Uint32Array(this.cap * 2); keys.set(this.keys); this.keys = keys
    const first = new Days(this.cap); first.set(this.first); this.first = first
    const last = new Days(this.cap); last.set(this.last); this.last = last
    const label = new Uint32Array(this.cap); label.set(this.label); this.label = label
    this.slots = new Uint32Array(slotsFor(this.cap))
    const mask = this.slots.length - 1
    for (let e = 0; e < this.n; e++) {
      let slot = (this.keys[e * 2] as number) & mask
      while (this.slots[slot] !== 0) slot = (slot + 1) & mask
      this.slots[slot] = e + 1
    }
  }

  /** The finished part; `loader` is what the loader itself reported (its rejected lines come first in the samples). */
  finish (loader: { rejected: RejectedLine[], lines: number }): SourcePart {
    const n = this.n
    // Arrays sized from the line count are usually near full: keep them (no copy) unless a quarter would be wasted.
    const fit = <T extends Uint32Array>(a: T, width: number): T => (n * 4 >= this.cap * 3 ? a.subarray(0, n * width) : a.slice(0, n * width)) as T
    // Seen days become uint32 as the snapshot stores them: an int32's bits are its ToUint32 (what Uint32Array.from
    // gives), so int32 arrays are reinterpreted in place; widened ones are converted.
    const days = (a: Int32Array | Float64Array): Uint32Array => a instanceof Int32Array ? fit(new Uint32Array(a.buffer, 0, a.length), 1) : Uint32Array.from(a.subarray(0, n))
    const part: SourcePart = {
      lines: loader.lines,
      rejected: loader.rejected.length + this.normRejected,
      rejectedSamples: [...loader.rejected.slice(0, kMaxRejectedSamples), ...this.normSamples].slice(0, kMaxRejectedSamples)
        .map((r) => ({ line: r.line, reason: detached(r.reason) })),
      labels: this.labels,
      v4Prefixes: [...this.v4].sort((a, b) => a - b),
      v6Prefixes: [...this.v6].sort((a, b) => a - b),
      count: n,
      keys: fit(this.keys, 2),
      first: days(this.first),
      last: days(this.last),
      label: fit(this.label, 1),
      net4: this.net4
    }
    // Drop the working arrays now: the caller may build the next part before this builder is collected.
    this.keys = this.label = new Uint32Array(0)
    this.first = this.last = new Int32Array(0)
    this.slots = new Uint32Array(0)
    return part
  }
}

/** What a part file's header holds besides its sections: the part's counts and facts, and the file format. */
type PartHeader = { format: number } & Pick<SourcePart, 'lines' | 'rejected' | 'rejectedSamples' | 'labels' | 'v4Prefixes' | 'v6Prefixes' | 'count'>

/** Writes a part file atomically. */
export async function writePartFile (path: string, part: SourcePart): Promise<void> {
  const { keys, first, last, label, net4, ...facts } = part
  const header: PartHeader = { format: kPartFormat, ...facts }
  await writeSectionFile(path, kPartMagic, header, { keys, first, last, label, ...(net4 === null ? {} : { net4 }) })
}

function isIntegerList (value: unknown): value is number[] {
  return Array.isArray(value) && value.every((v) => Number.isSafeInteger(v))
}

/** Reads a part file back; throws when it is of another format, truncated or inconsistent. */
export async function readPartFile (path: string): Promise<SourcePart> {
  const { header: h, sections } = await readSectionFile<PartHeader>(path, kPartMagic)
  const { keys, first, last, label, net4 } = sections
  const n = h.count
  if (h.format !== kPartFormat || !Number.isSafeInteger(n) || !Number.isSafeInteger(h.lines) || !Number.isSafeInteger(h.rejected) ||
    !Array.isArray(h.labels) || !h.labels.every((l) => typeof l === 'string') || !Array.isArray(h.rejectedSamples) ||
    !isIntegerList(h.v4Prefixes) || !isIntegerList(h.v6Prefixes) ||
    !(keys instanceof Uint32Array) || keys.length !== n * 2 || !(first instanceof Uint32Array) || first.length !== n ||
    !(last instanceof Uint32Array) || last.length !== n || !(label instanceof Uint32Array) || label.length !== n ||
    (net4 !== undefined && !(net4 instanceof Uint8Array && net4.length === kNet4Bytes))) {
    throw new Error('part file of another format or inconsistent')
  }
  for (let i = 0; i < n; i++) if ((label[i] as number) > h.labels.length) throw new Error('part file label out of range')
  return {
    lines: h.lines,
    rejected: h.rejected,
    rejectedSamples: h.rejectedSamples,
    labels: h.labels,
    v4Prefixes: h.v4Prefixes,
    v6Prefixes: h.v6Prefixes,
    count: n,
    keys,
    first,
    last,
    label,
    net4: net4 ?? null
  }
}
