/**
 * Signals, the step after the trust scales: each weighed hit's final contribution, its name, and its evidence with
 * members in a fixed order. The standard members come first, always in kEvidenceKeys' order; a hit's own values and
 * the known-good factors follow, and never replace a standard member.
 */
import type { Hit } from './hits.ts'
import type { TrustScales } from './trust.ts'
import type { OriginCount, Weighed } from './weigh.ts'
import { dayToDate } from './context.ts'
import type { Direction } from './types.ts'

/** The evidence of a signal: the standard members in this order, then the hit's own (HitExtra) and factors. */
export interface Evidence {
  readonly source: string
  readonly source_kind: string
  readonly match: string
  readonly matched: string
  readonly label: string | null
  readonly contribution: number
  readonly weight: number
  readonly confidence: number
  readonly attenuation: number
  readonly shared_infrastructure_factor: number
  readonly decay: number
  readonly age_days: number | null
  readonly half_life_days: number
  readonly first_seen: string | null
  readonly last_seen: string | null
  readonly group_cap_scale: number
  readonly [extra: string]: unknown
}

/** The standard evidence members, in their order. */
export const kEvidenceKeys = ['source', 'source_kind', 'match', 'matched', 'label', 'contribution', 'weight', 'confidence', 'attenuation',
  'shared_infrastructure_factor', 'decay', 'age_days', 'half_life_days', 'first_seen', 'last_seen', 'group_cap_scale'] as const satisfies ReadonlyArray<keyof Evidence>
const kStandard: ReadonlySet<string> = new Set(kEvidenceKeys)

/** A weighed signal with its full evidence; the cacheable form. */
export interface ScoredSignal {
  signal_id: string
  direction: Direction
  signal_subgroup: string
  signal_group: string
  signal_name: string
  category: string
  contribution: number
  evidence: Readonly<Record<string, unknown>>
}

/** Rounds to 2 decimals, never -0 (which JSON cannot carry: the cache keeps verdicts as JSON). */
export function round2 (x: number): number {
  return Math.round(x * 100) / 100 + 0
}

/** Adds `extra`'s members to `ev` after the standard ones; a standard member is never replaced. */
function addExtra (ev: Record<string, unknown>, extra: Readonly<Record<string, unknown>> | null | undefined): void {
  if (extra === null || extra === undefined) return
  for (const k in extra) if (!kStandard.has(k)) ev[k] = extra[k]
}

/** The evidence of a signal whose evidence was not asked for (scoreSignals with `explain` false). */
const kNoEvidence: Readonly<Record<string, unknown>> = Object.freeze({})

/**
 * The signals of the weighed hits, strongest first (ties by id), with the score's raw total and the evidence mass.
 * `explain` false leaves out what only a rendered signal shows (its evidence and name): what a bulk answer at
 * signal_details none needs is the rest.
 */
export function scoreSignals (weighed: readonly Weighed[], origins: OriginCount, capScales: readonly number[], trust: TrustScales | null, explain = true): { signals: ScoredSignal[], total: number, mass: number } {
  let mass = 0
  let total = 0
  const signals: ScoredSignal[] = []
  for (let i = 0; i < weighed.length; i++) {
    const w = weighed[i] as Weighed
    const { hit } = w
    const raw = origins.raws[i] as number
    const capScale = capScales[i] as number
    const contribution = round2(raw * capScale * (trust === null ? 1 : (trust.scales[i] as number)))
    mass += Math.abs(raw)
    total += contribution
    const signalId = hit.match === 'lexical' ? `lexical:${hit.src.subgroup}` : `${hit.src.name}:${hit.match}`
    if (!explain) {
      signals.push({ signal_id: signalId, direction: hit.src.direction, signal_subgroup: hit.src.subgroup, signal_group: hit.src.group, signal_name: '', category: hit.src.category, contribution, evidence: kNoEvidence })
      continue
    }
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
      group_cap_scale: Math.round(capScale * 10000) / 10000
    } satisfies Evidence
    addExtra(evidence, hit.extra)
    addExtra(evidence, w.factors)
    const keptOf = origins.keptOf?.get(i)
    if (keptOf !== undefined) evidence.same_origin_as = keptOf
    if (trust !== null) {
      evidence.context_only = trust.context[i] as boolean
      evidence.corroboration_scale = Math.round((trust.scales[i] as number) * 10000) / 10000
      evidence.independent_sources = trust.sources
    }
    signals.push({
      signal_id: signalId,
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
  return { signals, total, mass }
}

/** The human-readable name of a hit's signal. */
export function signalName (h: Hit): string {
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
