/**
 * Built-in reference data, read from npm packages and data/reference at compile time (never on the scoring path).
 * Each reader returns plain arrays; compile.ts packs them into the shared snapshot.
 */
import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { FeedEntry, IndicatorType } from '../engine/types.ts'
import type { SourceInput, SourceTraits } from '../engine/snapshot/source.ts'

const kRequire = createRequire(import.meta.url)
/** The project's data/reference folder. */
export const kReferenceDir = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'data', 'reference')

/** Folder of an installed package. */
export function packageDir (name: string): string {
  return dirname(kRequire.resolve(`${name}/package.json`))
}

/** Versions of every package the built-in data comes from: part of the snapshot cache key. */
export function builtinVersions (): Record<string, string> {
  // The readers' own revision: bumped when they read the same packages differently (a cached snapshot is then stale).
  const out: Record<string, string> = { 'builtin-readers': '2' }
  for (const name of kBuiltinPackages) {
    out[name] = (kRequire(`${name}/package.json`) as { version: string }).version
  }
  return out
}

const kBuiltinPackages = [
  '@ip-location-db/asn', '@ip-location-db/geo-whois-asn-country', 'eth-phishing-detect', 'disposable-email-domains',
  'cloudflare-ip', 'ipaddr.js', 'tldts'
]

/** Non-overlapping address ranges with one uint32 value each, sorted by start. */
export interface RangeList {
  /** IPv4: one word per range; IPv6: four words per range. */
  starts: Uint32Array
  ends: Uint32Array
  values: Uint32Array
  count: number
}

/** AS registry data: ranges and per-AS names. */
export interface AsnData {
  v4: RangeList
  v6: RangeList
  orgs: Map<number, string>
  v4Counts: Map<number, number>
  v6Counts: Map<number, number>
}

function parseV6Decimal (s: string, out: Uint32Array, at: number): void {
  let n = BigInt(s)
  for (let i = 3; i >= 0; i--) {
    out[at + i] = Number(n & 0xffffffffn)
    n >>= 32n
  }
}

/** Unquotes one CSV field ("a, ""b""" -> a, "b"). */
function unquote (s: string): string {
  if (s.length >= 2 && s.charCodeAt(0) === 34 && s.charCodeAt(s.length - 1) === 34) return s.slice(1, -1).replaceAll('""', '"')
  return s
}

/** Number(s) of a field of digits read straight from the bytes; other text goes through Number() as a string. */
function decimalField (buf: Buffer, from: number, to: number): number {
  if (to > from && to - from <= 15) {
    let n = 0
    for (let i = from; i < to; i++) {
      const d = (buf[i] as number) - 48
      if (d < 0 || d > 9) return Number(buf.toString('latin1', from, to))
      n = n * 10 + d
    }
    return n
  }
  return Number(buf.toString('latin1', from, to))
}

/**
 * Reads `<prefix>-ipv4-num.csv` and `<prefix>-ipv6-num.csv` (start,end,value[,rest]) from a folder. `value` gets the
 * third field and the rest of the line as latin1 text (the bytes as they are: a caller decodes UTF-8 itself).
 * Works on the file's bytes: digits are read in place and only the short fields become strings, so a 20 MB registry
 * never becomes a 20 MB string plus a string per field.
 * @see https://github.com/sapics/ip-location-db#csv-format
 */
async function readRangeCsv (dir: string, prefix: string, v6: boolean, value: (field: string, rest: string) => number): Promise<RangeList> {
  const buf = await readFile(join(dir, `${prefix}-${v6 ? 'ipv6' : 'ipv4'}-num.csv`))
  const width = v6 ? 4 : 1
  let lines = 1
  for (let at = buf.indexOf(10); at !== -1; at = buf.indexOf(10, at + 1)) lines++
  const starts = new Uint32Array(lines * width)
  const ends = new Uint32Array(lines * width)
  const values = new Uint32Array(lines)
  let count = 0
  let pos = 0
  const len = buf.length
  while (pos < len) {
    let eol = buf.indexOf(10, pos)
    if (eol === -1) eol = len
    const c1 = buf.indexOf(44, pos)
    const c2 = c1 === -1 ? -1 : buf.indexOf(44, c1 + 1)
    if (c2 !== -1 && c2 < eol) {
      let c3 = buf.indexOf(44, c2 + 1)
      if (c3 === -1 || c3 > eol) c3 = eol
      if (v6) {
        parseV6Decimal(buf.toString('latin1', pos, c1), starts, count * 4)
        parseV6Decimal(buf.toString('latin1', c1 + 1, c2), ends, count * 4)
      } else {
        starts[count] = decimalField(buf, pos, c1)
        ends[count] = decimalField(buf, c1 + 1, c2)
      }
      let restEnd = eol
      if (c3 < eol && buf[restEnd - 1] === 13) restEnd--
      values[count] = value(buf.toString('latin1', c2 + 1, c3), c3 < eol ? buf.toString('latin1', c3 + 1, restEnd) : '')
      count++
    }
    pos = eol + 1
  }
  return { starts: starts.subarray(0, count * width), ends: ends.subarray(0, count * width), values: values.subarray(0, count), count }
}

/** Reads the IP -> AS number registry (default: the @ip-location-db/asn package). */
export async function readAsnData (dir = packageDir('@ip-location-db/asn')): Promise<AsnData> {
  const orgs = new Map<number, string>()
  const v4Counts = new Map<number, number>()
  const v6Counts = new Map<number, number>()
  const collect = (counts: Map<number, number>) => (field: string, rest: string): number => {
    const asn = Number(field)
    counts.set(asn, (counts.get(asn) ?? 0) + 1)
    if (!orgs.has(asn) && rest !== '') orgs.set(asn, Buffer.from(unquote(rest), 'latin1').toString('utf8'))
    return asn
  }
  const v4 = await readRangeCsv(dir, 'asn', false, collect(v4Counts))
  const v6 = await readRangeCsv(dir, 'asn', true, collect(v6Counts))
  return { v4, v6, orgs, v4Counts, v6Counts }
}

/** Two-letter country code packed in 16 bits. */
export function packCountry (cc: string): number {
  return cc.length === 2 ? (cc.charCodeAt(0) << 8) | cc.charCodeAt(1) : 0
}

/** Reads the IP -> country registry (default: the @ip-location-db/geo-whois-asn-country package). */
export async function readCountryData (dir = packageDir('@ip-location-db/geo-whois-asn-country')): Promise<{ v4: RangeList, v6: RangeList }> {
  const value = (field: string): number => packCountry(field.trim())
  return {
    v4: await readRangeCsv(dir, 'geo-whois-asn-country', false, value),
    v6: await readRangeCsv(dir, 'geo-whois-asn-country', true, value)
  }
}

function entriesOf (type: IndicatorType | null, values: Iterable<string>, label?: string): FeedEntry[] {
  const out: FeedEntry[] = []
  let line = 0
  for (const value of values) {
    line++
    out.push(label === undefined ? { type, value, line } : { type, value, line, label })
  }
  return out
}

/** IANA special-purpose ranges (via ipaddr.js), split by how much they say about a threat. */
const kNonRoutable = new Set(['unspecified', 'broadcast', 'multicast', 'linkLocal', 'loopback', 'carrierGradeNat', 'private',
  'uniqueLocal', 'deprecatedSiteLocal', 'discard', 'benchmarking', 'reservedFutureUse'])
const kDocumentation = new Set(['192.0.2.0/24', '198.51.100.0/24', '203.0.113.0/24', '2001:db8::/32', '3fff::/20'])
/**
 * Ranges ipaddr.js files under its catch-all `reserved` name that the IANA IPv4 special-purpose registry marks as
 * not globally reachable, with the registry's name for each.
 * @see https://www.iana.org/assignments/iana-ipv4-special-registry/
 */
const kReservedNonRoutable: Record<string, string> = {
  '198.18.0.0/15': 'benchmarking',
  '240.0.0.0/4': 'reservedFutureUse'
}

interface IpaddrRange { toString: () => string }
type SpecialRanges = Record<string, [IpaddrRange, number] | Array<[IpaddrRange, number]>>

function specialRanges (): Array<{ cidr: string, name: string }> {
  const ipaddr = kRequire('ipaddr.js') as { IPv4: { prototype: { SpecialRanges: SpecialRanges } }, IPv6: { prototype: { SpecialRanges: SpecialRanges } } }
  const out: Array<{ cidr: string, name: string }> = []
  for (const table of [ipaddr.IPv4.prototype.SpecialRanges, ipaddr.IPv6.prototype.SpecialRanges]) {
    for (const [name, spec] of Object.entries(table)) {
      // IPv4-mapped / translated forms normalize into IPv4 space: they would cover every IPv4 address.
      if (name === 'unicast' || name === 'ipv4Mapped' || name === 'rfc6145') continue
      const list = Array.isArray(spec[0]) ? spec as Array<[IpaddrRange, number]> : [spec as [IpaddrRange, number]]
      for (const [addr, bits] of list) {
        const cidr = `${addr.toString()}/${bits}`
        out.push({ cidr, name: kReservedNonRoutable[cidr] ?? name })
      }
    }
  }
  return out
}

/** What the built-in lists are made from, read from their packages and data files. */
export interface BuiltinData {
  phishing: { blacklist: string[], whitelist: string[] }
  disposable: string[]
  cloudflare: string[]
  infra: Record<'cdn' | 'cloud', Array<{ asn: number, org: string }>>
  resolvers: string[]
  special: Array<{ cidr: string, name: string }>
}

/** Reads every package and data file the built-in lists come from. */
export async function loadBuiltinData (): Promise<BuiltinData> {
  const resolvers = (await readFile(join(kReferenceDir, 'public-resolvers.txt'), 'utf8'))
    .split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'))
  return {
    phishing: kRequire('eth-phishing-detect/src/config.json') as BuiltinData['phishing'],
    disposable: kRequire('disposable-email-domains') as string[],
    cloudflare: kRequire('cloudflare-ip/ips.json') as string[],
    infra: JSON.parse(await readFile(join(kReferenceDir, 'infrastructure-asns.json'), 'utf8')) as BuiltinData['infra'],
    resolvers,
    special: specialRanges()
  }
}

/** A built-in list: what the snapshot header says about it, and its entries once its data is read. */
export interface BuiltinSource {
  traits: SourceTraits
  entries: (data: BuiltinData) => FeedEntry[]
}

/** One built-in list, in the same shape as an operator feed. */
function builtin (name: string, fields: Omit<SourceTraits, 'name' | 'kind' | 'halfLifeDays'>, entries: (data: BuiltinData) => FeedEntry[]): BuiltinSource {
  return { traits: { name, kind: 'builtin', halfLifeDays: 0, ...fields }, entries }
}

const labelled = (rows: Array<{ cidr: string, name: string }>): FeedEntry[] =>
  rows.map((r, i) => ({ type: 'ip_block', value: r.cidr, line: i + 1, label: r.name }))
const nonRoutable = (d: BuiltinData): Array<{ cidr: string, name: string }> => d.special.filter((r) => kNonRoutable.has(r.name) && !kDocumentation.has(r.cidr))
const documentation = (d: BuiltinData): Array<{ cidr: string, name: string }> => d.special.filter((r) => kDocumentation.has(r.cidr))
const protocol = (d: BuiltinData): Array<{ cidr: string, name: string }> => d.special.filter((r) => !kNonRoutable.has(r.name) && !kDocumentation.has(r.cidr))

/** Every built-in signal source, in snapshot order. The list is fixed by the code: no package is read to know it. */
export const kBuiltinSources: readonly BuiltinSource[] = [
  builtin('eth-phishing-detect', { direction: 'malicious', group: 'reputation', subgroup: 'phishing', category: 'phishing', confidence: 0.9 },
    // The list holds a few bare IP addresses too: let each entry's type be inferred.
    (d) => entriesOf(null, d.phishing.blacklist)),
  builtin('eth-phishing-allowlist', { direction: 'safe', group: 'reputation', subgroup: 'allowlist', category: 'allowlisted', confidence: 0.9 },
    (d) => entriesOf(null, d.phishing.whitelist)),
  builtin('disposable-email-domains', { direction: 'malicious', group: 'reputation', subgroup: 'disposable_email', category: 'disposable_email', confidence: 0.5 },
    (d) => entriesOf('domain', d.disposable)),
  builtin('special-purpose', { direction: 'safe', group: 'network', subgroup: 'non_routable', category: 'special_purpose', confidence: 1 },
    (d) => labelled(nonRoutable(d))),
  builtin('documentation-ranges', { direction: 'safe', group: 'network', subgroup: 'documentation', category: 'special_purpose', confidence: 1 },
    (d) => labelled(documentation(d))),
  builtin('protocol-assignments', { direction: 'safe', group: 'network', subgroup: 'protocol_assignment', category: 'special_purpose', confidence: 1 },
    (d) => labelled(protocol(d))),
  builtin('cloudflare-ranges', { direction: 'safe', group: 'network', subgroup: 'cdn', category: 'shared_infrastructure', confidence: 0.8 },
    (d) => entriesOf('ip_block', d.cloudflare, 'Cloudflare')),
  builtin('cdn-asns', { direction: 'safe', group: 'network', subgroup: 'cdn', category: 'shared_infrastructure', confidence: 0.6 },
    (d) => d.infra.cdn.map((r, i) => ({ type: 'asn', value: String(r.asn), line: i + 1, label: r.org }))),
  builtin('cloud-asns', { direction: 'safe', group: 'network', subgroup: 'cloud', category: 'cloud_hosting', confidence: 0.5 },
    (d) => d.infra.cloud.map((r, i) => ({ type: 'asn', value: String(r.asn), line: i + 1, label: r.org }))),
  builtin('public-resolvers', { direction: 'safe', group: 'reputation', subgroup: 'public_resolver', category: 'public_dns_resolver', confidence: 1 },
    (d) => entriesOf('ip', d.resolvers))
]

/** Every built-in signal source with its entries, read from its package or data file. */
export async function readBuiltinSources (): Promise<SourceInput[]> {
  const data = await loadBuiltinData()
  return kBuiltinSources.map(({ traits, entries }) => {
    const list = entries(data)
    return { ...traits, entries: list, rejected: [], lines: list.length }
  })
}

/** Domains eth-phishing-detect guards against lookalikes of, and its edit-distance tolerance. */
export function readLookalikeTargets (): { targets: string[], tolerance: number } {
  const cfg = kRequire('eth-phishing-detect/src/config.json') as { fuzzylist: string[], tolerance: number }
  return { targets: cfg.fuzzylist, tolerance: cfg.tolerance }
}
