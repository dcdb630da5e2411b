/**
 * The verdict: every piece of evidence the snapshot holds about an indicator, weighed by a profile, and explained.
 *
 * score = clamp(round(baseline + sum of signal contributions), 0, 100). Each signal's evidence carries its signed
 * contribution (after decay, attenuation and group caps), so the sum of the signals is the score, and the same
 * snapshot + profile + indicator always give the same bytes.
 */
import { domainToUnicode } from 'node:url'
import { parse as parseDomain } from 'tldts'
import { formatIp, normalize } from './normalize/index.ts'
import { networkKey } from './snapshot/format.ts'
import type { KeyPair } from './snapshot/hash.ts'
import type { Snapshot } from './snapshot/snapshot.ts'
import type { SourceMeta } from './snapshot/source.ts'
import type { ScoringProfile } from './profiles.ts'
import { dgaSignal } from './signals/dga.ts'
import { homograph, lookalike } from './signals/lexical.ts'
import {
  SATURATION_BANDS, type Direction, type EvidenceDetails, type EvidenceSaturation, type IndicatorType,
  type NormalizedIndicator, type ScoreEntry, type SignalDetails, type Strength, type ThreatSignal, type Verdict
} from './types.ts'

/** How a listing reached the indicator. */
export type MatchKind = 'exact' | 'parent_domain' | 'supernet' | 'asn' | 'range' | 'lexical'

/** A weighed signal with its full evidence; the cacheable form. */
export interface ScoredSignal {
  signal_id: string
  direction: Direction
  signal_subgroup: string
  signal_group: string
  signal_name: string
  category: string
  contribution: number
  evidence: Record<string, unknown>
}

/** Everything about an indicator that does not depend on how it was sent or on detail levels: the cache value. */
export interface Assessment {
  type: IndicatorType
  normalized: string
  risk: Verdict['risk']
  signals: ScoredSignal[]
  scores: Verdict['scores']
  threat_context: Record<string, unknown>
  flags: string[]
  recommended_actions: Array<{ action: string, order: number }>
}

/** Per-request rendering choices. */
export interface RenderParams {
  signalDetails: SignalDetails
  evidenceDetails: EvidenceDetails
}

/** Number of signals `top` returns. */
export const kTopSignals = 3
const kSummaryKeys = ['source', 'match', 'matched', 'label', 'contribution'] as const
const kStaleDecay = 0.25

interface Hit {
  src: SourceMeta
  match: MatchKind
  matched: string
  attenuation: number
  firstDay: number
  lastDay: number
  label: string | null
  extra?: Record<string, unknown>
}

/** Pseudo-sources for signals computed from the value itself. */
function lexicalSource (subgroup: string, category: string): SourceMeta {
  return { id: -1, name: 'lexical', kind: 'builtin', direction: 'malicious', group: 'lexical', subgroup, category, confidence: 1, halfLifeDays: 0, lines: 0, indexed: 0, rejected: 0, rejectedSamples: [] }
}
const kLexical = {
  dga: lexicalSource('dga', 'suspicious'),
  homograph: lexicalSource('homograph', 'lookalike'),
  lookalike: lexicalSource('lookalike', 'lookalike'),
  privateSuffix: lexicalSource('private_suffix_hosting', 'suspicious')
}

/** Flags that safe subgroups set; malicious listings set `listed`, `inherited`, `multi_source`, `stale`. */
const kSubgroupFlags: Record<string, string[]> = {
  non_routable: ['non_routable'],
  documentation: ['documentation'],
  cdn: ['shared_infrastructure', 'cdn'],
  cloud: ['cloud_hosting'],
  popularity: ['popular'],
  public_resolver: ['public_resolver', 'shared_infrastructure'],
  allowlist: ['allowlisted'],
  disposable_email: ['disposable_email'],
  dga: ['dga_like'],
  homograph: ['homograph'],
  lookalike: ['lookalike'],
  private_suffix_hosting: ['private_suffix_hosting']
}

let regionNames: Intl.DisplayNames | undefined
/** Names already looked up: Intl.DisplayNames.of is slow next to a scoring call, and codes are few (< 700). */
const kCountryNames = new Map<string, string | null>()
/** English country name for a two-letter code (memoized formatter and results: pure, not state). */
function countryName (cc: string): string | null {
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
function dayToDate (day: number): string | null {
  if (day === 0) return null
  let d = kDates.get(day)
  if (d === undefined) {
    d = new Date((day - 1) * 86_400_000).toISOString().slice(0, 10)
    kDates.set(day, d)
  }
  return d
}

function round2 (x: number): number {
  return Math.round(x * 100) / 100 + 0 // + 0: never -0, which JSON cannot carry (the cache keeps verdicts as JSON)
}

/** Collects listings: per source only its strongest (most specific, then most recent) match counts. */
class HitSet {
  /** Created on the first listing: most indicators have none. */
  private bySource: Map<number, Hit> | null = null
  private lexical: Hit[] | null = null

  /** True when nothing was added. */
  get empty (): boolean {
    return this.bySource === null && this.lexical === null
  }

  add (hit: Hit): void {
    if (hit.src.id < 0) {
      (this.lexical ??= []).push(hit)
      return
    }
    const bySource = (this.bySource ??= new Map())
    const prev = bySource.get(hit.src.id)
    if (prev === undefined || hit.attenuation > prev.attenuation || (hit.attenuation === prev.attenuation && hit.lastDay > prev.lastDay)) {
      bySource.set(hit.src.id, hit)
    }
  }

  /**
   * Adds every listing of one key. With `rangeFact`, safe listings are not attenuated: an address inside an
   * allowlisted or special-purpose range is in it by definition, while a malicious block only suggests its members.
   */
  addEntries (snap: Snapshot, head: number, match: MatchKind, matched: string, attenuation: number, rangeFact = false): void {
    for (let e = head; e !== 0; e = snap.entryNext(e)) {
      const src = snap.sources[snap.entrySource(e)] as SourceMeta
      const att = rangeFact && src.direction === 'safe' ? 1 : attenuation
      if (src.subgroup === 'popularity') {
        // A rank list's label is the rank: read as a number, never decoded into the string cache.
        this.add({ src, match, matched, attenuation: att, firstDay: 0, lastDay: 0, label: null, extra: { rank: snap.entryLabelNumber(e) } })
      } else {
        this.add({ src, match, matched, attenuation: att, firstDay: snap.entryFirstDay(e), lastDay: snap.entryLastDay(e), label: snap.entryLabel(e) })
      }
    }
  }

  all (): Hit[] {
    return [...(this.bySource?.values() ?? []), ...(this.lexical ?? [])]
  }
}

function supernetFactor (table: Array<[number, number]>, prefix: number): number {
  for (const [min, f] of table) if (prefix >= min) return f
  return 0
}

function collectNetwork (ind: NormalizedIndicator, profile: ScoringProfile, snap: Snapshot, hits: HitSet, ctx: Record<string, unknown>): void {
  const ip = ind.ip as NonNullable<NormalizedIndicator['ip']>
  const v4 = ip.version === 4
  const hostBits = v4 ? 32 : 128
  const q = ind.type === 'ip' ? hostBits : ind.prefix as number
  const pair: KeyPair = { h1: 0, h2: 0 }
  const address = ip.words[0] as number
  for (const p of v4 ? snap.header.v4Prefixes : snap.header.v6Prefixes) {
    if (p > q || (v4 && !snap.mayHaveNet4(p, address))) continue
    const head = snap.find(networkKey(ind, p, pair))
    if (head === 0) continue
    const exact = p === q
    const matched = exact ? ind.normalized : `${formatIp({ version: ip.version, words: blockBound(ip, p, false) })}/${p}`
    hits.addEntries(snap, head, exact ? 'exact' : 'supernet', matched, exact ? 1 : supernetFactor(v4 ? profile.attenuation.supernetV4 : profile.attenuation.supernetV6, p), true)
  }
  ctx.ip_version = ip.version
  if (ind.type === 'ip_block') {
    ctx.network = ind.normalized
    ctx.prefix_length = q
  }
  // A block is described by its network's AS and country only when one of each holds all of it.
  const last = ind.type === 'ip_block' ? blockBound(ip, q, true) : null
  const facts = snap.registryFacts(ip.version, ip.words, last)
  if (facts !== null) {
    ctx.asn = facts.asn
    ctx.as_org = facts.info?.org ?? null
    ctx.registry_range = facts.range
    if (facts.listed !== 0) hits.addEntries(snap, facts.listed, 'asn', `AS${facts.asn}`, profile.attenuation.asn)
  }
  const cc = snap.countryOf(ip.version, ip.words, last)
  if (cc !== null) {
    ctx.country = cc
    ctx.country_name = countryName(cc)
  }
}

/** The first (`last` false) or last address of the block of `prefix` bits holding `ip`, as words. */
function blockBound (ip: NonNullable<NormalizedIndicator['ip']>, prefix: number, last: boolean): number[] {
  return ip.words.map((w, i) => {
    const bits = Math.min(32, Math.max(0, prefix - i * 32))
    const net = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0
    return (last ? (w | ~net) : (w & net)) >>> 0
  })
}

/**
 * tldts options for a normalized name. Normalization already guarantees what tldts would check or extract (a
 * lowercase LDH-or-underscore hostname, no empty label, no label over 63 characters or edged with a hyphen, no
 * trailing dot, never an address), so the checks are skipped; test/engine/score.test.ts holds both option sets
 * to the same answers.
 */
export const kParseOptions = { allowPrivateDomains: true, detectIp: false, extractHostname: false, validateHostname: false, mixedInputs: false }

function collectDomain (ind: NormalizedIndicator, profile: ScoringProfile, snap: Snapshot, hits: HitSet, ctx: Record<string, unknown>): void {
  const name = ind.normalized
  const parsed = parseDomain(name, kParseOptions)
  let suffixLabels = 1
  if (parsed.publicSuffix !== null) for (let i = parsed.publicSuffix.indexOf('.'); i !== -1; i = parsed.publicSuffix.indexOf('.', i + 1)) suffixLabels++
  let head = snap.findDomain(name)
  if (head !== 0) hits.addEntries(snap, head, 'exact', name, 1)
  let rest = name
  let labels = 1
  for (let i = name.indexOf('.'); i !== -1; i = name.indexOf('.', i + 1)) labels++
  while (labels - 1 > suffixLabels) {
    rest = rest.slice(rest.indexOf('.') + 1)
    labels--
    head = snap.findDomain(rest)
    if (head !== 0) hits.addEntries(snap, head, 'parent_domain', rest, profile.attenuation.parentDomain)
  }

  ctx.registrable_domain = parsed.domain
  ctx.public_suffix = parsed.publicSuffix
  ctx.subdomain = parsed.subdomain === '' ? null : parsed.subdomain
  ctx.private_suffix = parsed.isPrivate === true

  const label = parsed.domainWithoutSuffix ?? ''
  const { dgaThreshold, dgaStrong } = profile.lexical
  const dga = dgaSignal(label, dgaThreshold)
  // Weak evidence: visible from the threshold, weighted only above dgaStrong (see ScoringProfile.lexical).
  if (dga !== null) hits.add({ src: kLexical.dga, match: 'lexical', matched: label, attenuation: Math.max(0, (dga.model_confidence - dgaStrong) / (1 - dgaStrong)), firstDay: 0, lastDay: 0, label: null, extra: { ...dga } })
  const homo = homograph(name)
  if (homo !== null) {
    ctx.unicode = homo.unicode
    hits.add({ src: kLexical.homograph, match: 'lexical', matched: name, attenuation: 1, firstDay: 0, lastDay: 0, label: null, extra: homo })
  } else if (name.includes('xn--')) {
    // Any other internationalized name is shown as it reads too (bücher.de for xn--bcher-kva.de).
    const unicode = domainToUnicode(name)
    if (unicode !== '' && unicode !== name) ctx.unicode = unicode
  }
  const registrable = parsed.domain
  if (registrable !== null) {
    const look = lookalikeOf(name, registrable, parsed.publicSuffix, homo, profile, snap)
    if (look !== null) hits.add({ src: kLexical.lookalike, match: 'lexical', matched: registrable, attenuation: 1, firstDay: 0, lastDay: 0, label: null, extra: look })
  }
  if (parsed.isPrivate === true && parsed.subdomain !== null) {
    hits.add({ src: kLexical.privateSuffix, match: 'lexical', matched: parsed.publicSuffix ?? '', attenuation: 1, firstDay: 0, lastDay: 0, label: null, extra: { private_suffix: parsed.publicSuffix } })
  }
}

/**
 * The site a name imitates, or null: a guarded domain within the edit tolerance; with a known-good profile (2026-12)
 * also a guarded or popular domain that a punycode homograph renders as exactly, or that the name spells with
 * look-alike digits.
 */
function lookalikeOf (name: string, registrable: string, suffix: string | null, homo: ReturnType<typeof homograph>, profile: ScoringProfile, snap: Snapshot): { target: string, distance: number } | null {
  const { targets, tolerance } = snap.header.lookalike
  // The Latin skeleton of the registrable domain when its own labels are a homograph (a confusable letter in a
  // subdomain says nothing of which site the name imitates).
  const regHomo = homo === null ? null : registrable === name ? homo : homograph(registrable)
  if (profile.knownGood === null) return lookalike(regHomo !== null ? regHomo.skeleton : registrable, targets, tolerance)
  if (regHomo !== null) return homographTarget(regHomo.skeleton, targets, snap) ?? lookalike(regHomo.skeleton, targets, tolerance)
  return lookalike(registrable, targets, tolerance) ?? digitTarget(registrable, suffix, targets, snap)
}

/**
 * A punycode name whose Latin skeleton is exactly a guarded or a popular registrable domain: the name renders as that
 * site's own and is not it, the strongest lookalike there is (edit distance 0). Null when the skeleton is neither.
 */
function homographTarget (skeleton: string, targets: readonly string[], snap: Snapshot): { target: string, distance: number } | null {
  if (targets.includes(skeleton)) return { target: skeleton, distance: 0 }
  for (let e = snap.findDomain(skeleton); e !== 0; e = snap.entryNext(e)) {
    const src = snap.sources[snap.entrySource(e)] as SourceMeta
    if (src.subgroup === 'popularity' && src.direction === 'safe') return { target: skeleton, distance: 0 }
  }
  return null
}

/**
 * A registrable domain whose name part, with its look-alike digits read as letters (0 o, 1 l or i, 3 e, 5 s), is
 * exactly a guarded or a popular domain (`goog1e.com` -> google.com): a lookalike at the distance of the digits
 * replaced. Null otherwise. A quarter of the names queried hold digits, mostly others than these: one scan without
 * allocation settles those.
 */
function digitTarget (registrable: string, suffix: string | null, targets: readonly string[], snap: Snapshot): { target: string, distance: number } | null {
  if (suffix === null) return null
  const end = registrable.length - suffix.length - 1
  let distance = 0
  let ones = false
  for (let i = 0; i < end; i++) {
    const c = registrable.charCodeAt(i)
    if (c < 48 || c > 57) continue
    if (c !== 48 && c !== 49 && c !== 51 && c !== 53) return null
    distance++
    if (c === 49) ones = true
  }
  if (distance === 0) return null
  const label = registrable.slice(0, end)
  const base = label.replaceAll('0', 'o').replaceAll('3', 'e').replaceAll('5', 's')
  for (const one of ones ? ['l', 'i'] : ['']) {
    const found = homographTarget(`${one === '' ? base : base.replaceAll('1', one)}.${suffix}`, targets, snap)
    if (found !== null) return { target: found.target, distance }
  }
  return null
}

function signalName (h: Hit): string {
  const { src, match, matched } = h
  if (match === 'lexical') {
    switch (src.subgroup) {
      case 'dga': return 'Algorithmically generated-looking name'
      case 'homograph': return 'Punycode homograph of a Latin name'
      case 'lookalike': return `Lookalike of ${String(h.extra?.target)}`
      default: return `Hosted under shared suffix ${matched}`
    }
  }
  const where = match === 'exact'
    ? ''
    : match === 'parent_domain'
      ? ` (parent domain ${matched})`
      : match === 'supernet' ? ` (containing network ${matched})` : match === 'range' ? ` (range ${matched})` : ` (announcing network ${matched})`
  if (src.direction === 'malicious') return `Listed by ${src.name}${where}`
  const what = h.match === 'range' ? 'AS number' : 'address'
  switch (src.subgroup) {
    case 'non_routable': return `Special-purpose ${what} range: ${h.label ?? 'reserved'}${where}`
    case 'documentation': return `Documentation ${what} range${where}`
    case 'protocol_assignment': return `IANA protocol assignment: ${h.label ?? 'reserved'}${where}`
    case 'cdn': return `Shared CDN infrastructure: ${h.label ?? src.name}${where}`
    case 'cloud': return `Cloud provider network: ${h.label ?? src.name}${where}`
    case 'public_resolver': return `Public DNS resolver${where}`
    case 'allowlist': return `Allowlisted by ${src.name}${where}`
    case 'popularity': {
      const rank = h.extra?.rank
      const ranked = typeof rank === 'number' ? `rank ${rank} in ${src.name}` : `listed by ${src.name}`
      return h.extra?.popular_name === true ? `Popular domain (${ranked})` : `Subdomain of a popular domain: ${matched} (${ranked})`
    }
    default: return `Known good per ${src.name}${where}`
  }
}

/** Weighs evidence into an assessment. Pure: the result depends only on the arguments. */
export function assess (ind: NormalizedIndicator, profile: ScoringProfile, snap: Snapshot): Assessment {
  const hits = new HitSet()
  const ctx: Record<string, unknown> = {}
  switch (ind.type) {
    case 'ip':
    case 'ip_block':
      collectNetwork(ind, profile, snap, hits, ctx)
      break
    case 'domain':
      collectDomain(ind, profile, snap, hits, ctx)
      break
    case 'file_hash_sha256':
      hits.addEntries(snap, snap.findSha256(ind.normalized), 'exact', ind.normalized, 1)
      ctx.hash_algorithm = 'sha256'
      break
    case 'asn': {
      const asn = ind.asn as number
      hits.addEntries(snap, snap.findAsn(asn), 'exact', ind.normalized, 1)
      const special = snap.specialAsn(asn)
      if (special !== null) {
        const { range, source } = special
        const matched = range.first === range.last ? `AS${range.first}` : `AS${range.first}-AS${range.last}`
        hits.add({ src: source, match: 'range', matched, attenuation: 1, firstDay: 0, lastDay: 0, label: range.label, extra: { range_name: range.name } })
      }
      const info = snap.asnInfo(asn)
      ctx.asn = asn
      ctx.as_org = info?.org ?? null
      ctx.ipv4_ranges = info?.v4Ranges ?? 0
      ctx.ipv6_ranges = info?.v6Ranges ?? 0
      break
    }
  }

  if (hits.empty) return unlisted(ind, profile, ctx)
  const all = ind.type === 'ip' || ind.type === 'ip_block' ? mostSpecificSpecial(hits.all(), ind) : hits.all()
  const flags = new Set<string>()
  const sharedInfra = all.some((h) => h.src.direction === 'safe' && (h.src.subgroup === 'cdn' || h.src.subgroup === 'public_resolver'))
  const maliciousSources = new Set<string>()
  const known = knownGoodContext(ind, profile, all)

  interface Weighed { hit: Hit, raw: number, decay: number, ageDays: number | null, halfLife: number, infra: number, weight: number, extra: Record<string, number> | null }
  const weighed: Weighed[] = []
  for (const h of all) {
    const subgroupFlags = kSubgroupFlags[h.src.subgroup]
    if (subgroupFlags !== undefined) for (const f of subgroupFlags) flags.add(f)
    if (h.src.subgroup === 'non_routable' || h.src.subgroup === 'protocol_assignment') {
      if (h.label !== null) flags.add(h.label)
    }
    const weight = profile.weights[h.src.subgroup] ?? profile.weights.default ?? 0
    // Under a known-good profile, context of weight 0 (a cloud network, a protocol assignment) is shown, adding 0.
    if (weight === 0 && (known === null || h.src.direction !== 'safe')) continue
    let decay = 1
    let ageDays: number | null = null
    let halfLife = h.src.halfLifeDays
    if (h.lastDay !== 0) {
      ageDays = Math.max(0, snap.dataDay - h.lastDay)
      // Cloud addresses change hands within days: a listing of one ages at least as fast as the cloud half-life.
      if (known !== null && known.cloud && h.src.direction === 'malicious') halfLife = halfLife > 0 ? Math.min(halfLife, known.cloudHalfLife) : known.cloudHalfLife
      if (halfLife > 0) decay = Math.max(profile.decayFloor, Math.pow(0.5, ageDays / halfLife))
    }
    // CDN edges and public resolvers are shared by many tenants: their address says little about one of them.
    const infra = sharedInfra && h.src.direction === 'malicious' && h.match !== 'lexical' && ind.type !== 'domain'
      ? profile.attenuation.sharedInfrastructure
      : 1
    const extra = known === null ? null : knownGoodFactors(h, known)
    let factor = 1
    if (extra !== null) for (const k in extra) factor *= extra[k] as number
    const sign = h.src.direction === 'malicious' ? 1 : -1
    weighed.push({ hit: h, raw: sign * weight * h.src.confidence * decay * h.attenuation * infra * factor, decay, ageDays, halfLife, infra, weight, extra })
    if (h.src.direction === 'malicious' && h.match !== 'lexical') {
      flags.add('listed')
      if (h.match !== 'exact') flags.add('inherited')
      if (decay < kStaleDecay) flags.add('stale')
      maliciousSources.add(originOf(h.src))
    }
  }
  if (maliciousSources.size >= 2) flags.add('multi_source')
  const sameOrigin = profile.trust === null ? null : countOncePerOrigin(weighed)

  // Group caps, per direction: scale every member so the group's sum equals the cap.
  const sumsUp = new Map<string, number>()
  const sumsDown = new Map<string, number>()
  for (const w of weighed) {
    const sums = w.raw > 0 ? sumsUp : sumsDown
    sums.set(w.hit.src.group, (sums.get(w.hit.src.group) ?? 0) + Math.abs(w.raw))
  }
  const capScales = weighed.map((w) => {
    const cap = profile.groupCaps[w.hit.src.group] ?? Infinity
    const sum = (w.raw > 0 ? sumsUp : sumsDown).get(w.hit.src.group) as number
    return sum > cap ? cap / sum : 1
  })
  const trust = trustScales(ind, profile, weighed.map((w) => w.hit), weighed.map((w, i) => w.raw * (capScales[i] as number)))
  let mass = 0
  let total = 0
  const signals: ScoredSignal[] = []
  for (let i = 0; i < weighed.length; i++) {
    const w = weighed[i] as Weighed
    const { hit } = w
    const capScale = capScales[i] as number
    const contribution = round2(w.raw * capScale * (trust === null ? 1 : (trust.scales[i] as number)))
    mass += Math.abs(w.raw)
    total += contribution
    const evidence: Record<string, unknown> = {
      source: hit.src.name,
      source_kind: hit.src.kind,
      match: hit.match,
      matched: hit.matched,
      label: hit.label,
      contribution,
      weight: w.weight,
      confidence: hit.src.confidence,
      attenuation: hit.attenuation,
      shared_infrastructure_factor: w.infra,
      decay: round2(w.decay * 100) / 100,
      age_days: w.ageDays,
      half_life_days: w.halfLife,
      first_seen: dayToDate(hit.firstDay),
      last_seen: dayToDate(hit.lastDay),
      group_cap_scale: Math.round(capScale * 10000) / 10000,
      ...hit.extra,
      ...w.extra
    }
    const keptOf = sameOrigin?.get(i)
    if (keptOf !== undefined) evidence.same_origin_as = keptOf
    if (trust !== null) {
      evidence.context_only = trust.context[i] as boolean
      evidence.corroboration_scale = Math.round((trust.scales[i] as number) * 10000) / 10000
      evidence.independent_sources = trust.sources
    }
    signals.push({
      signal_id: hit.match === 'lexical' ? `lexical:${hit.src.subgroup}` : `${hit.src.name}:${hit.match}`,
      direction: hit.src.direction,
      signal_subgroup: hit.src.subgroup,
      signal_group: hit.src.group,
      signal_name: signalName(hit),
      category: hit.src.category,
      contribution,
      evidence
    })
  }
  signals.sort((a, b) => Math.abs(b.contribution) - Math.abs(a.contribution) || (a.signal_id < b.signal_id ? -1 : a.signal_id > b.signal_id ? 1 : 0))

  const score = Math.max(0, Math.min(100, Math.round(profile.baseline + round2(total))))
  const scores = breakdown(signals)
  const category = categoryOf(score, profile, signals)
  const saturation = saturationOf(mass, profile)
  const strength = strengthOf(score, profile)
  addContext(ctx, weighed.map((w) => w.hit))
  const flagList = [...flags].sort()
  return {
    type: ind.type,
    normalized: ind.normalized,
    risk: { score, strength, category, evidence_saturation: saturation },
    signals,
    scores,
    threat_context: ctx,
    flags: flagList,
    recommended_actions: actionsOf(score, ind.type, flagList, profile)
  }
}

/** Subgroups of the IANA special-purpose sources: one address falls in several nested ranges. */
const kSpecialSubgroups = new Set(['non_routable', 'documentation', 'protocol_assignment'])

/**
 * Of the special-purpose ranges holding an address, only the most specific counts, as in the IANA registries: a
 * more specific entry overrides the block around it (192.0.0.9/32, a globally reachable anycast address, sits in
 * 192.0.0.0/24, which is not globally reachable).
 */
function mostSpecificSpecial (hits: Hit[], ind: NormalizedIndicator): Hit[] {
  let best: Hit | null = null
  let bestPrefix = -1
  let count = 0
  const own = ind.type === 'ip' ? (ind.ip?.version === 4 ? 32 : 128) : ind.prefix as number
  for (const h of hits) {
    if (h.src.direction !== 'safe' || !kSpecialSubgroups.has(h.src.subgroup)) continue
    count++
    const p = h.match === 'exact' ? own : Number(h.matched.slice(h.matched.lastIndexOf('/') + 1))
    if (p > bestPrefix) {
      best = h
      bestPrefix = p
    }
  }
  return count < 2 ? hits : hits.filter((h) => h === best || h.src.direction !== 'safe' || !kSpecialSubgroups.has(h.src.subgroup))
}

/** What the known-good rules of a profile need to know about one indicator's evidence as a whole. */
interface KnownGood {
  /** Rank factor of the strongest popularity entry for the name itself (or `www.` + name); 0 when none. */
  popularity: number
  /** The indicator is an address or block in a cloud provider's network. */
  cloud: boolean
  cloudHalfLife: number
  cloudFactor: number
  damping: number
  /** The malicious evidence comes from fewer than two independent sources, so it is weak enough to damp. */
  weak: boolean
}

function round4 (x: number): number {
  return Math.round(x * 10000) / 10000 + 0
}

/**
 * The known-good context of an indicator (null when the profile has no known-good rules, so older profiles replay
 * unchanged). Sets each popularity hit's match attenuation and evidence: the name itself (or `www.` + name) counts
 * fully, a deeper subdomain only `subdomainFactor`, because subdomains are often run by others (user sites, hosted
 * services) while the registrable owner is popular.
 */
function knownGoodContext (ind: NormalizedIndicator, profile: ScoringProfile, hits: Hit[]): KnownGood | null {
  const kg = profile.knownGood
  if (kg === null) return null
  let popularity = 0
  let cloud = false
  let any = false
  for (const h of hits) {
    if (h.src.direction === 'malicious') continue
    if (h.src.subgroup === 'popularity' && ind.type === 'domain') {
      any = true
      const rank = typeof h.extra?.rank === 'number' ? h.extra.rank : null
      const f = rank === null ? kg.popularity.unrankedFactor : Math.min(1, Math.max(0, 1 - Math.log10(rank) / Math.log10(kg.popularity.maxRank)))
      const name = ind.normalized
      const same = h.match === 'exact' || (name.startsWith('www.') && h.matched === name.slice(4))
      h.attenuation = same ? 1 : kg.popularity.subdomainFactor
      h.extra = { rank, popular_name: same, rank_factor: round4(f) }
      if (same && f > popularity) popularity = f
    } else if (h.src.subgroup === 'cloud' && (ind.type === 'ip' || ind.type === 'ip_block')) {
      any = cloud = true
    }
  }
  // Most assessed indicators have neither: share one answer instead of counting sources.
  if (!any) return kNoKnownGood
  const context = profile.trust?.contextSubgroups ?? kNoSubgroups
  let first: string | null = null
  let weak = true
  for (const h of hits) {
    if (h.src.direction !== 'malicious' || h.match === 'lexical' || context.includes(h.src.subgroup)) continue
    if (first === null) first = h.src.name
    else if (h.src.name !== first) {
      weak = false
      break
    }
  }
  return { popularity, cloud, cloudHalfLife: kg.cloud.halfLifeDays, cloudFactor: kg.cloud.factor, damping: kg.popularity.damping, weak }
}

/** The known-good context of an indicator with neither a popularity nor a cloud signal. */
const kNoKnownGood: KnownGood = Object.freeze({ popularity: 0, cloud: false, cloudHalfLife: 0, cloudFactor: 1, damping: 0, weak: false })
const kNoSubgroups: readonly string[] = Object.freeze([])

/**
 * Factors the known-good rules apply to one hit, by evidence key (null: none). A popularity entry weighs its rank
 * factor; weak malicious evidence is damped on a popular name, and when undated or inherited on a cloud address.
 */
function knownGoodFactors (h: Hit, known: KnownGood): Record<string, number> | null {
  if (known === kNoKnownGood) return null
  if (h.src.subgroup === 'popularity' && h.src.direction === 'safe') {
    const f = h.extra?.rank_factor
    return typeof f === 'number' ? { rank_factor: f } : null
  }
  if (h.src.direction !== 'malicious' || !known.weak) return null
  let out: Record<string, number> | null = null
  if (known.popularity > 0) (out ??= {}).popularity_factor = round4(1 - known.damping * known.popularity)
  if (known.cloud && h.match !== 'lexical' && (h.lastDay === 0 || h.match === 'supernet' || h.match === 'asn')) (out ??= {}).cloud_factor = known.cloudFactor
  return out
}

/** The upstream data a source carries: its manifest `origin`, else its name. */
function originOf (src: SourceMeta): string {
  return src.origin ?? src.name
}

/**
 * One upstream list seen through several feeds (the same origin) is one source: only its strongest listing of the
 * indicator adds to the score; the others are shown with contribution 0. Zeroes their `raw` in place and returns,
 * for each of them, the name of the source whose listing counts; null when no origin has two listings.
 */
function countOncePerOrigin (weighed: Array<{ hit: Hit, raw: number }>): Map<number, string> | null {
  let best: Map<string, number> | null = null
  let dropped: number[] | null = null
  for (let i = 0; i < weighed.length; i++) {
    const w = weighed[i] as { hit: Hit, raw: number }
    if (w.raw <= 0 || w.hit.match === 'lexical') continue
    const origin = originOf(w.hit.src)
    const j = (best ??= new Map()).get(origin)
    if (j === undefined) {
      best.set(origin, i)
    } else if (w.raw > (weighed[j] as { raw: number }).raw) {
      best.set(origin, i)
      ;(dropped ??= []).push(j)
    } else {
      ;(dropped ??= []).push(i)
    }
  }
  if (dropped === null || best === null) return null
  const out = new Map<number, string>()
  for (const i of dropped) {
    const w = weighed[i] as { hit: Hit, raw: number }
    w.raw = 0
    out.set(i, (weighed[best.get(originOf(w.hit.src)) as number] as { hit: Hit }).hit.src.name)
  }
  return out
}

/**
 * What a profile's trust rules do to each weighed, group-capped signal (null when the profile has none, so older
 * profiles replay byte for byte).
 *
 * - Context is not evidence: a malicious signal of a context subgroup (hosting under a shared suffix, a disposable
 *   e-mail parent, a punycode homograph), and any listing of an address inside a special-purpose or documentation
 *   range, adds nothing unless other malicious evidence is present; then it strengthens that evidence.
 * - Single-source undated evidence is capped: when the malicious evidence comes from at most one independent source
 *   and none of it carries a date, the positive sum is scaled down to `singleSourceUndatedCap` points, so it cannot
 *   reach `block` alone. A second independent source, or a dated listing (which decays), lifts the cap.
 */
function trustScales (ind: NormalizedIndicator, profile: ScoringProfile, hits: Hit[], capped: number[]): { scales: number[], context: boolean[], sources: number } | null {
  const rules = profile.trust
  if (rules === null) return null
  const reservedAddress = ind.type !== 'domain' && hits.some((h) => h.src.direction === 'safe' && (h.src.subgroup === 'non_routable' || h.src.subgroup === 'documentation'))
  const context = hits.map((h) => h.src.direction === 'malicious' && (rules.contextSubgroups.includes(h.src.subgroup) || (reservedAddress && h.match !== 'lexical')))
  const sources = new Set<string>()
  let dated = false
  let evidenceUp = 0
  let contextUp = 0
  for (let i = 0; i < hits.length; i++) {
    const c = capped[i] as number
    if (c <= 0) continue
    if (context[i] === true) {
      contextUp += c
      continue
    }
    evidenceUp += c
    const h = hits[i] as Hit
    if (h.match !== 'lexical') {
      sources.add(originOf(h.src))
      if (h.lastDay !== 0) dated = true
    }
  }
  const contextScale = evidenceUp > 0 ? 1 : 0
  const up = evidenceUp + contextUp * contextScale
  const cap = rules.singleSourceUndatedCap
  const corroboration = sources.size <= 1 && !dated && up > cap ? cap / up : 1
  const scales = capped.map((c, i) => c <= 0 ? 1 : (context[i] === true ? contextScale : 1) * corroboration)
  return { scales, context, sources: sources.size }
}

/** Frozen so that assessments can share them: JSON and msgpack read them, nothing writes them. */
const kNone: readonly never[] = Object.freeze([])
const kNoScores: Verdict['scores'] = Object.freeze({ signal_groups: Object.freeze({}), signal_subgroups: Object.freeze({}) })

/** What every unlisted indicator of a profile shares: its risk, empty scores and, per type, its actions. */
interface UnlistedParts {
  risk: Verdict['risk']
  actions: Map<IndicatorType, Array<{ action: string, order: number }>>
}
const kUnlisted = new WeakMap<ScoringProfile, UnlistedParts>()

/** The assessment of an indicator no source lists and no lexical signal flags: most of any bulk. */
function unlisted (ind: NormalizedIndicator, profile: ScoringProfile, ctx: Record<string, unknown>): Assessment {
  let parts = kUnlisted.get(profile)
  if (parts === undefined) {
    const score = Math.max(0, Math.min(100, Math.round(profile.baseline)))
    const risk = { score, strength: strengthOf(score, profile), category: categoryOf(score, profile, []), evidence_saturation: saturationOf(0, profile) }
    kUnlisted.set(profile, parts = { risk: Object.freeze(risk), actions: new Map() })
  }
  let actions = parts.actions.get(ind.type)
  if (actions === undefined) {
    actions = Object.freeze(actionsOf(parts.risk.score, ind.type, [], profile).map((a) => Object.freeze(a))) as Array<{ action: string, order: number }>
    parts.actions.set(ind.type, actions)
  }
  ctx.listed_by = kNone
  ctx.known_good_by = kNone
  ctx.threat_labels = kNone
  ctx.first_seen = null
  ctx.last_seen = null
  return {
    type: ind.type,
    normalized: ind.normalized,
    risk: parts.risk,
    signals: kNone as never[],
    scores: kNoScores,
    threat_context: ctx,
    flags: kNone as never[],
    recommended_actions: actions
  }
}

function addEntry (table: Record<string, ScoreEntry>, key: string, s: ScoredSignal): void {
  const e = table[key] ?? (table[key] = { contribution: 0, signal_count: 0, malicious: 0, safe: 0 })
  e.contribution = round2(e.contribution + s.contribution)
  e.signal_count++
  if (s.direction === 'malicious') e.malicious++
  else e.safe++
}

function breakdown (signals: ScoredSignal[]): Verdict['scores'] {
  const groups: Record<string, ScoreEntry> = {}
  const subgroups: Record<string, ScoreEntry> = {}
  for (const s of signals) {
    addEntry(groups, s.signal_group, s)
    addEntry(subgroups, s.signal_subgroup, s)
  }
  return { signal_groups: groups, signal_subgroups: subgroups }
}

function categoryOf (score: number, profile: ScoringProfile, signals: ScoredSignal[]): string {
  if (signals.length === 0) return 'unknown'
  if (score > profile.baseline) {
    for (const c of profile.categoryPrecedence) {
      for (const s of signals) if (s.contribution > 0 && s.category === c) return c
    }
    return signals.find((s) => s.contribution > 0)?.category ?? 'suspicious'
  }
  if (score < profile.baseline) return signals.find((s) => s.contribution < 0)?.category ?? 'benign'
  // Context alone (a cloud network, a protocol assignment): name it rather than call the evidence inconclusive.
  if (profile.knownGood !== null && signals.every((s) => s.contribution === 0)) {
    const context = signals.find((s) => s.direction === 'safe')
    if (context !== undefined) return context.category
  }
  return 'inconclusive'
}

function saturationOf (mass: number, profile: ScoringProfile): EvidenceSaturation {
  let band = 0
  for (let i = 0; i < profile.saturation.length; i++) if (mass >= profile.saturation[i]!) band = i + 1
  return SATURATION_BANDS[band] as EvidenceSaturation
}

function strengthOf (score: number, profile: ScoringProfile): Strength {
  const d = Math.abs(score - profile.baseline)
  const [m, s, v] = profile.strength
  return d >= v ? 'very_strong' : d >= s ? 'strong' : d >= m ? 'medium' : 'weak'
}

function addContext (ctx: Record<string, unknown>, hits: Hit[]): void {
  if (hits.length === 0) {
    // Most indicators of a bulk are on no list: skip the sets.
    ctx.listed_by = []
    ctx.known_good_by = []
    ctx.threat_labels = []
    ctx.first_seen = null
    ctx.last_seen = null
    return
  }
  const listedBy = new Set<string>()
  const knownGoodBy = new Set<string>()
  const labels = new Set<string>()
  let first = 0
  let last = 0
  for (const h of hits) {
    if (h.match === 'lexical') continue
    if (h.src.direction === 'malicious') {
      listedBy.add(h.src.name)
      if (h.label !== null) labels.add(h.label)
      if (h.firstDay !== 0 && (first === 0 || h.firstDay < first)) first = h.firstDay
      if (h.lastDay > last) last = h.lastDay
    } else {
      knownGoodBy.add(h.src.name)
    }
  }
  ctx.listed_by = [...listedBy].sort()
  ctx.known_good_by = [...knownGoodBy].sort()
  ctx.threat_labels = [...labels].sort()
  ctx.first_seen = dayToDate(first)
  ctx.last_seen = dayToDate(last)
}

function actionsOf (score: number, type: IndicatorType, flags: string[], profile: ScoringProfile): Array<{ action: string, order: number }> {
  const out: Array<{ action: string, order: number }> = []
  for (const rule of profile.actions) {
    const w = rule.when
    if (w.minScore !== undefined && score < w.minScore) continue
    if (w.maxScore !== undefined && score > w.maxScore) continue
    if (w.types !== undefined && !w.types.includes(type)) continue
    if (w.flagsAny !== undefined && !w.flagsAny.some((f) => flags.includes(f))) continue
    if (w.flagsNone !== undefined && w.flagsNone.some((f) => flags.includes(f))) continue
    out.push({ action: rule.action, order: out.length + 1 })
  }
  return out
}

/** One signal of a verdict at an evidence detail level. */
function renderSignal (s: ScoredSignal, evidenceDetails: EvidenceDetails): ThreatSignal {
  const out: ThreatSignal = {
    signal_id: s.signal_id,
    direction: s.direction,
    signal_subgroup: s.signal_subgroup,
    signal_group: s.signal_group,
    signal_name: s.signal_name
  }
  if (evidenceDetails === 'full') out.evidence = s.evidence
  else if (evidenceDetails === 'summary') {
    const ev: Record<string, unknown> = {}
    for (const k of kSummaryKeys) if (s.evidence[k] !== null) ev[k] = s.evidence[k]
    out.evidence = ev
  }
  return out
}

/** Renders an assessment at the requested detail levels, echoing the value as sent. */
export function render (a: Assessment, value: string, warnings: string[], params: RenderParams): Verdict {
  const picked = params.signalDetails === 'none' ? kNone : params.signalDetails === 'top' ? a.signals.slice(0, kTopSignals) : a.signals
  const signals: ThreatSignal[] = picked.length === 0 ? kNone as never[] : picked.map((s) => renderSignal(s, params.evidenceDetails))
  return {
    indicator: { type: a.type, value, normalized: a.normalized },
    risk: a.risk,
    signals,
    signal_count: signals.length,
    scores: a.scores,
    threat_context: a.threat_context,
    flags: a.flags,
    recommended_actions: a.recommended_actions,
    warnings
  }
}

/** Full scoring parameters. */
export interface ScoreParams extends RenderParams { profile: ScoringProfile }

/** Outcome of scoring a raw indicator: a verdict, or the reasons the value is not a valid indicator. */
export type ScoreResult =
  | { ok: true, verdict: Verdict }
  | { ok: false, type: IndicatorType | null, errors: string[], warnings: string[] }

/** Normalizes, assesses and renders one indicator as sent. */
export function score (value: unknown, type: unknown, params: ScoreParams, snap: Snapshot): ScoreResult {
  const n = normalize(value, type)
  if (!n.ok) return n
  const a = assess(n.indicator, params.profile, snap)
  return { ok: true, verdict: render(a, value as string, n.indicator.warnings, params) }
}
