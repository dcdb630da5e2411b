/**
 * The address registries (IP -> AS, IP -> country) in the compact form the compiler copies into a snapshot, and
 * their part files (section-file.ts container, magic IOCVREG1), so a rebuild does not re-read 60 MB of registry CSV
 * when only a feed changed.
 *
 * AS part sections: `v4.starts` `v4.ends` `v4.values` (one u32 each per IPv4 range), `v6.*` (four u32 per IPv6
 * address, one per value), `numbers` (u32, every AS number in the order the snapshot's AS records take),
 * `v4Counts` `v6Counts` (u32 per AS number); the header holds `orgs` (name or null per AS number) and the counts.
 * Country part: `v4.*` and `v6.*` the same way (values: two letters packed in 16 bits).
 */
import type { AsnData, RangeList } from './builtin.ts'
import { readSectionFile, writeSectionFile } from './section-file.ts'

/** Bumped whenever what a registry part holds changes. */
export const kRegistryPartFormat = 1
const kMagic = 'IOCVREG1'

/** The AS registry, ready to be copied into a snapshot. */
export interface AsnPart {
  v4: RangeList
  v6: RangeList
  /** Every AS number with a name or a range, in snapshot order (named ones first, as the registry lists them). */
  numbers: Uint32Array
  v4Counts: Uint32Array
  v6Counts: Uint32Array
  orgs: Array<string | null>
}

/** The country registry. */
export interface CountryPart {
  v4: RangeList
  v6: RangeList
}

/** The AS part of registry data as read (builtin.ts). */
export function asnPart (asn: AsnData): AsnPart {
  const set = new Set<number>([...asn.orgs.keys(), ...asn.v4Counts.keys(), ...asn.v6Counts.keys()])
  const numbers = Uint32Array.from(set)
  const v4Counts = new Uint32Array(set.size)
  const v6Counts = new Uint32Array(set.size)
  const orgs: Array<string | null> = []
  let i = 0
  for (const n of set) {
    v4Counts[i] = asn.v4Counts.get(n) ?? 0
    v6Counts[i] = asn.v6Counts.get(n) ?? 0
    orgs.push(asn.orgs.get(n) ?? null)
    i++
  }
  return { v4: asn.v4, v6: asn.v6, numbers, v4Counts, v6Counts, orgs }
}

function rangeSections (prefix: string, list: RangeList): Record<string, Uint32Array> {
  return { [`${prefix}.starts`]: list.starts, [`${prefix}.ends`]: list.ends, [`${prefix}.values`]: list.values }
}

function rangeList (sections: Record<string, Uint32Array | Uint16Array | Uint8Array>, prefix: string, count: unknown, width: number): RangeList {
  const starts = sections[`${prefix}.starts`]
  const ends = sections[`${prefix}.ends`]
  const values = sections[`${prefix}.values`]
  if (!Number.isSafeInteger(count) || !(starts instanceof Uint32Array) || !(ends instanceof Uint32Array) || !(values instanceof Uint32Array) ||
    values.length !== count || starts.length !== (count as number) * width || ends.length !== (count as number) * width) {
    throw new Error('registry part inconsistent')
  }
  return { starts, ends, values, count: count as number }
}

interface AsnHeader { format: number, kind: 'asn', v4: number, v6: number, orgs: Array<string | null> }
interface CountryHeader { format: number, kind: 'country', v4: number, v6: number }

/** Writes an AS part file atomically. */
export async function writeAsnPart (path: string, part: AsnPart): Promise<void> {
  const header: AsnHeader = { format: kRegistryPartFormat, kind: 'asn', v4: part.v4.count, v6: part.v6.count, orgs: part.orgs }
  await writeSectionFile(path, kMagic, header, {
    ...rangeSections('v4', part.v4), ...rangeSections('v6', part.v6), numbers: part.numbers, v4Counts: part.v4Counts, v6Counts: part.v6Counts
  })
}

/** Reads an AS part file; throws when it is of another format or inconsistent. */
export async function readAsnPart (path: string): Promise<AsnPart> {
  const { header, sections } = await readSectionFile<AsnHeader>(path, kMagic)
  if (header.format !== kRegistryPartFormat || header.kind !== 'asn' || !Array.isArray(header.orgs)) throw new Error('registry part of another format')
  const { numbers, v4Counts, v6Counts } = sections
  const n = header.orgs.length
  if (!(numbers instanceof Uint32Array) || !(v4Counts instanceof Uint32Array) || !(v6Counts instanceof Uint32Array) ||
    numbers.length !== n || v4Counts.length !== n || v6Counts.length !== n || !header.orgs.every((o) => o === null || typeof o === 'string')) {
    throw new Error('registry part inconsistent')
  }
  return { v4: rangeList(sections, 'v4', header.v4, 1), v6: rangeList(sections, 'v6', header.v6, 4), numbers, v4Counts, v6Counts, orgs: header.orgs }
}

/** Writes a country part file atomically. */
export async function writeCountryPart (path: string, part: CountryPart): Promise<void> {
  const header: CountryHeader = { format: kRegistryPartFormat, kind: 'country', v4: part.v4.count, v6: part.v6.count }
  await writeSectionFile(path, kMagic, header, { ...rangeSections('v4', part.v4), ...rangeSections('v6', part.v6) })
}

/** Reads a country part file; throws when it is of another format or inconsistent. */
export async function readCountryPart (path: string): Promise<CountryPart> {
  const { header, sections } = await readSectionFile<CountryHeader>(path, kMagic)
  if (header.format !== kRegistryPartFormat || header.kind !== 'country') throw new Error('registry part of another format')
  return { v4: rangeList(sections, 'v4', header.v4, 1), v6: rangeList(sections, 'v6', header.v6, 4) }
}
