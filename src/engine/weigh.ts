/**
 * Weighing, the second step of an assessment: each hit's signed weight before caps (profile weight, confidence,
 * decay, match attenuation, shared-infrastructure and known-good factors), the flags the hits set, one count per
 * upstream origin, and the group caps. Each function returns new values; none changes the hits it reads.
 */
import type { Snapshot } from './snapshot/snapshot.ts'
import type { SourceMeta } from './snapshot/source.ts'
import type { ScoringProfile } from './profiles.ts'
import type { Hit } from './hits.ts'
import type { NormalizedIndicator } from './types.ts'

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
/** Decay below which a listing is `stale`. */
const kStaleDecay = 0.25

/** Subgroups of the IANA special-purpose sources: one address falls in several nested ranges. */
const kSpecialSubgroups = new Set(['non_routable', 'documentation', 'protocol_assignment'])

/**
 * Of the special-purpose ranges holding an address, only the most specific counts, as in the IANA registries: a
 * more specific entry overrides the block around it (192.0.0.9/32, a globally reachable anycast address, sits in
 * 192.0.0.0/24, which is not globally reachable). Returns `hits` itself when there is nothing to drop.
 */
export function mostSpecificSpecial (hits: readonly Hit[], ind: NormalizedIndicator): readonly Hit[] {
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
export interface KnownGood {
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

/** The known-good context of an indicator with neither a popularity nor a cloud signal. */
const kNoKnownGood: KnownGood = Object.freeze({ popularity: 0, cloud: false, cloudHalfLife: 0, cloudFactor: 1, damping: 0, weak: false })
const kNoSubgroups: readonly string[] = Object.freeze([])

/**
 * The known-good context of an indicator (null when the profile has no known-good rules, so older profiles replay
 * unchanged), and its hits with each popularity hit's match attenuation and evidence set: the name itself (or
 * `www.` + name) counts fully, a deeper subdomain only `subdomainFactor`, because subdomains are often run by others
 * (user sites, hosted services) while the registrable owner is popular. The popularity hits are new objects; `hits`
 * is returned itself when it holds none.
 */
export function knownGoodContext (ind: NormalizedIndicator, profile: ScoringProfile, hits: readonly Hit[]): { known: KnownGood | null, hits: readonly Hit[] } {
  const kg = profile.knownGood
  if (kg === null) return { known: null, hits }
  let popularity = 0
  let cloud = false
  let any = false
  let out: Hit[] | null = null
  for (let i = 0; i < hits.length; i++) {
    const h = hits[i] as Hit
    if (h.src.direction === 'malicious') continue
    if (h.src.subgroup === 'popularity' && ind.type === 'domain') {
      any = true
      const rank = typeof h.extra?.rank === 'number' ? h.extra.rank : null
      const f = rank === null ? kg.popularity.unrankedFactor : Math.min(1, Math.max(0, 1 - Math.log10(rank) / Math.log10(kg.popularity.maxRank)))
      const name = ind.normalized
      const same = h.match === 'exact' || (name.startsWith('www.') && h.matched === name.slice(4))
      out ??= [...hits]
      out[i] = { ...h, attenuation: same ? 1 : kg.popularity.subdomainFactor, extra: { rank, popular_name: same, rank_factor: round4(f) } }
      if (same && f > popularity) popularity = f
    } else if (h.src.subgroup === 'cloud' && (ind.type === 'ip' || ind.type === 'ip_block')) {
      any = cloud = true
    }
  }
  // Most assessed indicators have neither: share one answer instead of counting sources.
  if (!any) return { known: kNoKnownGood, hits }
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
  return { known: { popularity, cloud, cloudHalfLife: kg.cloud.halfLifeDays, cloudFactor: kg.cloud.factor, damping: kg.popularity.damping, weak }, hits: out ?? hits }
}

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
export function originOf (src: SourceMeta): string {
  return src.origin ?? src.name
}

/** One weighed hit: its signed weight before caps (`raw`) and the terms its evidence shows. */
export interface Weighed {
  readonly hit: Hit
  readonly raw: number
  readonly decay: number
  readonly ageDays: number | null
  readonly halfLife: number
  readonly infra: number
  readonly weight: number
  /** Known-good factors by evidence key, null when none applies. */
  readonly factors: Readonly<Record<string, number>> | null
}

/** What weighing returns: the weighed hits (hits of weight 0 left out, but context) and the flags of all hits. */
export interface Weighing {
  weighed: Weighed[]
  /** Flags, sorted. */
  flags: string[]
}

/** Weighs the hits of an indicator (`known`: its known-good context, null under a profile without those rules). */
export function weigh (ind: NormalizedIndicator, profile: ScoringProfile, snap: Snapshot, hits: readonly Hit[], known: KnownGood | null): Weighing {
  const flags = new Set<string>()
  const sharedInfra = hits.some((h) => h.src.direction === 'safe' && (h.src.subgroup === 'cdn' || h.src.subgroup === 'public_resolver'))
  const maliciousSources = new Set<string>()
  const weighed: Weighed[] = []
  for (const h of hits) {
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
    const factors = known === null ? null : knownGoodFactors(h, known)
    let factor = 1
    if (factors !== null) for (const k in factors) factor *= factors[k] as number
    const sign = h.src.direction === 'malicious' ? 1 : -1
    weighed.push({ hit: h, raw: sign * weight * h.src.confidence * decay * h.attenuation * infra * factor, decay, ageDays, halfLife, infra, weight, factors })
    if (h.src.direction === 'malicious' && h.match !== 'lexical') {
      flags.add('listed')
      if (h.match !== 'exact') flags.add('inherited')
      if (decay < kStaleDecay) flags.add('stale')
      maliciousSources.add(originOf(h.src))
    }
  }
  if (maliciousSources.size >= 2) flags.add('multi_source')
  return { weighed, flags: [...flags].sort() }
}

/** Signed weights after counting each origin once (countOncePerOrigin). */
export interface OriginCount {
  /** Per weighed hit: its raw weight, or 0 when another listing of its origin counts instead. */
  raws: number[]
  /** Per weighed hit left at 0 that way: the name of the source whose listing counts; null when none was. */
  keptOf: Map<number, string> | null
}

/**
 * One upstream list seen through several feeds (the same origin) is one source: only its strongest listing of the
 * indicator adds to the score; the others are shown with contribution 0. `counted` false (a profile without trust
 * rules): every listing counts.
 */
export function countOncePerOrigin (weighed: readonly Weighed[], counted: boolean): OriginCount {
  const raws = weighed.map((w) => w.raw)
  if (!counted) return { raws, keptOf: null }
  let best: Map<string, number> | null = null
  let dropped: number[] | null = null
  for (let i = 0; i < weighed.length; i++) {
    const w = weighed[i] as Weighed
    if (w.raw <= 0 || w.hit.match === 'lexical') continue
    const origin = originOf(w.hit.src)
    const j = (best ??= new Map()).get(origin)
    if (j === undefined) {
      best.set(origin, i)
    } else if (w.raw > (weighed[j] as Weighed).raw) {
      best.set(origin, i)
      ;(dropped ??= []).push(j)
    } else {
      ;(dropped ??= []).push(i)
    }
  }
  if (dropped === null || best === null) return { raws, keptOf: null }
  const keptOf = new Map<number, string>()
  for (const i of dropped) {
    const w = weighed[i] as Weighed
    raws[i] = 0
    keptOf.set(i, (weighed[best.get(originOf(w.hit.src)) as number] as Weighed).hit.src.name)
  }
  return { raws, keptOf }
}

/** Group caps, per direction: the scale of each weighed hit that brings its group's sum down to the group's cap. */
export function groupCaps (weighed: readonly Weighed[], raws: readonly number[], profile: ScoringProfile): number[] {
  const sumsUp = new Map<string, number>()
  const sumsDown = new Map<string, number>()
  for (let i = 0; i < weighed.length; i++) {
    const raw = raws[i] as number
    const group = (weighed[i] as Weighed).hit.src.group
    const sums = raw > 0 ? sumsUp : sumsDown
    sums.set(group, (sums.get(group) ?? 0) + Math.abs(raw))
  }
  return weighed.map((w, i) => {
    const raw = raws[i] as number
    const cap = profile.groupCaps[w.hit.src.group] ?? Infinity
    const sum = (raw > 0 ? sumsUp : sumsDown).get(w.hit.src.group) as number
    return sum > cap ? cap / sum : 1
  })
}
