/**
 * Built-in reference data, read from npm packages and data/reference at compile time (never on the scoring path).
 * Each reader returns plain arrays; compile.ts packs them into the shared snapshot.
 */
import { createHash } from 'node:crypto'
import { readdir, readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { FeedEntry, IndicatorType } from '../engine/types.ts'
import type { SpecialAsnRange } from '../engine/snapshot/format.ts'
import type { SourceInput, SourceTraits } from '../engine/snapshot/source.ts'
import { parseRankCsv } from './feeds/rank-csv.ts'

const kRequire = createRequire(import.meta.url)
/** The project's data/reference folder. */
export const kReferenceDir = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'data', 'reference')

/**
 * Digest of every file in data/reference (names and bytes): part of every cache key of built-in data, so a new or
 * edited list there can never reuse an old part or snapshot.
 */
export async function referenceDigest (): Promise<string> {
  const h = createHash('sha256')
  for (const name of (await readdir(kReferenceDir)).sort()) h.update(name).update('\0').update(await readFile(join(kReferenceDir, name)))
  return h.digest('hex')
}

/** Folder of an installed package. */
export function packageDir (name: string): string {
  return dirname(kRequire.resolve(`${name}/package.json`))
}

/** Versions of every package the built-in data comes from: part of the snapshot cache key. */
export function builtinVersions (): Record<string, string> {
  // The readers' own revision: bumped when they read the same packages differently (a cached snapshot is then stale).
  const out: Record<string, string> = { 'builtin-readers': '3' }
  for (const name of kBuiltinPackages) {
    out[name] = (kRequire(`${name}/package.json`) as { version: string }).version
  }
  return out
}

const kBuiltinPackages = [
  '@ip-location-db/asn', '@ip-location-db/geo-whois-asn-country', 'eth-phishing-detect', 'disposable-email-domains',
  'cloudflare-ip', 'tldts'
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

/** How much a special-purpose range says: the subgroup its listing goes to. */
type SpecialKind = 'non_routable' | 'documentation' | 'protocol_assignment'

/** One row of data/reference/iana-special-purpose.json's address tables. */
interface SpecialPrefix { prefix: string, name: string, rfc: string, reachable: boolean | null, id: string, kind: SpecialKind }
/** One row of its AS number table. */
interface SpecialAsnRow { first: number, last: number, name: string, rfc: string, id: string, kind: SpecialKind }

/** The source each kind of special-purpose range is listed under (one source per subgroup). */
const kSpecialSources: Record<SpecialKind, string> = {
  non_routable: 'special-purpose',
  documentation: 'documentation-ranges',
  protocol_assignment: 'protocol-assignments'
}

/**
 * The IANA special-purpose registries, as transcribed into data/reference/iana-special-purpose.json: address
 * blocks (IPv4, IPv6) and AS numbers, each with the registry's name, its RFC and how much it says about a threat.
 * @see https://www.iana.org/assignments/iana-ipv4-special-registry/
 * @see https://www.iana.org/assignments/iana-ipv6-special-registry/
 * @see https://www.iana.org/assignments/iana-as-numbers-special-registry/
 */
export async function readSpecialPurpose (): Promise<{ prefixes: SpecialPrefix[], asns: SpecialAsnRow[] }> {
  const doc = JSON.parse(await readFile(join(kReferenceDir, 'iana-special-purpose.json'), 'utf8')) as { ipv4: SpecialPrefix[], ipv6: SpecialPrefix[], asn: SpecialAsnRow[] }
  return { prefixes: [...doc.ipv4, ...doc.ipv6], asns: doc.asn }
}

/**
 * Special-purpose AS number ranges for the snapshot header: the engine cannot index them as listings (the 32-bit
 * private-use range alone holds 94,967,295 numbers), so it looks an AS number up in these few rows.
 */
export async function readSpecialAsns (): Promise<SpecialAsnRange[]> {
  const { asns } = await readSpecialPurpose()
  return asns.map((r) => ({ first: r.first, last: r.last, source: kSpecialSources[r.kind], label: r.id, name: r.name }))
}

/** Public resolver addresses: the first token of each line that is not a comment (data/reference/public-resolvers.txt). */
function resolverAddresses (text: string): string[] {
  const out: string[] = []
  for (const line of text.split('\n')) {
    const t = line.trim()
    if (t === '' || t.startsWith('#')) continue
    out.push(t.split(/\s/)[0] as string)
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
  special: SpecialPrefix[]
  /** data/reference/top-sites.csv as the rank_csv reader gives it. */
  popular: FeedEntry[]
}

/** Reads every package and data file the built-in lists come from. */
export async function loadBuiltinData (): Promise<BuiltinData> {
  const resolvers = resolverAddresses(await readFile(join(kReferenceDir, 'public-resolvers.txt'), 'utf8'))
  return {
    phishing: kRequire('eth-phishing-detect/src/config.json') as BuiltinData['phishing'],
    disposable: kRequire('disposable-email-domains') as string[],
    cloudflare: kRequire('cloudflare-ip/ips.json') as string[],
    infra: JSON.parse(await readFile(join(kReferenceDir, 'infrastructure-asns.json'), 'utf8')) as BuiltinData['infra'],
    resolvers,
    special: (await readSpecialPurpose()).prefixes,
    popular: parseRankCsv(await readFile(join(kReferenceDir, 'top-sites.csv'), 'utf8')).entries
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

/** The special-purpose blocks of one kind, labelled with their id (which becomes a verdict flag). */
const labelled = (d: BuiltinData, kind: SpecialKind): FeedEntry[] =>
  d.special.filter((r) => r.kind === kind).map((r, i) => ({ type: 'ip_block', value: r.prefix, line: i + 1, label: r.id }))

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
    (d) => labelled(d, 'non_routable')),
  builtin('documentation-ranges', { direction: 'safe', group: 'network', subgroup: 'documentation', category: 'special_purpose', confidence: 1 },
    (d) => labelled(d, 'documentation')),
  builtin('protocol-assignments', { direction: 'safe', group: 'network', subgroup: 'protocol_assignment', category: 'special_purpose', confidence: 1 },
    (d) => labelled(d, 'protocol_assignment')),
  builtin('cloudflare-ranges', { direction: 'safe', group: 'network', subgroup: 'cdn', category: 'shared_infrastructure', confidence: 0.8 },
    (d) => entriesOf('ip_block', d.cloudflare, 'Cloudflare')),
  builtin('cdn-asns', { direction: 'safe', group: 'network', subgroup: 'cdn', category: 'shared_infrastructure', confidence: 0.6 },
    (d) => d.infra.cdn.map((r, i) => ({ type: 'asn', value: String(r.asn), line: i + 1, label: r.org }))),
  builtin('cloud-asns', { direction: 'safe', group: 'network', subgroup: 'cloud', category: 'cloud_hosting', confidence: 0.5 },
    (d) => d.infra.cloud.map((r, i) => ({ type: 'asn', value: String(r.asn), line: i + 1, label: r.org }))),
  builtin('public-resolvers', { direction: 'safe', group: 'reputation', subgroup: 'public_resolver', category: 'public_dns_resolver', confidence: 1 },
    (d) => entriesOf('ip', d.resolvers)),
  // Moz ranks sites by the domains linking to them, not by traffic: a little less trust than a traffic ranking.
  builtin('top-sites', { direction: 'safe', group: 'popularity', subgroup: 'popularity', category: 'popular', confidence: 0.8 },
    (d) => d.popular)
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
