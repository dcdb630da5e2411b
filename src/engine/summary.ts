/**
 * Summary, the last step of an assessment: the risk (score, strength, category, evidence saturation), the score
 * breakdown per group and subgroup, the recommended actions, and the listing summary of threat_context. What every
 * indicator no list names shares (its risk, empty scores, actions per type) is made once per profile and frozen.
 */
import type { ScoringProfile } from './profiles.ts'
import type { Hit } from './hits.ts'
import { dayToDate, type Listing } from './context.ts'
import { round2, type ScoredSignal } from './evidence.ts'
import { SATURATION_BANDS, type EvidenceSaturation, type IndicatorType, type ScoreEntry, type Strength, type Verdict } from './types.ts'

/** A recommended action. */
export interface Action { action: string, order: number }

function addEntry (table: Record<string, ScoreEntry>, key: string, s: ScoredSignal): void {
  const e = table[key] ?? (table[key] = { contribution: 0, signal_count: 0, malicious: 0, safe: 0 })
  e.contribution = round2(e.contribution + s.contribution)
  e.signal_count++
  if (s.direction === 'malicious') e.malicious++
  else e.safe++
}

/** Contributions and counts per signal group and subgroup, in the signals' order of first appearance. */
export function breakdown (signals: readonly ScoredSignal[]): Verdict['scores'] {
  const groups: Record<string, ScoreEntry> = {}
  const subgroups: Record<string, ScoreEntry> = {}
  for (const s of signals) {
    addEntry(groups, s.signal_group, s)
    addEntry(subgroups, s.signal_subgroup, s)
  }
  return { signal_groups: groups, signal_subgroups: subgroups }
}

/** The risk category of a score and its signals. */
export function categoryOf (score: number, profile: ScoringProfile, signals: readonly ScoredSignal[]): string {
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

/** The evidence saturation band of an evidence mass (sum of absolute weights before caps). */
export function saturationOf (mass: number, profile: ScoringProfile): EvidenceSaturation {
  let band = 0
  for (let i = 0; i < profile.saturation.length; i++) if (mass >= profile.saturation[i]!) band = i + 1
  return SATURATION_BANDS[band] as EvidenceSaturation
}

/** The strength of a score: how far it stands from the baseline. */
export function strengthOf (score: number, profile: ScoringProfile): Strength {
  const d = Math.abs(score - profile.baseline)
  const [m, s, v] = profile.strength
  return d >= v ? 'very_strong' : d >= s ? 'strong' : d >= m ? 'medium' : 'weak'
}

/** The recommended actions of a score, type and flags, in rule order. */
export function actionsOf (score: number, type: IndicatorType, flags: readonly string[], profile: ScoringProfile): Action[] {
  const out: Action[] = []
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

/** The listing summary of weighed hits: the sources that list it and that vouch for it, labels, first and last seen. */
export function listingOf (hits: readonly Hit[]): Listing {
  if (hits.length === 0) return { listedBy: [], knownGoodBy: [], labels: [], firstSeen: null, lastSeen: null }
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
  return { listedBy: [...listedBy].sort(), knownGoodBy: [...knownGoodBy].sort(), labels: [...labels].sort(), firstSeen: dayToDate(first), lastSeen: dayToDate(last) }
}

/** Frozen so that assessments can share them: JSON and msgpack read them, nothing writes them. */
export const kNone: readonly never[] = Object.freeze([])
const kNoScores: Verdict['scores'] = Object.freeze({ signal_groups: Object.freeze({}), signal_subgroups: Object.freeze({}) })

/** What every indicator of one type that no list names shares under a profile: frozen, the same objects every time. */
export interface UnlistedParts {
  readonly risk: Verdict['risk']
  readonly scores: Verdict['scores']
  readonly actions: readonly Action[]
}

const kUnlisted = new WeakMap<ScoringProfile, Map<IndicatorType, UnlistedParts>>()

/** The shared parts of an unlisted indicator of `type` under `profile` (made once, then the same objects). */
export function unlistedParts (profile: ScoringProfile, type: IndicatorType): UnlistedParts {
  let byType = kUnlisted.get(profile)
  if (byType === undefined) kUnlisted.set(profile, byType = new Map())
  let parts = byType.get(type)
  if (parts === undefined) {
    const first = byType.values().next().value
    const score = Math.max(0, Math.min(100, Math.round(profile.baseline)))
    const risk = first?.risk ?? Object.freeze({ score, strength: strengthOf(score, profile), category: categoryOf(score, profile, []), evidence_saturation: saturationOf(0, profile) })
    const actions = Object.freeze(actionsOf(risk.score, type, [], profile).map((a) => Object.freeze(a)))
    byType.set(type, parts = Object.freeze({ risk, scores: kNoScores, actions }))
  }
  return parts
}
