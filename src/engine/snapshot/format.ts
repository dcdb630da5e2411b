/**
 * The snapshot's format: its header, the constants of its binary layout and the hash keys of listings. The
 * compiler (src/intel/compile.ts) writes this layout and the reader (snapshot.ts) maps it; both take it from here.
 */
import type { NormalizedIndicator } from '../types.ts'
import { hashString, hashWords, KeyTag, type KeyPair } from './hash.ts'
import type { SectionInfo } from './layout.ts'
import type { SourceMeta } from './source.ts'

/** Bumped whenever the binary layout changes, so old disk caches are never read. */
export const kSnapshotFormat = 2
/** uint32 words per listing entry: source id, first-seen day, last-seen day, label string + 1, next entry + 1. */
export const kEntryStride = 5
/** uint32 words per AS record: org string + 1, IPv4 range count, IPv6 range count. */
export const kAsnInfoStride = 3
/** Bytes of one IPv4 presence bitmap: one bit per /16. */
export const kNet4PresenceBytes = 8192

/** Everything a thread needs to map a snapshot. */
export interface SnapshotHeader {
  format: number
  /** Changes with every compile: part of every cache key. */
  version: string
  /** When this snapshot was compiled from its sources (ISO 8601); decay is measured to this instant. */
  dataTimestamp: string
  /** Digest of the inputs (package versions, feed specs and file contents). */
  inputKey: string
  sources: SourceMeta[]
  /** Prefix lengths that hold network listings, most specific first. */
  v4Prefixes: number[]
  v6Prefixes: number[]
  sections: Record<string, SectionInfo>
  /** Guarded domains for the lookalike signal, and the edit distance that counts as a lookalike. */
  lookalike: { targets: string[], tolerance: number }
  /**
   * Special-purpose AS number ranges (IANA), by first number: too wide to index as listings. Absent in snapshots
   * compiled before they existed.
   */
  specialAsns?: SpecialAsnRange[]
  counts: Record<string, number>
}

/** A special-purpose range of AS numbers and the built-in source whose signal it gives. */
export interface SpecialAsnRange {
  first: number
  last: number
  /** Name of the built-in special-purpose source (special-purpose, documentation-ranges, protocol-assignments). */
  source: string
  /** Short id, shown as a flag (`private`, `documentation`, `asTrans`, ...). */
  label: string
  /** The registry's name of the range. */
  name: string
}

/** A compiled snapshot: header plus the shared bytes. Both cross threads without copying the bytes. */
export interface SnapshotData {
  header: SnapshotHeader
  buffer: SharedArrayBuffer
}

/** Network key of an address or block: the masked words plus the prefix length. */
export function networkKey (ind: Pick<NormalizedIndicator, 'ip' | 'prefix'>, prefix: number, out: KeyPair): KeyPair {
  const ip = ind.ip as { version: 4 | 6, words: number[] }
  if (ip.version === 4) {
    const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0
    return hashWords(KeyTag.net4, ((ip.words[0] as number) & mask) >>> 0, 0, 0, 0, prefix, out)
  }
  const w = [0, 0, 0, 0]
  for (let i = 0; i < 4; i++) {
    const bits = Math.min(32, Math.max(0, prefix - i * 32))
    const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0
    w[i] = ((ip.words[i] as number) & mask) >>> 0
  }
  return hashWords(KeyTag.net6, w[0] as number, w[1] as number, w[2] as number, w[3] as number, prefix, out)
}

/** Hash key of a normalized indicator as listed (an address is its own /32 or /128 network). */
export function listingKey (ind: NormalizedIndicator, out: KeyPair): KeyPair {
  switch (ind.type) {
    case 'ip': return networkKey(ind, ind.ip?.version === 4 ? 32 : 128, out)
    case 'ip_block': return networkKey(ind, ind.prefix as number, out)
    case 'domain': return hashString(KeyTag.domain, ind.normalized, out)
    case 'file_hash_sha256': return hashString(KeyTag.sha256, ind.normalized, out)
    case 'asn': return hashWords(KeyTag.asn, ind.asn as number, 0, 0, 0, 0, out)
  }
}
