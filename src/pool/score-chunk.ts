/**
 * Scores one chunk of indicators against a snapshot and a cache shard, and encodes everything the
 * main thread needs as bytes: each result item in the response format, and each item's history record.
 * Scoring workers call it on decoded chunks; inline mode calls it directly on the main thread.
 */
import { Packr } from 'msgpackr'
import { AllowMatcher, allowlistedAssessment, assess, normalize, render, selectProfile, type AllowRule, type Assessment, type ScoringProfile, type Snapshot } from '../engine/index.ts'
import { INDICATOR_TYPES, type EvidenceDetails, type IndicatorType, type NormalizedIndicator, type SignalDetails } from '../engine/types.ts'
import { ByteSink } from '../bytes/byte-sink.ts'
import { HistoryItems } from '../history/codec.ts'
import { itemTail, kInvalidVerdictMembers, labelsOf, verdictMembers } from '../history/record.ts'
import { hash30, VerdictCache, verdictHead, type CachedVerdict, type VerdictTexts } from './verdict-cache.ts'
import { Facets, kNoFacet, type Facet } from './facets.ts'
import {
  clientPackr, invalidIndicator, invalidItemJson, invalidItemObject, itemEnd, itemHead, itemObject, kItemEndByte, noneTail,
  packedWarnings, tailRest, verdictTail, writeItemHead, writePackedItemHead, writePackedNoneTail as writePackedTailOf
} from './bulk-item.ts'

/** One indicator as the main thread forwards it: [type, value, action_taken, action_source (normalized)]. */
export type ChunkItem = [unknown, unknown, string | null, string | null]

/** Parameters shared by every item of a request. */
export interface ChunkParams {
  mode: 'single' | 'bulk'
  format: 'json' | 'msgpack'
  scoringVersion: string | null
  signalDetails: SignalDetails
  evidenceDetails: EvidenceDetails
  /**
   * The requesting tenant's active allowlist entries, or absent when it has none. `key` names the tenant and the
   * version of its list: a thread compiles each key once. Allowlisted verdicts never enter the shared cache.
   */
  allow?: { key: string, rules: AllowRule[] }
}

/** Bulk output: items (bulk-item.ts) back to back, with end offsets, and the encoded history records (history/block.ts). */
export interface BulkChunkOutput {
  body: Uint8Array
  ends: Uint32Array
  history: Uint8Array
  cacheHits: number
  invalid: number
  /** Valid indicators per type, in INDICATOR_TYPES order (metrics). */
  types: Uint32Array
  /** Valid indicators per risk category (metrics). */
  categories: Record<string, number>
}

/** Single output: the verdict object (or errors) and the encoded history record. */
export interface SingleChunkOutput {
  verdict: Record<string, unknown> | null
  errors: string[]
  warnings: string[]
  cacheHit: boolean
  history: Uint8Array
  /** The history record's verdict members (record.ts), null for an invalid indicator. */
  members: string | null
}

/** A shard cache: verdicts keyed by snapshot version, profile version, type and normalized value, off the heap. */
export type ShardCache = VerdictCache

/** Creates a cache shard holding up to `max` verdicts (0 disables caching). */
export function createShardCache (max: number): ShardCache | null {
  return max > 0 ? new VerdictCache(max) : null
}

/** msgpack between the service's own threads. */
export const threadPackr = new Packr()

const kTypes: ReadonlySet<string> = new Set(INDICATOR_TYPES)
/** Position of each type in INDICATOR_TYPES (per-type counts). */
const kTypeIndex = Object.fromEntries(INDICATOR_TYPES.map((t, i) => [t, i])) as Record<IndicatorType, number>

function typeAsSent (type: unknown): IndicatorType | null {
  return typeof type === 'string' && kTypes.has(type) ? type as IndicatorType : null
}

/** Scoring context of one thread: the snapshot it maps and its cache shard. */
export interface ScoringContext {
  snapshot: Snapshot
  cache: ShardCache | null
}

function cacheKey (ctx: ScoringContext, profileKey: string, type: IndicatorType, normalized: string): string {
  return `${ctx.snapshot.version}|${profileKey}|${type}|${normalized}`
}

/** Compiled allowlists of recent tenant versions (a few per thread; a new version has a new key). */
const kMatchers = new Map<string, AllowMatcher>()
const kMaxMatchers = 64

function matcherOf (allow: ChunkParams['allow']): AllowMatcher | null {
  if (allow === undefined) return null
  let m = kMatchers.get(allow.key)
  if (m === undefined) {
    if (kMatchers.size >= kMaxMatchers) kMatchers.delete(kMatchers.keys().next().value as string)
    kMatchers.set(allow.key, m = new AllowMatcher(allow.rules))
  }
  return m
}

/** The allowlisted assessment of an indicator covered by a tenant entry: assessed now, never cached. */
function overridden (ctx: ScoringContext, profile: ScoringProfile, ind: NormalizedIndicator, rule: AllowRule): Assessment {
  return allowlistedAssessment(ind, rule, assess(ind, profile, ctx.snapshot))
}

/** The assessment of an indicator, from the cache or assessed now (and then cached). */
function lookup (ctx: ScoringContext, profile: ScoringProfile, ind: NormalizedIndicator): { a: Assessment, hit: boolean } {
  const key = cacheKey(ctx, profile.version, ind.type, ind.normalized)
  const h = ctx.cache === null ? 0 : hash30(key)
  const cached = ctx.cache?.get(key, h)
  if (cached?.hasAssessment === true) return { a: cached.assessment(), hit: true }
  const a = assess(ind, profile, ctx.snapshot)
  ctx.cache?.set(key, textsOf(a), h)
  return { a, hit: false }
}

/**
 * JSON text of frozen values, by identity. What unlisted assessments share (risk, empty scores, actions) the engine
 * freezes deeply (test/engine/score.test.ts holds it to that), so its text never changes; an unfrozen part is an
 * assessment's own and is written each time.
 */
const kSharedJson = new WeakMap<object, string>()

/** JSON text of part of an assessment, from the memo when the part is shared (frozen). */
function jsonOf (value: object): string {
  if (!Object.isFrozen(value)) return JSON.stringify(value)
  let text = kSharedJson.get(value)
  if (text === undefined) kSharedJson.set(value, text = JSON.stringify(value))
  return text
}

/** This thread's verdict facets (facets.ts): shared by every cache and context of the thread. */
const kFacets = new Facets()

/**
 * The texts a verdict is cached as (verdict-cache.ts): the bulk tail at signal_details none is one run of them. With
 * the number of its facet, whose texts they share. `forms`: what the entry is to hold (verdict-cache.ts): the
 * assessment (head and JSON tail), the JSON tail, or only what the history record needs (risk and scores; the caller
 * adds the packed tail).
 */
function textsOf (a: Assessment, forms?: 'assessment' | 'tail'): VerdictTexts & { rest: string }
function textsOf (a: Assessment, forms: 'packed'): VerdictTexts
function textsOf (a: Assessment, forms: 'assessment' | 'tail' | 'packed' = 'assessment'): VerdictTexts {
  const risk = jsonOf(a.risk)
  const scores = jsonOf(a.scores)
  return {
    head: forms === 'assessment' ? verdictHead(a.type, JSON.stringify(a.normalized), jsonOf(a.flags), jsonOf(a.signals)) : null,
    risk,
    scores,
    rest: forms === 'packed' ? null : tailRest(JSON.stringify(a.threat_context), jsonOf(a.recommended_actions)),
    facet: kFacets.of(a, risk, scores)?.id ?? kNoFacet
  }
}

/** The bulk item members after `indicator` at a signal detail level other than none. */
function bulkTail (a: Assessment, signalDetails: SignalDetails): string {
  let signals = '[]'
  let count = 0
  if (a.signals.length > 0) {
    const v = render(a, '', [], { signalDetails, evidenceDetails: 'none' })
    signals = JSON.stringify(v.signals)
    count = v.signal_count
  }
  return verdictTail(jsonOf(a.risk), signals, count, jsonOf(a.scores), tailRest(JSON.stringify(a.threat_context), jsonOf(a.recommended_actions)))
}

const kNoLabels: Array<Record<string, unknown>> = []

/** The history record's verdict members (record.ts). */
function historyMembersOf (a: Assessment, signalDetails: SignalDetails): string {
  return verdictMembers(jsonOf(a.risk), jsonOf(a.scores), labelsOf(a, signalDetails))
}

/** What writeNoneTail tells of the verdict it wrote (one object per thread, overwritten by each call). */
interface NoneTail {
  hit: boolean
  /** The verdict's facet, or null when it has none (then `members` and `category` are made for it). */
  facet: Facet | null
  /** The history record's verdict members. */
  members: string
  category: string
}
const kNoneTail: NoneTail = { hit: false, facet: null, members: '', category: '' }

/**
 * Writes the bulk item members after `indicator` at signal_details none, and tells the history record's verdict
 * members and the risk category: from the cache's bytes and the entry's facet on a hit (no parsing, no new strings),
 * else assessed and cached. The only path a cold bulk takes. The result is overwritten by the next call.
 */
function writeNoneTail (ctx: ScoringContext, profile: ScoringProfile, ind: NormalizedIndicator, sink: ByteSink): NoneTail {
  const out = kNoneTail
  const key = cacheKey(ctx, profile.version, ind.type, ind.normalized)
  const cache = ctx.cache
  const h = cache === null ? 0 : hash30(key)
  const cached = cache?.get(key, h)
  if (cached?.hasTail === true) {
    sink.copy(cached.ring, cached.tailStart, cached.tailEnd)
    out.hit = true
    return cachedOut(out, cached)
  }
  const t = textsOf(assess(ind, profile, ctx.snapshot), 'tail')
  const stored = cache?.set(key, t, h) ?? null
  if (stored !== null) {
    sink.copy(stored.ring, stored.tailStart, stored.tailEnd)
  } else {
    sink.write(noneTail(t.risk, t.scores, t.rest))
  }
  return missOut(out, t)
}

/**
 * writeNoneTail for MessagePack items: copies the entry's packed none tail on a hit; packs it on a miss, or on a hit of
 * an entry a JSON call stored (then stores the entry again with it), so that each verdict is packed once. A miss
 * stores the packed tail only (verdict-cache.ts).
 */
function writePackedNoneTail (ctx: ScoringContext, profile: ScoringProfile, ind: NormalizedIndicator, sink: ByteSink): NoneTail {
  const out = kNoneTail
  const key = cacheKey(ctx, profile.version, ind.type, ind.normalized)
  const cache = ctx.cache
  const h = cache === null ? 0 : hash30(key)
  const cached = cache?.get(key, h)
  let t: VerdictTexts
  if (cached !== undefined) {
    out.hit = true
    if (cached.packedEnd > cached.packedStart) {
      sink.copy(cached.ring, cached.packedStart, cached.packedEnd)
    } else {
      // An entry without the packed tail holds the JSON tail (verdict-cache.ts).
      const a = cached.tailMembers()
      t = cached.texts()
      const start = sink.len
      writePackedTailOf(sink, a.risk, a.scores, a.threat_context, a.recommended_actions)
      // A view of what was just written: set() copies it into the ring before the sink is written again.
      t.packed = sink.buf.subarray(start, sink.len)
      cache?.set(key, t, h)
    }
    return cachedOut(out, cached)
  }
  const a = assess(ind, profile, ctx.snapshot)
  t = textsOf(a, 'packed')
  const start = sink.len
  writePackedTailOf(sink, a.risk, a.scores, a.threat_context, a.recommended_actions)
  t.packed = sink.buf.subarray(start, sink.len)
  cache?.set(key, t, h)
  return missOut(out, t)
}

/** The history members and category of a verdict just assessed: its facet's, or made from its texts. */
function missOut (out: NoneTail, t: VerdictTexts): NoneTail {
  out.hit = false
  const f = kFacets.byId(t.facet ?? kNoFacet)
  if (f !== undefined) return facetOut(out, f)
  out.facet = null
  out.members = verdictMembers(t.risk, t.scores, kNoLabels)
  out.category = categoryOfRiskJson(t.risk)
  return out
}

/** The history members and category of a cache hit: its facet's, or made from its risk and scores texts. */
function cachedOut (out: NoneTail, cached: CachedVerdict): NoneTail {
  const f = kFacets.byId(cached.facet)
  if (f !== undefined) return facetOut(out, f)
  const risk = cached.riskJson()
  out.facet = null
  out.members = verdictMembers(risk, cached.scoresJson(), kNoLabels)
  out.category = categoryOfRiskJson(risk)
  return out
}

function facetOut (out: NoneTail, f: Facet): NoneTail {
  out.facet = f
  out.members = f.members
  out.category = f.category
  return out
}

/** risk.category read from the risk's JSON text (a cache hit has only the text); metrics count verdicts by it. */
function categoryOfRiskJson (risk: string): string {
  const at = risk.indexOf(kCategoryMember)
  if (at === -1) return 'unknown'
  const start = at + kCategoryMember.length
  return risk.slice(start, risk.indexOf('"', start))
}
const kCategoryMember = '"category":"'

/** Adds one to a category's count. */
function countCategory (counts: Record<string, number>, category: string): void {
  counts[category] = (counts[category] ?? 0) + 1
}

/** The indicator as echoed: JSON.stringify of {type, value, normalized}, keys in that order. */
function sentJson (ind: NormalizedIndicator, value: unknown): string {
  return JSON.stringify({ type: ind.type, value, normalized: ind.normalized })
}

/** History needs a string value: a non-string is recorded as its JSON text, a missing one as ''. */
function valueAsText (value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value) ?? ''
}

/**
 * The thread's scratch sinks for a bulk chunk's items and history text (the items' strings, and the tails), reused
 * from chunk to chunk (scoring is synchronous, so one chunk uses them at a time). A fresh sink per chunk grew by
 * doubling to the chunk's size, about 16 MB of buffers for a 5,000-item chunk's 3 MB of items and 2 MB of history
 * (history part format 1); buffers outside the heap count toward V8's old-generation limit, so that churn set off a
 * full mark-compact every few bulks in every scoring thread. Now a chunk allocates only its exactly sized outputs. A
 * sink that grew past kKeepBytes (a chunk of tens of thousands of items) is replaced by a small one after use, so a
 * thread keeps at most 3 x kKeepBytes of scratch.
 */
const kKeepBytes = 16 << 20
const kBodySink = new ByteSink(1 << 20)
const kHistorySink = new ByteSink(1 << 20)
const kTailSink = new ByteSink(64 * 1024)

/**
 * Scores a bulk chunk. Items answer in chunk order; `ends[i]` is the end offset of item i in `body`. `spare`: the
 * buffer of an earlier chunk's body, merged and handed back (ScoringPool.recycle), which `body` then reuses if it
 * suits; `historySpare`: likewise for `history`, a part buffer the history writer has stored and handed back.
 */
export function scoreBulkChunk (items: ChunkItem[], params: ChunkParams, ctx: ScoringContext, spare?: ArrayBuffer, historySpare?: ArrayBuffer): BulkChunkOutput {
  const { profile } = selectProfile(params.scoringVersion)
  const allow = matcherOf(params.allow)
  const sink = kBodySink
  sink.clear()
  kHistorySink.clear()
  kTailSink.clear()
  const ends = new Uint32Array(items.length)
  const history = new HistoryItems(items.length, kHistorySink, kTailSink)
  let cacheHits = 0
  let invalid = 0
  const types = new Uint32Array(INDICATOR_TYPES.length)
  // Categories are a handful of names chosen by the engine (never by a caller), so the record stays small.
  const categories: Record<string, number> = Object.create(null) as Record<string, number>
  for (let i = 0; i < items.length; i++) {
    const [type, value, actionTaken, actionSource] = items[i] as ChunkItem
    const n = normalize(value, type)
    const sentType = n.ok ? n.indicator.type : typeAsSent(type)
    if (!n.ok) {
      invalid++
      const indicator = invalidIndicator(type, value)
      if (params.format === 'json') sink.write(invalidItemJson(indicator, n.warnings, n.errors))
      else sink.bytes(clientPackr.pack(invalidItemObject(indicator, n.warnings, n.errors)))
      ends[i] = sink.len
      const text = valueAsText(value)
      history.addVerdict(sentType, text, null, itemTail(kInvalidVerdictMembers, actionTaken, actionSource))
      continue
    }
    const ind = n.indicator
    types[kTypeIndex[ind.type]] = (types[kTypeIndex[ind.type]] as number) + 1
    let members: string
    const rule = allow === null ? null : allow.match(ind)
    if (rule !== null && params.format === 'json' && params.signalDetails === 'none') {
      // Allowlisted for this tenant: assessed now, never read from or written to the shared cache.
      const t = textsOf(overridden(ctx, profile, ind, rule), 'tail')
      sink.write(itemHead(sentJson(ind, value)) + noneTail(t.risk, t.scores, t.rest) + itemEnd(ind.warnings))
      members = verdictMembers(t.risk, t.scores, kNoLabels)
      countCategory(categories, 'allowlisted')
    } else if (params.signalDetails === 'none' && rule === null && (params.format === 'json' || typeof value === 'string')) {
      let out: NoneTail
      if (params.format === 'json') {
        if (typeof value === 'string') writeItemHead(sink, ind.type, value, ind.normalized)
        else sink.write(itemHead(sentJson(ind, value)))
        out = writeNoneTail(ctx, profile, ind, sink)
        if (ind.warnings.length > 0) sink.write(itemEnd(ind.warnings))
        else sink.byte(kItemEndByte)
      } else {
        writePackedItemHead(sink, ind.type, value as string, ind.normalized, ind.warnings.length > 0)
        out = writePackedNoneTail(ctx, profile, ind, sink)
        if (ind.warnings.length > 0) sink.bytes(packedWarnings(ind.warnings))
      }
      if (out.hit) cacheHits++
      countCategory(categories, out.category)
      ends[i] = sink.len
      // A facet's tail, when the item has no log-only fields, is found by the facet's number (block.ts addVerdict).
      if (out.facet !== null && actionTaken === null && actionSource === null) {
        history.addVerdict(ind.type, value as string, ind.normalized, out.facet.tail, out.facet.id)
      } else {
        history.addVerdict(ind.type, value as string, ind.normalized, itemTail(out.members, actionTaken, actionSource))
      }
      continue
    } else if (params.format === 'json') {
      const { a, hit } = rule === null ? lookup(ctx, profile, ind) : { a: overridden(ctx, profile, ind, rule), hit: false }
      if (hit) cacheHits++
      members = historyMembersOf(a, params.signalDetails)
      countCategory(categories, a.risk.category)
      sink.write(itemHead(sentJson(ind, value)) + bulkTail(a, params.signalDetails) + itemEnd(ind.warnings))
    } else {
      const { a, hit } = rule === null ? lookup(ctx, profile, ind) : { a: overridden(ctx, profile, ind, rule), hit: false }
      if (hit) cacheHits++
      members = historyMembersOf(a, params.signalDetails)
      countCategory(categories, a.risk.category)
      const v = render(a, value as string, ind.warnings, { signalDetails: params.signalDetails, evidenceDetails: 'none' })
      sink.bytes(clientPackr.pack(itemObject(v, ind.warnings)))
    }
    ends[i] = sink.len
    // A valid value is a string.
    history.addVerdict(ind.type, value as string, ind.normalized, itemTail(members, actionTaken, actionSource))
  }
  const out = { body: sink.take(spare), ends, history: history.encode(historySpare), cacheHits, invalid, types, categories }
  sink.shrink(kKeepBytes)
  kHistorySink.shrink(kKeepBytes)
  kTailSink.shrink(kKeepBytes)
  return out
}

/** Scores the single endpoint's one indicator. */
export function scoreSingle (item: ChunkItem, params: ChunkParams, ctx: ScoringContext): SingleChunkOutput {
  const { profile } = selectProfile(params.scoringVersion)
  const [type, value, actionTaken, actionSource] = item
  const n = normalize(value, type)
  const history = new HistoryItems()
  if (!n.ok) {
    const sentType = typeAsSent(type) ?? n.type
    const text = valueAsText(value)
    history.addVerdict(sentType, text, null, itemTail(kInvalidVerdictMembers, actionTaken, actionSource))
    return { verdict: null, errors: n.errors, warnings: n.warnings, cacheHit: false, history: history.encode(), members: null }
  }
  const ind = n.indicator
  const rule = matcherOf(params.allow)?.match(ind) ?? null
  const { a, hit } = rule === null ? lookup(ctx, profile, ind) : { a: overridden(ctx, profile, ind, rule), hit: false }
  const v = render(a, value as string, ind.warnings, { signalDetails: params.signalDetails, evidenceDetails: params.evidenceDetails })
  const members = historyMembersOf(a, params.signalDetails)
  history.addVerdict(ind.type, v.indicator.value, ind.normalized, itemTail(members, actionTaken, actionSource))
  const verdict: Record<string, unknown> = {
    indicator: v.indicator,
    risk: v.risk,
    signals: v.signals,
    signal_count: v.signal_count,
    scores: v.scores,
    threat_context: v.threat_context,
    flags: v.flags,
    recommended_actions: v.recommended_actions
  }
  return { verdict, errors: [], warnings: ind.warnings, cacheHit: hit, history: history.encode(), members }
}
