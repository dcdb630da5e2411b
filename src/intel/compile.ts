/**
 * Compiles built-in reference data and operator feeds into one immutable snapshot:
 * flat typed arrays in a single SharedArrayBuffer plus a JSON header.
 */
import { createHash } from 'node:crypto'
import { normalize } from '../engine/normalize/index.ts'
import type { FeedSpec } from '../engine/types.ts'
import { readAsnData, readBuiltinSources, readCountryData, readLookalikeTargets, type RangeList } from './builtin.ts'
import { readFeed } from './manifest.ts'
import { HashTableBuilder } from '../engine/snapshot/hash-table.ts'
import { hashWords, KeyTag, type KeyPair } from '../engine/snapshot/hash.ts'
import { packSections } from '../engine/snapshot/layout.ts'
import type { SourceInput, SourceMeta } from '../engine/snapshot/source.ts'
import {
  kAsnInfoStride, kEntryStride, kNet4PresenceBytes, kSnapshotFormat, listingKey,
  type SnapshotData, type SnapshotHeader
} from '../engine/snapshot/format.ts'

export { kSnapshotFormat, type SnapshotData, type SnapshotHeader }

const kMaxRejectedSamples = 20
const kDayMs = 86_400_000

/** What to compile. */
export interface CompileOptions {
  feeds: FeedSpec[]
  /** Folder with asn-ipv4-num.csv / asn-ipv6-num.csv (default: the @ip-location-db/asn package). */
  asnDir?: string
  /** Folder with geo-whois-asn-country-ipv{4,6}-num.csv (default: the @ip-location-db/geo-whois-asn-country package). */
  countryDir?: string
  /** Compile time (default: now). */
  now?: Date
  /** Digest of the inputs, when the caller already computed it (the disk cache does). */
  inputKey?: string
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

/** Reads one operator feed into the compiler's source shape. */
export async function feedSource (spec: FeedSpec): Promise<SourceInput> {
  const parsed = await readFeed(spec)
  const { format: _format, path: _path, remote: _remote, ...traits } = spec
  return { ...traits, kind: 'feed', entries: parsed.entries, rejected: parsed.rejected, lines: parsed.lines }
}

/** Interns strings into one UTF-8 pool. */
class StringPool {
  readonly index = new Map<string, number>()
  readonly parts: Buffer[] = []
  readonly offsets: number[] = [0]
  bytes = 0

  add (s: string): number {
    let i = this.index.get(s)
    if (i === undefined) {
      const b = Buffer.from(s, 'utf8')
      i = this.parts.length
      this.parts.push(b)
      this.bytes += b.length
      this.offsets.push(this.bytes)
      this.index.set(s, i)
    }
    return i
  }
}

function rangeSections (prefix: string, list: RangeList, values16 = false): Record<string, Uint32Array | Uint16Array> {
  return {
    [`${prefix}.starts`]: list.starts,
    [`${prefix}.ends`]: list.ends,
    [`${prefix}.values`]: values16 ? Uint16Array.from(list.values) : list.values
  }
}

function toDay (ms: number | undefined): number {
  return ms === undefined || !Number.isFinite(ms) ? 0 : Math.floor(ms / kDayMs) + 1
}

/** Compiles the snapshot. Pure CPU work apart from reading the named files. */
export async function compileSnapshot (options: CompileOptions): Promise<SnapshotData> {
  const now = options.now ?? new Date()
  const [asn, country, builtin, feeds] = await Promise.all([
    readAsnData(options.asnDir),
    readCountryData(options.countryDir),
    readBuiltinSources(),
    Promise.all(options.feeds.map(feedSource))
  ])
  const sources = [...builtin, ...feeds]

  const strings = new StringPool()
  const entries: number[] = []
  const heads = new Map<string, { h1: number, h2: number, head: number }>()
  const v4Prefixes = new Set<number>()
  // Per prefix length, which /16s hold an IPv4 listing of that length: an address lookup hashes only where one may exist.
  const net4Presence = new Uint8Array(33 * kNet4PresenceBytes)
  const v6Prefixes = new Set<number>()
  const metas: SourceMeta[] = []
  const pair: KeyPair = { h1: 0, h2: 0 }

  sources.forEach((src, id) => {
    const rejectedSamples = src.rejected.slice(0, kMaxRejectedSamples)
    let rejected = src.rejected.length
    let indexed = 0
    for (const entry of src.entries) {
      const res = normalize(entry.value, entry.type ?? undefined)
      if (!res.ok) {
        rejected++
        if (rejectedSamples.length < kMaxRejectedSamples) rejectedSamples.push({ line: entry.line, reason: res.errors.join('; ') })
        continue
      }
      const ind = res.indicator
      if (ind.type === 'ip' || ind.type === 'ip_block') {
        const bits = ind.type === 'ip' ? (ind.ip?.version === 4 ? 32 : 128) : ind.prefix as number
        ;(ind.ip?.version === 4 ? v4Prefixes : v6Prefixes).add(bits)
        if (ind.ip?.version === 4) markNet4(net4Presence, ind.ip.words[0] as number, bits)
      }
      listingKey(ind, pair)
      const k = `${pair.h1},${pair.h2}`
      let slot = heads.get(k)
      // One listing per (indicator, source): repeated lines merge into the widest seen-window.
      let e = slot === undefined ? -1 : slot.head
      while (e !== -1 && entries[e * kEntryStride] !== id) e = (entries[e * kEntryStride + 4] as number) - 1
      const first = toDay(entry.firstSeen)
      const last = toDay(entry.lastSeen ?? entry.firstSeen)
      const label = entry.label === undefined || entry.label === '' ? 0 : strings.add(entry.label) + 1
      if (e !== -1) {
        const b = e * kEntryStride
        if (first !== 0 && (entries[b + 1] === 0 || first < (entries[b + 1] as number))) entries[b + 1] = first
        if (last > (entries[b + 2] as number)) entries[b + 2] = last
        if (entries[b + 3] === 0) entries[b + 3] = label
        continue
      }
      const index = entries.length / kEntryStride
      entries.push(id, first, last, label, slot === undefined ? 0 : slot.head + 1)
      if (slot === undefined) {
        slot = { h1: pair.h1, h2: pair.h2, head: index }
        heads.set(k, slot)
      } else {
        slot.head = index
      }
      indexed++
    }
    const { entries: _entries, rejected: _rejected, ...traits } = src
    metas.push({ ...traits, id, indexed, rejected, rejectedSamples })
  })

  // AS records share the listing table under their own tag.
  const asNumbers = new Set<number>([...asn.orgs.keys(), ...asn.v4Counts.keys(), ...asn.v6Counts.keys()])
  const table = new HashTableBuilder(heads.size + asNumbers.size)
  for (const slot of heads.values()) table.set(slot.h1, slot.h2, slot.head + 1)
  const asnInfo = new Uint32Array(asNumbers.size * kAsnInfoStride)
  let ai = 0
  for (const n of asNumbers) {
    const org = asn.orgs.get(n)
    asnInfo[ai * kAsnInfoStride] = org === undefined ? 0 : strings.add(org) + 1
    asnInfo[ai * kAsnInfoStride + 1] = asn.v4Counts.get(n) ?? 0
    asnInfo[ai * kAsnInfoStride + 2] = asn.v6Counts.get(n) ?? 0
    hashWords(KeyTag.asnInfo, n, 0, 0, 0, 0, pair)
    table.set(pair.h1, pair.h2, ++ai)
  }

  const { buffer, table: sections } = packSections({
    'table.keys': table.keys,
    'net4.presence': net4Presence,
    'table.vals': table.vals,
    entries: Uint32Array.from(entries),
    asnInfo,
    'strings.offsets': Uint32Array.from(strings.offsets),
    'strings.bytes': new Uint8Array(Buffer.concat(strings.parts)),
    ...rangeSections('asn4', asn.v4),
    ...rangeSections('asn6', asn.v6),
    ...rangeSections('cc4', country.v4, true),
    ...rangeSections('cc6', country.v6, true)
  })

  const inputKey = options.inputKey ?? 'uncached'
  const version = createHash('sha256').update(`${inputKey}|${now.toISOString()}`).digest('hex').slice(0, 16)
  return {
    header: {
      format: kSnapshotFormat,
      version,
      dataTimestamp: now.toISOString(),
      inputKey,
      sources: metas,
      v4Prefixes: [...v4Prefixes].sort((a, b) => b - a),
      v6Prefixes: [...v6Prefixes].sort((a, b) => b - a),
      sections,
      lookalike: readLookalikeTargets(),
      counts: {
        listings: entries.length / kEntryStride,
        keys: heads.size,
        asns: asNumbers.size,
        asnRangesV4: asn.v4.count,
        asnRangesV6: asn.v6.count,
        countryRangesV4: country.v4.count,
        countryRangesV6: country.v6.count,
        strings: strings.parts.length,
        bytes: buffer.byteLength
      }
    },
    buffer
  }
}
