/**
 * The verdict: every piece of evidence the snapshot holds about an indicator, weighed by a profile, and explained.
 *
 * score = clamp(round(baseline + sum of signal contributions), 0, 100). Each signal's evidence carries its signed
 * contribution (after decay, attenuation and group caps), so the sum of the signals is the score, and the same
 * snapshot + profile + indicator always give the same bytes.
 *
 * An assessment runs in steps, each in its own module and none changing what it reads: collect (collect.ts: hits and
 * context facts), then, for an indicator some list names, weigh and count origins once (weigh.ts), group caps
 * (weigh.ts), trust scales (trust.ts), signals and their evidence (evidence.ts), summary (summary.ts). An indicator no
 * list names and no lexical finding flags stops after collection (the profile's shared unlisted parts). What an answer
 * at signal_details none shows besides the context facts depends only on what summaryKey names, so the chunk writers
 * write it once per key and the facts straight into the answer's bytes (docs/ARCHITECTURE.md, "The scoring path").
 */
import { normalize } from './normalize/index.ts'
import type { KeyPair } from './snapshot/hash.ts'
import type { Snapshot } from './snapshot/snapshot.ts'
import type { ScoringProfile } from './profiles.ts'
import { collect } from './collect.ts'
import { contextObject, ContextFacts, kNoListing, type Listing } from './context.ts'
import { round2, scoreSignals, type ScoredSignal } from './evidence.ts'
import { HitSet, type Hit, type MatchKind } from './hits.ts'
import { actionsOf, breakdown, categoryOf, kNone, listingOf, saturationOf, strengthOf, unlistedParts } from './summary.ts'
import { trustScales } from './trust.ts'
import { countOncePerOrigin, groupCaps, knownGoodContext, mostSpecificSpecial, weigh } from './weigh.ts'
import type { ByteSink } from '../bytes/byte-sink.ts'
import { INDICATOR_TYPES, type EvidenceDetails, type IndicatorType, type NormalizedIndicator, type SignalDetails, type ThreatSignal, type Verdict } from './types.ts'

export type { MatchKind } from './hits.ts'
export type { ScoredSignal } from './evidence.ts'
export { kParseOptions } from './collect.ts'

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

/**
 * What an answer at signal_details none shows of an assessment besides its context facts: risk, scores, actions and
 * the listing summary. Many indicators share them (every unlisted one of a type; every address of one special range;
 * every undated entry of one list), which Assessor.summaryKey names.
 */
export interface SharedParts {
  readonly risk: Verdict['risk']
  readonly scores: Verdict['scores']
  readonly actions: ReadonlyArray<{ action: string, order: number }>
  readonly listing: Listing
}

/**
 * A thread's assessment state, reused from indicator to indicator: collect() fills it (no allocation for an indicator
 * no list names), assessment() and shared() run the steps after collection on what it holds.
 */
export class Assessor {
  readonly snap: Snapshot
  /** The context facts of the indicator collected last. */
  readonly facts = new ContextFacts()
  private readonly hits = new HitSet()
  private readonly pair: KeyPair = { h1: 0, h2: 0 }
  private ind: NormalizedIndicator | null = null
  private profile: ScoringProfile | null = null

  constructor (snap: Snapshot) {
    this.snap = snap
  }

  /** Collects `ind`; true when no list names it and no lexical finding flags it (the profile's unlisted answer). */
  collect (ind: NormalizedIndicator, profile: ScoringProfile): boolean {
    collect(ind, profile, this.snap, this.facts, this.hits, this.pair)
    this.ind = ind
    this.profile = profile
    return this.hits.empty
  }

  /** The assessment of the indicator collected last. */
  assessment (): Assessment {
    const ind = this.ind as NormalizedIndicator
    const profile = this.profile as ScoringProfile
    if (this.hits.empty) return unlistedAssessment(ind, profile, this.snap, this.facts)
    const v = listedVerdict(ind, profile, this.snap, this.hits.all(), true)
    return {
      type: ind.type,
      normalized: ind.normalized,
      risk: v.risk,
      signals: v.signals,
      scores: v.scores,
      threat_context: contextObject(this.facts, v.listing, this.snap),
      flags: v.flags,
      recommended_actions: v.actions
    }
  }

  /** The shared parts of the indicator collected last (no signal explained: nothing of them shows at none). */
  shared (): SharedParts {
    const ind = this.ind as NormalizedIndicator
    const profile = this.profile as ScoringProfile
    if (this.hits.empty) {
      const parts = unlistedParts(profile, ind.type)
      return { risk: parts.risk, scores: parts.scores, actions: parts.actions, listing: kNoListing }
    }
    return listedVerdict(ind, profile, this.snap, this.hits.all(), false)
  }

  /**
   * Writes into `out` (emptied first) the key of everything shared() of the indicator collected last depends on
   * beyond the profile and the snapshot: its type and, for each hit in collection order, the source (a lexical one
   * by its subgroup), how it matched, its attenuation, dates, label, a popularity rank and whether it names the
   * indicator itself, and a containing block's prefix length (special ranges: the most specific counts). Not the
   * indicator's own value, which only evidence and signal names show. Two indicators with the same key under one
   * profile and snapshot have the same shared parts (test/engine/summary-key.test.ts). Bytes, so that making one
   * allocates nothing; every field has a fixed size or a length before it, so no two keys run together.
   */
  summaryKey (out: ByteSink): void {
    const ind = this.ind as NormalizedIndicator
    out.clear()
    out.byte(kTypeCodes[ind.type])
    const hits = this.hits.all()
    if (hits.length === 0) return
    out.byte(ind.ip?.version ?? 0)
    out.byte(ind.prefix ?? 0)
    const name = ind.normalized
    for (const h of hits) {
      writeU32(out, h.src.id + 1)
      if (h.src.id < 0) writeText(out, h.src.subgroup)
      out.byte(kMatchCodes[h.match])
      writeF64(out, h.attenuation)
      writeU32(out, h.firstDay)
      writeU32(out, h.lastDay)
      out.byte(h.match === 'supernet' ? prefixOf(h.matched) : 255)
      if (h.label === null) writeU32(out, 0xffffffff)
      else writeText(out, h.label)
      if (h.src.subgroup === 'popularity') {
        const rank = h.extra?.rank
        writeF64(out, typeof rank === 'number' ? rank : -1)
        out.byte(h.match === 'exact' || (name.startsWith('www.') && h.matched === name.slice(4)) ? 1 : 0)
      }
    }
  }
}

const kTypeCodes = Object.fromEntries(INDICATOR_TYPES.map((t, i) => [t, i])) as Record<IndicatorType, number>
const kMatchCodes: Record<MatchKind, number> = { exact: 0, parent_domain: 1, supernet: 2, asn: 3, range: 4, lexical: 5 }

function writeU32 (out: ByteSink, n: number): void {
  out.reserve(4)
  out.buf.writeUInt32LE(n >>> 0, out.len)
  out.len += 4
}

function writeF64 (out: ByteSink, n: number): void {
  out.reserve(8)
  out.buf.writeDoubleLE(n, out.len)
  out.len += 8
}

/** A string's UTF-8 bytes after their count. */
function writeText (out: ByteSink, s: string): void {
  const at = out.len
  writeU32(out, 0)
  out.write(s)
  out.buf.writeUInt32LE(out.len - at - 4, at)
}

/** The prefix length after the last `/` of a block's text (0-128), without slicing it. */
function prefixOf (block: string): number {
  let n = 0
  for (let i = block.lastIndexOf('/') + 1; i < block.length; i++) n = n * 10 + block.charCodeAt(i) - 48
  return n
}

/**
 * The collection state assess() reuses, per snapshot: scratch only (assess is synchronous and never re-entered, and
 * what it returns holds none of it), so that a call allocates what it returns and little else.
 */
const kAssessors = new WeakMap<Snapshot, Assessor>()

/** Weighs evidence into an assessment. Pure: the result depends only on the arguments. */
export function assess (ind: NormalizedIndicator, profile: ScoringProfile, snap: Snapshot): Assessment {
  let a = kAssessors.get(snap)
  if (a === undefined) kAssessors.set(snap, a = new Assessor(snap))
  a.collect(ind, profile)
  return a.assessment()
}

/** The assessment of an indicator no source lists and no lexical signal flags: most of any bulk. */
function unlistedAssessment (ind: NormalizedIndicator, profile: ScoringProfile, snap: Snapshot, facts: ContextFacts): Assessment {
  const parts = unlistedParts(profile, ind.type)
  return {
    type: ind.type,
    normalized: ind.normalized,
    risk: parts.risk,
    signals: kNone as never[],
    scores: parts.scores,
    threat_context: contextObject(facts, kNoListing, snap),
    flags: kNone as never[],
    recommended_actions: parts.actions as Assessment['recommended_actions']
  }
}

/**
 * The steps after collection, for an indicator some list names or a lexical finding flags (`explain` false: its
 * signals without evidence and names).
 */
function listedVerdict (ind: NormalizedIndicator, profile: ScoringProfile, snap: Snapshot, hits: readonly Hit[], explain: boolean): SharedParts & { signals: ScoredSignal[], flags: string[], actions: Assessment['recommended_actions'] } {
  const collected = ind.type === 'ip' || ind.type === 'ip_block' ? mostSpecificSpecial(hits, ind) : hits
  const { known, hits: all } = knownGoodContext(ind, profile, collected)
  const { weighed, flags } = weigh(ind, profile, snap, all, known)
  const origins = countOncePerOrigin(weighed, profile.trust !== null)
  const capScales = groupCaps(weighed, origins.raws, profile)
  const weighedHits = weighed.map((w) => w.hit)
  const trust = trustScales(ind, profile, weighedHits, origins.raws.map((raw, i) => raw * (capScales[i] as number)))
  const { signals, total, mass } = scoreSignals(weighed, origins, capScales, trust, explain)
  const score = Math.max(0, Math.min(100, Math.round(profile.baseline + round2(total))))
  return {
    risk: { score, strength: strengthOf(score, profile), category: categoryOf(score, profile, signals), evidence_saturation: saturationOf(mass, profile) },
    scores: breakdown(signals),
    listing: listingOf(weighedHits),
    signals,
    flags,
    actions: actionsOf(score, ind.type, flags, profile)
  }
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
