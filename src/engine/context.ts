/**
 * threat_context: the facts about an indicator that do not weigh (its network, AS and country, its name's parts) and
 * the summary of its listings. writeContext says which members it has and in which order, and writes them through a
 * MemberWriter: bytes in the answer's format (the chunk writers', src/pool). contextObject builds the object the full
 * assessment carries with the same members in the same order (a test holds the two together).
 *
 * Member order per type (then the listing members: listed_by, known_good_by, threat_labels, first_seen, last_seen):
 *   ip        ip_version, [asn, as_org, registry_range], [country, country_name]
 *   ip_block  ip_version, network, prefix_length, [asn, as_org, registry_range], [country, country_name]
 *   domain    registrable_domain, public_suffix, subdomain, private_suffix, [unicode]
 *   sha256    hash_algorithm
 *   asn       asn, as_org, ipv4_ranges, ipv6_ranges
 */
import type { IndicatorType } from './types.ts'
import { RegistryRun, type AsnInfo, type Snapshot } from './snapshot/snapshot.ts'

/**
 * Where writeContext writes an object's members. A writer may keep the bytes of a fact group (reuse/keep): a group is
 * a run of members that depends only on its number (an AS number and its organisation, a country), so a byte writer
 * writes it once per thread and copies it afterwards.
 */
export interface MemberWriter {
  /** Starts an object of `members` members. */
  open: (members: number) => void
  /** The next member's name, by its number in kContextKeys. */
  key: (id: number) => void
  str: (s: string | null) => void
  num: (n: number) => void
  bool: (b: boolean) => void
  /** An array of strings. */
  strs: (list: readonly string[]) => void
  /** The text `first-last` of two IPv4 addresses (uint32). */
  v4Range: (first: number, last: number) => void
  /** Ends the object. */
  close: () => void
  /** True when the writer wrote the members it keeps for `group` (skip them); else they follow, then keep(group). */
  reuse: (group: number) => boolean
  /** Keeps the members written since reuse(group) returned false. */
  keep: (group: number) => void
}

/**
 * The names of threat_context's members, by number: a writer is given a member's number (MemberWriter.key) and keeps
 * its encoded name per number, so that no name is looked up by text per indicator.
 */
export const kContextKeys = ['ip_version', 'network', 'prefix_length', 'asn', 'as_org', 'registry_range', 'country', 'country_name', 'registrable_domain', 'public_suffix', 'subdomain', 'private_suffix', 'unicode', 'hash_algorithm', 'ipv4_ranges', 'ipv6_ranges', 'listed_by', 'known_good_by', 'threat_labels', 'first_seen', 'last_seen'] as const
const kKeyIpVersion = 0
const kKeyNetwork = 1
const kKeyPrefixLength = 2
const kKeyAsn = 3
const kKeyAsOrg = 4
const kKeyRegistryRange = 5
const kKeyCountry = 6
const kKeyCountryName = 7
const kKeyRegistrableDomain = 8
const kKeyPublicSuffix = 9
const kKeySubdomain = 10
const kKeyPrivateSuffix = 11
const kKeyUnicode = 12
const kKeyHashAlgorithm = 13
const kKeyIpv4Ranges = 14
const kKeyIpv6Ranges = 15
const kKeyListedBy = 16
const kKeyKnownGoodBy = 17
const kKeyThreatLabels = 18
const kKeyFirstSeen = 19
const kKeyLastSeen = 20

/** Fact groups: number = value * 8 + kind. */
const kGroupAsOrg = 0
const kGroupCountry = 1
const kGroupAsnFacts = 2
/** The listing members of an indicator no list names. */
const kGroupNoListing = 3
/** An IPv6 registry range's text (by range index: an IPv6 run is one range). */
const kGroupV6Range = 4

/** What a listing summary says (context members after the facts). */
export interface Listing {
  listedBy: readonly string[]
  knownGoodBy: readonly string[]
  labels: readonly string[]
  firstSeen: string | null
  lastSeen: string | null
}

/** The listing summary of an indicator no list names: shared, frozen. */
export const kNoListing: Listing = Object.freeze({
  listedBy: Object.freeze([]),
  knownGoodBy: Object.freeze([]),
  labels: Object.freeze([]),
  firstSeen: null,
  lastSeen: null
})

/**
 * The context facts of one indicator, as collected (collect.ts): one object per thread, overwritten by each
 * indicator, so collecting them allocates nothing.
 */
export class ContextFacts {
  type: IndicatorType = 'ip'
  /** ip, ip_block. */
  ipVersion: 4 | 6 = 4
  /** ip_block: the block (normalized) and its prefix length. */
  network = ''
  prefixLength = 0
  /** ip, ip_block: the registry's announcing range and AS, when `hasRegistry`. */
  hasRegistry = false
  readonly registry = new RegistryRun()
  /** ip, ip_block: the country's code, or null. */
  country: string | null = null
  /** domain. */
  registrable: string | null = null
  suffix: string | null = null
  subdomain: string | null = null
  privateSuffix = false
  unicode: string | null = null
  /** asn. */
  asn = 0
  asnInfo: AsnInfo | null = null

  /** Starts the facts of an indicator of `type`: every optional fact absent. */
  reset (type: IndicatorType): void {
    this.type = type
    this.hasRegistry = false
    this.country = null
    this.unicode = null
  }
}

/** Writes an indicator's threat_context: its facts, then `listing` (kNoListing for an indicator no list names). */
export function writeContext (f: ContextFacts, listing: Listing, snap: Snapshot, w: MemberWriter): void {
  switch (f.type) {
    case 'ip':
    case 'ip_block': {
      const block = f.type === 'ip_block'
      w.open(6 + (block ? 2 : 0) + (f.hasRegistry ? 3 : 0) + (f.country !== null ? 2 : 0))
      w.key(kKeyIpVersion)
      w.num(f.ipVersion)
      if (block) {
        w.key(kKeyNetwork)
        w.str(f.network)
        w.key(kKeyPrefixLength)
        w.num(f.prefixLength)
      }
      if (f.hasRegistry) {
        const run = f.registry
        const group = run.asn * 8 + kGroupAsOrg
        if (!w.reuse(group)) {
          w.key(kKeyAsn)
          w.num(run.asn)
          w.key(kKeyAsOrg)
          w.str(run.info?.org ?? null)
          w.keep(group)
        }
        if (run.version === 4) {
          w.key(kKeyRegistryRange)
          w.v4Range(snap.registryV4First(run), snap.registryV4Last(run))
        } else if (run.first !== run.last || !w.reuse(run.first * 8 + kGroupV6Range)) {
          w.key(kKeyRegistryRange)
          w.str(snap.registryRange(run))
          if (run.first === run.last) w.keep(run.first * 8 + kGroupV6Range)
        }
      }
      if (f.country !== null) {
        const group = (f.country.charCodeAt(0) << 16 | f.country.charCodeAt(1)) * 8 + kGroupCountry
        if (!w.reuse(group)) {
          w.key(kKeyCountry)
          w.str(f.country)
          w.key(kKeyCountryName)
          w.str(countryName(f.country))
          w.keep(group)
        }
      }
      break
    }
    case 'domain':
      w.open(9 + (f.unicode !== null ? 1 : 0))
      w.key(kKeyRegistrableDomain)
      w.str(f.registrable)
      w.key(kKeyPublicSuffix)
      w.str(f.suffix)
      w.key(kKeySubdomain)
      w.str(f.subdomain)
      w.key(kKeyPrivateSuffix)
      w.bool(f.privateSuffix)
      if (f.unicode !== null) {
        w.key(kKeyUnicode)
        w.str(f.unicode)
      }
      break
    case 'file_hash_sha256':
      w.open(6)
      w.key(kKeyHashAlgorithm)
      w.str('sha256')
      break
    case 'asn': {
      w.open(9)
      const group = f.asn * 8 + kGroupAsnFacts
      if (!w.reuse(group)) {
        w.key(kKeyAsn)
        w.num(f.asn)
        w.key(kKeyAsOrg)
        w.str(f.asnInfo?.org ?? null)
        w.key(kKeyIpv4Ranges)
        w.num(f.asnInfo?.v4Ranges ?? 0)
        w.key(kKeyIpv6Ranges)
        w.num(f.asnInfo?.v6Ranges ?? 0)
        w.keep(group)
      }
      break
    }
  }
  if (listing !== kNoListing || !w.reuse(kGroupNoListing)) {
    w.key(kKeyListedBy)
    w.strs(listing.listedBy)
    w.key(kKeyKnownGoodBy)
    w.strs(listing.knownGoodBy)
    w.key(kKeyThreatLabels)
    w.strs(listing.labels)
    w.key(kKeyFirstSeen)
    w.str(listing.firstSeen)
    w.key(kKeyLastSeen)
    w.str(listing.lastSeen)
    if (listing === kNoListing) w.keep(kGroupNoListing)
  }
  w.close()
}

/** Range indexes and run lengths a context key can hold (2^22 ranges of a version, runs of up to 255 more). */
const kKeyMaxFirst = 1 << 22
const kKeyMaxSpan = 1 << 8

/**
 * A number that names everything writeContext writes for an `ip` indicator's facts (its version, its registry run,
 * which fixes the AS, its organisation and the range, and its country), so that a writer may keep the bytes it wrote
 * for one address and copy them for another address with the same key; -1 for other types, or a run past what a key
 * holds. Whatever writeContext comes to write for an address must enter this key (test/pool/answer-writers.test.ts
 * writes every address both ways).
 */
export function contextKey (f: ContextFacts): number {
  if (f.type !== 'ip') return -1
  let key = f.ipVersion === 6 ? 1 : 0
  if (f.hasRegistry) {
    const run = f.registry
    const span = run.last - run.first
    if (run.first < 0 || run.first >= kKeyMaxFirst || span < 0 || span >= kKeyMaxSpan) return -1
    key += 2 * (1 + run.first + kKeyMaxFirst * span)
  }
  if (f.country !== null) {
    const a = f.country.charCodeAt(0) - 65
    const b = f.country.charCodeAt(1) - 65
    if (f.country.length !== 2 || a < 0 || a >= 26 || b < 0 || b >= 26) return -1
    // Bits above the version's and the run's (below 2^31 + 2): 677 country numbers keep the key below 2^42.
    key += 2 ** 32 * (1 + a * 26 + b)
  }
  return key
}

/**
 * The threat_context object of an indicator's facts and listing summary: the members writeContext writes, in its
 * order, as object literals per type (a property store per name, which V8 keeps fast; a writer storing by computed
 * name cost score() about a tenth). test/pool/answer-writers.test.ts holds its JSON to writeContext's for every type.
 */
export function contextObject (f: ContextFacts, listing: Listing, snap: Snapshot): Record<string, unknown> {
  let ctx: Record<string, unknown>
  switch (f.type) {
    case 'ip':
    case 'ip_block': {
      ctx = f.type === 'ip_block' ? { ip_version: f.ipVersion, network: f.network, prefix_length: f.prefixLength } : { ip_version: f.ipVersion }
      if (f.hasRegistry) {
        const run = f.registry
        ctx.asn = run.asn
        ctx.as_org = run.info?.org ?? null
        ctx.registry_range = snap.registryRange(run)
      }
      if (f.country !== null) {
        ctx.country = f.country
        ctx.country_name = countryName(f.country)
      }
      break
    }
    case 'domain':
      ctx = { registrable_domain: f.registrable, public_suffix: f.suffix, subdomain: f.subdomain, private_suffix: f.privateSuffix }
      if (f.unicode !== null) ctx.unicode = f.unicode
      break
    case 'file_hash_sha256':
      ctx = { hash_algorithm: 'sha256' }
      break
    case 'asn':
      ctx = { asn: f.asn, as_org: f.asnInfo?.org ?? null, ipv4_ranges: f.asnInfo?.v4Ranges ?? 0, ipv6_ranges: f.asnInfo?.v6Ranges ?? 0 }
      break
  }
  ctx.listed_by = listing.listedBy
  ctx.known_good_by = listing.knownGoodBy
  ctx.threat_labels = listing.labels
  ctx.first_seen = listing.firstSeen
  ctx.last_seen = listing.lastSeen
  return ctx
}

let regionNames: Intl.DisplayNames | undefined
/** Names already looked up: Intl.DisplayNames.of is slow next to a scoring call, and codes are few (< 700). */
const kCountryNames = new Map<string, string | null>()
/** English country name for a two-letter code (memoized formatter and results: pure, not state). */
export function countryName (cc: string): string | null {
  let name = kCountryNames.get(cc)
  if (name !== undefined) return name
  regionNames ??= new Intl.DisplayNames(['en'], { type: 'region' })
  try {
    const n = regionNames.of(cc)
    name = n === undefined || n === cc ? null : n
  } catch {
    name = null
  }
  kCountryNames.set(cc, name)
  return name
}

/** Dates already formatted; days come from the snapshot only, so the map stays small. */
const kDates = new Map<number, string>()
/** The date (YYYY-MM-DD) of a snapshot day (days since the epoch + 1), null for 0 (unknown). */
export function dayToDate (day: number): string | null {
  if (day === 0) return null
  let d = kDates.get(day)
  if (d === undefined) {
    d = new Date((day - 1) * 86_400_000).toISOString().slice(0, 10)
    kDates.set(day, d)
  }
  return d
}
