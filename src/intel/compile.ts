/**
 * Compiles built-in reference data and operator feeds into one immutable snapshot:
 * flat typed arrays in a single SharedArrayBuffer plus a JSON header.
 *
 * Two stages. Each source becomes a part (source-part.ts): its distinct listing keys with their seen-window and
 * label, folded in as the loader reads it; registries become registry parts. With a parts folder, parts are kept
 * on disk keyed by their inputs (part-cache.ts), so only sources whose bytes changed are read and parsed again.
 * Then the parts are merged straight into the snapshot's shared buffer: every section is laid out first and written
 * in place, the listing table is built inside the buffer, and nothing is packed from a copy. Peak memory is the
 * snapshot plus the parts (about 20 bytes per listing) plus the one feed being read.
 */
import { createHash } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import type { FeedSpec, RejectedLine } from '../engine/types.ts'
import { builtinVersions, kBuiltinSources, loadBuiltinData, readAsnData, readCountryData, readLookalikeTargets, readSpecialAsns, referenceDigest, type BuiltinData, type RangeList } from './builtin.ts'
import { parseFeed } from './feeds/index.ts'
import { HashTableBuilder, tableCapacity } from '../engine/snapshot/hash-table.ts'
import { hashWords, KeyTag, type KeyPair } from '../engine/snapshot/hash.ts'
import { allocateSections, view, type SectionSpec } from '../engine/snapshot/layout.ts'
import type { SourceMeta, SourceTraits } from '../engine/snapshot/source.ts'
import {
  kAsnInfoStride, kEntryStride, kNet4PresenceBytes, kSnapshotFormat,
  type SnapshotData, type SnapshotHeader
} from '../engine/snapshot/format.ts'
import { collectGarbage } from './gc-hint.ts'
import { compilerDigest, fileDigest, folderDigest, PartCache, partFile } from './part-cache.ts'
import { asnPart, kRegistryPartFormat, readAsnPart, readCountryPart, writeAsnPart, writeCountryPart, type AsnPart, type CountryPart } from './registry-part.ts'
import { kPartFormat, PartBuilder, readPartFile, writePartFile, type SourcePart } from './source-part.ts'

export { kSnapshotFormat, type SnapshotData, type SnapshotHeader }

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
  /** Folder of per-source part files (default: none: every source is parsed and no part is kept). */
  partsDir?: string | null
  /** SHA-256 of each feed file as the caller read it for `inputKey`, by feed name ('absent': not fetched yet). */
  digests?: ReadonlyMap<string, string>
  /** Parse every source again even when its part is cached (the parts are rewritten). */
  force?: boolean
}

/** How one source got into the snapshot. */
export interface SourceBuild {
  name: string
  kind: 'builtin' | 'feed' | 'registry'
  /** true: read and parsed in this build; false: its part was reused from the parts folder. */
  parsed: boolean
  /** Time to read and parse it (0 when reused), and to load its part. */
  ms: number
}

/** What a compile did, beside the snapshot. */
export interface BuildReport {
  sources: SourceBuild[]
  parsed: number
  reused: number
  /**
   * false when a feed file changed between the caller's digest and the read (a fetched feed swapped in mid-build):
   * the snapshot is then good but must not be cached under the caller's key.
   */
  consistent: boolean
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

/** One source as the merge takes it: the header's fields and its part. */
interface PartInput { traits: SourceTraits, part: SourcePart }

/** The header fields of a feed (the manifest's, without file and fetch settings). */
function feedTraits (spec: FeedSpec): SourceTraits {
  const { format: _format, path: _path, remote: _remote, ...traits } = spec
  return { ...traits, kind: 'feed' }
}

/** Guess at a text's entry count: its line count (arrays grow when a JSON feed holds more). */
function lineCount (text: string): number {
  let n = 1
  for (let at = text.indexOf('\n'); at !== -1; at = text.indexOf('\n', at + 1)) n++
  return n
}

/** Parses feed text into its part. */
function parseFeedPart (spec: FeedSpec, text: string): SourcePart {
  const builder = new PartBuilder(lineCount(text))
  const parsed = parseFeed(spec.format, text, builder.sink)
  // A loader that ignores the sink returns its entries instead.
  for (const e of parsed.entries) builder.addEntry(e)
  return builder.finish(parsed)
}

const kEmptyLoader = { rejected: [] as RejectedLine[], lines: 0 }
/** Dead bytes (read buffers, texts) after which a stage boundary runs a full collection. */
const kCollectBytes = 16 * 1024 * 1024

/** Everything a compile needs before the merge, with the report of how each source was obtained. */
class Collector {
  readonly report: BuildReport = { sources: [], parsed: 0, reused: 0, consistent: true }
  private readonly cache: PartCache | null
  private readonly force: boolean
  private code: string | null = null
  /** Bytes read and parsed since the last collection (texts and read buffers now dead), and in all. */
  private garbage = 0
  private collected = 0

  constructor (partsDir: string | null, force: boolean) {
    this.cache = partsDir === null ? null : new PartCache(partsDir)
    this.force = force
  }

  private async codeKey (): Promise<string> {
    this.code ??= await compilerDigest()
    return this.code
  }

  private note (name: string, kind: SourceBuild['kind'], parsed: boolean, t0: number): void {
    this.report.sources.push({ name, kind, parsed, ms: Math.round(performance.now() - t0) })
    if (parsed) this.report.parsed++
    else this.report.reused++
  }

  /** A part from the cache, or built and stored. */
  private async obtain<T> (
    kind: SourceBuild['kind'], name: string, key: string[] | null, read: (p: string) => Promise<T>, write: (p: string, v: T) => Promise<void>, build: () => Promise<T>
  ): Promise<T> {
    const t0 = performance.now()
    const file = this.cache === null || key === null ? null : partFile(kind, name, [String(kPartFormat), String(kRegistryPartFormat), await this.codeKey(), ...key])
    if (file !== null && !this.force) {
      const hit = await this.cache?.get(file, read)
      if (hit !== null && hit !== undefined) {
        this.note(name, kind, false, t0)
        return hit
      }
    }
    const value = await build()
    // Registry CSVs and the built-in lists' packages are tens of MB once read.
    if (kind !== 'feed') this.garbage += kCollectBytes
    this.note(name, kind, true, t0)
    if (file !== null) await this.cache?.put(file, async (p) => { await write(p, value) })
    return value
  }

  async asn (dir: string | undefined): Promise<AsnPart> {
    const key = ['asn', dir === undefined ? JSON.stringify(builtinVersions()) : await folderDigest(dir)]
    return await this.obtain('registry', 'asn', key, readAsnPart, writeAsnPart, async () => asnPart(await readAsnData(dir)))
  }

  async country (dir: string | undefined): Promise<CountryPart> {
    const key = ['country', dir === undefined ? JSON.stringify(builtinVersions()) : await folderDigest(dir)]
    return await this.obtain('registry', 'country', key, readCountryPart, writeCountryPart, async () => await readCountryData(dir))
  }

  /**
   * The built-in lists, each its own part, keyed by the package versions and reference files they come from. Their
   * packages are read only when a part is missing.
   */
  async builtins (): Promise<PartInput[]> {
    const base = ['builtin', JSON.stringify(builtinVersions()), await referenceDigest()]
    let data: Promise<BuiltinData> | null = null
    const out: PartInput[] = []
    for (const { traits, entries } of kBuiltinSources) {
      const part = await this.obtain('builtin', traits.name, [...base, traits.name], readPartFile, writePartFile, async () => {
        data ??= loadBuiltinData()
        const list = entries(await data)
        const builder = new PartBuilder(list.length)
        for (const e of list) builder.addEntry(e)
        return builder.finish({ rejected: [], lines: list.length })
      })
      out.push({ traits, part })
    }
    return out
  }

  /** One operator feed: its part by content digest, or its file read and parsed. */
  async feed (spec: FeedSpec, digests: ReadonlyMap<string, string> | undefined): Promise<PartInput> {
    const traits = feedTraits(spec)
    const known = digests?.get(spec.name) ?? (this.cache === null ? null : await fileDigest(spec.path, spec.remote !== undefined))
    const key = known === null ? null : ['feed', spec.format, known]
    const part = await this.obtain('feed', spec.name, key, readPartFile, writePartFile, async () => {
      let bytes: Buffer
      try {
        bytes = await readFile(spec.path)
      } catch (err) {
        // A fetched feed not yet downloaded contributes nothing until its first good copy arrives.
        if (spec.remote !== undefined && (err as NodeJS.ErrnoException).code === 'ENOENT') {
          if (known !== null && known !== 'absent') this.report.consistent = false
          return new PartBuilder(16).finish(kEmptyLoader)
        }
        throw new Error(`feed "${spec.name}": cannot read ${spec.path}: ${(err as Error).message}`, { cause: err })
      }
      if (known !== null && createHash('sha256').update(bytes).digest('hex') !== known) this.report.consistent = false
      this.garbage += bytes.length * 2
      const text = bytes.toString('utf8')
      // The bytes are not needed once decoded; the text is dropped when the part is done.
      bytes = Buffer.alloc(0)
      return parseFeedPart(spec, text)
    })
    return { traits, part }
  }

  /** Frees what the sources parsed since the last call left behind (texts, read buffers), before the next stage. */
  collect (again = false): void {
    // Small feeds leave little behind: a full collection (tens of ms on a large heap) pays only after big reads.
    if (this.garbage >= kCollectBytes || (again && this.collected > 0)) {
      collectGarbage()
      this.collected += this.garbage
      this.garbage = 0
    }
  }

  async prune (): Promise<void> {
    await this.cache?.prune()
  }
}

/** Copies a range list's arrays into the snapshot's sections named `<prefix>.starts|ends|values`. */
function rangeSpecs (prefix: string, list: RangeList, values16 = false): SectionSpec[] {
  return [
    { name: `${prefix}.starts`, kind: 'u32', length: list.starts.length },
    { name: `${prefix}.ends`, kind: 'u32', length: list.ends.length },
    { name: `${prefix}.values`, kind: values16 ? 'u16' : 'u32', length: list.values.length }
  ]
}

/** The snapshot's sections, in the order of format version 2's layout, for a listing table of `cap` slots. */
function sectionSpecs (cap: number, listings: number, asns: number, strings: StringPool, asn: AsnPart, country: CountryPart): SectionSpec[] {
  return [
    { name: 'table.keys', kind: 'u32', length: cap * 2 },
    { name: 'net4.presence', kind: 'u8', length: 33 * kNet4PresenceBytes },
    { name: 'table.vals', kind: 'u32', length: cap },
    { name: 'entries', kind: 'u32', length: listings * kEntryStride },
    { name: 'asnInfo', kind: 'u32', length: asns * kAsnInfoStride },
    { name: 'strings.offsets', kind: 'u32', length: strings.offsets.length },
    { name: 'strings.bytes', kind: 'u8', length: strings.bytes },
    ...rangeSpecs('asn4', asn.v4),
    ...rangeSpecs('asn6', asn.v6),
    ...rangeSpecs('cc4', country.v4, true),
    ...rangeSpecs('cc6', country.v6, true)
  ]
}

/** Inserts every AS record's key (after every listing key, as the layout's probe order expects). */
function insertAsnKeys (table: HashTableBuilder, asn: AsnPart, pair: KeyPair): void {
  for (let i = 0; i < asn.numbers.length; i++) {
    hashWords(KeyTag.asnInfo, asn.numbers[i] as number, 0, 0, 0, 0, pair)
    table.set(pair.h1, pair.h2, i + 1)
  }
}

/**
 * Writes one part's listings from entry `g` on and links each into its key's chain; returns the next entry index.
 * A function of its own, with everything in locals: the hot loop of a merge (millions of entries) stays tight.
 */
function fillEntries (entries: Uint32Array, table: HashTableBuilder, part: SourcePart, labels: Uint32Array, id: number, g: number): number {
  const { keys, first, last, label, count } = part
  let b = g * kEntryStride
  for (let j = 0; j < count; j++, b += kEntryStride) {
    entries[b] = id
    entries[b + 1] = first[j] as number
    entries[b + 2] = last[j] as number
    entries[b + 3] = labels[label[j] as number] as number
    // The previous listing of the same key (an earlier source) becomes this one's next: each key heads a chain.
    entries[b + 4] = table.swap(keys[j * 2] as number, keys[j * 2 + 1] as number, g + j + 1)
  }
  return g + count
}

/** Merges parts and registries into the snapshot's buffer. */
function merge (inputs: PartInput[], asn: AsnPart, country: CountryPart): { buffer: SharedArrayBuffer, sections: SnapshotHeader['sections'], metas: SourceMeta[], v4: Set<number>, v6: Set<number>, strings: StringPool, keys: number, listings: number } {
  const strings = new StringPool()
  // Labels map to pool strings source by source: the pool's order is first appearance across every source.
  const labelMaps = inputs.map(({ part }) => {
    const map = new Uint32Array(part.labels.length + 1)
    part.labels.forEach((l, i) => { map[i + 1] = strings.add(l) + 1 })
    return map
  })
  const asnOrgs = asn.orgs.map((org) => org === null ? 0 : strings.add(org) + 1)
  const listings = inputs.reduce((n, { part }) => n + part.count, 0)
  const asns = asn.numbers.length
  // Sized for every listing key being distinct; if keys shared between sources make the exact table smaller, it is
  // rebuilt below (the layout depends on the distinct count, which is known only after the merge).
  let cap = tableCapacity(listings + asns)
  let { buffer, table: sections } = allocateSections(sectionSpecs(cap, listings, asns, strings, asn, country))
  const u32 = (name: string): Uint32Array => view(buffer, sections, name, 'u32')
  let table = new HashTableBuilder(listings + asns, { keys: u32('table.keys'), vals: u32('table.vals') })
  const entries = u32('entries')
  const presence = view(buffer, sections, 'net4.presence', 'u8')
  const metas: SourceMeta[] = []
  const v4 = new Set<number>()
  const v6 = new Set<number>()
  let g = 0
  for (let id = 0; id < inputs.length; id++) {
    const { traits, part } = inputs[id] as PartInput
    g = fillEntries(entries, table, part, labelMaps[id] as Uint32Array, id, g)
    if (part.net4 !== null) for (let i = 0; i < presence.length; i++) presence[i] = (presence[i] as number) | (part.net4[i] as number)
    for (const p of part.v4Prefixes) v4.add(p)
    for (const p of part.v6Prefixes) v6.add(p)
    metas.push({ ...traits, lines: part.lines, id, indexed: part.count, rejected: part.rejected, rejectedSamples: part.rejectedSamples })
  }
  const distinct = table.size
  const pair: KeyPair = { h1: 0, h2: 0 }
  const exact = tableCapacity(distinct + asns)
  if (exact !== cap) {
    // Many keys listed by several sources: lay out again with the exact table and copy every other section over.
    const old = { buffer, sections, table }
    cap = exact
    ;({ buffer, table: sections } = allocateSections(sectionSpecs(cap, listings, asns, strings, asn, country)))
    const bytes = new Uint8Array(buffer)
    const oldBytes = new Uint8Array(old.buffer)
    for (const [name, info] of Object.entries(sections)) {
      if (name === 'table.keys' || name === 'table.vals') continue
      const from = old.sections[name]
      if (from === undefined) continue
      const size = info.length * (info.kind === 'u32' ? 4 : info.kind === 'u16' ? 2 : 1)
      bytes.set(oldBytes.subarray(from.offset, from.offset + size), info.offset)
    }
    table = new HashTableBuilder(distinct + asns, { keys: u32('table.keys'), vals: u32('table.vals') })
    // Same insertion order (first appearance), final values (each key's last listing).
    for (const { part } of inputs) {
      for (let j = 0; j < part.count; j++) {
        const h1 = part.keys[j * 2] as number
        const h2 = part.keys[j * 2 + 1] as number
        if (table.get(h1, h2) === 0) table.set(h1, h2, old.table.get(h1, h2))
      }
    }
  }
  insertAsnKeys(table, asn, pair)

  const asnInfo = u32('asnInfo')
  for (let i = 0; i < asns; i++) {
    asnInfo[i * kAsnInfoStride] = asnOrgs[i] as number
    asnInfo[i * kAsnInfoStride + 1] = asn.v4Counts[i] as number
    asnInfo[i * kAsnInfoStride + 2] = asn.v6Counts[i] as number
  }
  u32('strings.offsets').set(strings.offsets)
  const stringBytes = view(buffer, sections, 'strings.bytes', 'u8')
  let at = 0
  for (const b of strings.parts) {
    stringBytes.set(b, at)
    at += b.length
  }
  for (const [prefix, list, values16] of [['asn4', asn.v4, false], ['asn6', asn.v6, false], ['cc4', country.v4, true], ['cc6', country.v6, true]] as const) {
    u32(`${prefix}.starts`).set(list.starts)
    u32(`${prefix}.ends`).set(list.ends)
    if (values16) view(buffer, sections, `${prefix}.values`, 'u16').set(list.values)
    else u32(`${prefix}.values`).set(list.values)
  }
  return { buffer, sections, metas, v4, v6, strings, keys: distinct, listings }
}

/** Compiles the snapshot and reports how each source was obtained. Pure CPU work apart from reading and caching parts. */
export async function compile (options: CompileOptions): Promise<{ data: SnapshotData, report: BuildReport }> {
  const now = options.now ?? new Date()
  const collector = new Collector(options.partsDir ?? null, options.force === true)
  // One source at a time: only one feed's text is in memory at once.
  const asn = await collector.asn(options.asnDir)
  const country = await collector.country(options.countryDir)
  const inputs = await collector.builtins()
  collector.collect()
  for (const spec of options.feeds) {
    inputs.push(await collector.feed(spec, options.digests))
    collector.collect()
  }
  // A read buffer can outlive the collection right after its feed (the read's promise still held it): once more.
  collector.collect(true)
  const merged = merge(inputs, asn, country)
  await collector.prune()

  const inputKey = options.inputKey ?? 'uncached'
  const version = createHash('sha256').update(`${inputKey}|${now.toISOString()}`).digest('hex').slice(0, 16)
  const data: SnapshotData = {
    header: {
      format: kSnapshotFormat,
      version,
      dataTimestamp: now.toISOString(),
      inputKey,
      sources: merged.metas,
      v4Prefixes: [...merged.v4].sort((a, b) => b - a),
      v6Prefixes: [...merged.v6].sort((a, b) => b - a),
      sections: merged.sections,
      lookalike: readLookalikeTargets(),
      specialAsns: await readSpecialAsns(),
      counts: {
        listings: merged.listings,
        keys: merged.keys,
        asns: asn.numbers.length,
        asnRangesV4: asn.v4.count,
        asnRangesV6: asn.v6.count,
        countryRangesV4: country.v4.count,
        countryRangesV6: country.v6.count,
        strings: merged.strings.parts.length,
        bytes: merged.buffer.byteLength
      }
    },
    buffer: merged.buffer
  }
  return { data, report: collector.report }
}

/** Compiles the snapshot (compile() without its report). */
export async function compileSnapshot (options: CompileOptions): Promise<SnapshotData> {
  return (await compile(options)).data
}
