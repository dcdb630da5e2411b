/**
 * Scores one chunk of indicators against a snapshot and a cache shard, and encodes everything the
 * main thread needs as bytes: each result item in the response format, and each item's history record.
 * Scoring workers call it on decoded chunks; inline mode calls it directly on the main thread.
 */
import { LRUCache } from 'lru-cache'
import { Packr } from 'msgpackr'
import { assess, normalize, render, selectProfile, type Assessment, type Snapshot } from '../engine/index.ts'
import type { EvidenceDetails, IndicatorType, SignalDetails } from '../engine/types.ts'
import { ByteSink } from './byte-sink.ts'
import { fragmentOf, HistoryItems, itemFragment, kInvalidVerdictMembers } from './history-codec.ts'

/** One indicator as the main thread forwards it: [type, value, action_taken, action_source (normalized)]. */
export type ChunkItem = [unknown, unknown, string | null, string | null]

/** Parameters shared by every item of a request. */
export interface ChunkParams {
  mode: 'single' | 'bulk'
  format: 'json' | 'msgpack'
  scoringVersion: string | null
  signalDetails: SignalDetails
  evidenceDetails: EvidenceDetails
}

/** Bulk output: item fragments back to back, with end offsets, and the encoded history records (history-codec.ts). */
export interface BulkChunkOutput {
  body: Uint8Array
  ends: Uint32Array
  history: Uint8Array
  cacheHits: number
  invalid: number
}

/** Single output: the verdict object (or errors) and the encoded history record. */
export interface SingleChunkOutput {
  verdict: Record<string, unknown> | null
  errors: string[]
  warnings: string[]
  cacheHit: boolean
  history: Uint8Array
}

/**
 * What a cache shard holds per indicator: the assessment and, once the verdict has been asked for again, its rendered
 * bulk tails. A first lookup keeps no tails: most indicators of a bulk feed are never asked for twice, and every byte
 * an entry holds is copied by the garbage collector's young-generation passes before the entry settles in the old one.
 * (riskJson and scoresJson are kept from the first lookup: for an unlisted assessment they are the shared memo's text.)
 */
export interface CacheEntry {
  a: Assessment
  /** True once a lookup has found the entry: from then on its rendered text is kept. */
  hit: boolean
  /** JSON text of the bulk item members after `indicator`, per signal detail level (created when first kept). */
  json: Partial<Record<SignalDetails, string>> | null
  /** JSON text of the history record's verdict members (risk, scores, labels, label_count), per signal detail level. */
  hist: Partial<Record<SignalDetails, string>> | null
  /** JSON text of risk and scores, shared by the bulk item and the history record. */
  riskJson?: string
  scoresJson?: string
}

/** A shard cache, keyed by snapshot version, profile version, type and normalized value. */
export type ShardCache = LRUCache<string, CacheEntry>

/** Creates a cache shard holding up to `max` verdicts (0 disables caching). */
export function createShardCache (max: number): ShardCache | null {
  return max > 0 ? new LRUCache<string, CacheEntry>({ max }) : null
}

/** msgpack for clients: standard maps, no record extension (API.md). */
export const clientPackr = new Packr({ useRecords: false, variableMapSize: true })
/** msgpack between the service's own threads. */
export const threadPackr = new Packr()

const kTypes = new Set<string>(['ip', 'domain', 'ip_block', 'file_hash_sha256', 'asn'])

function typeAsSent (type: unknown): IndicatorType | null {
  return typeof type === 'string' && kTypes.has(type) ? type as IndicatorType : null
}

function labelsOf (a: Assessment | null, signalDetails: SignalDetails): Array<Record<string, unknown>> {
  if (a === null) return []
  const picked = signalDetails === 'none' ? [] : signalDetails === 'top' ? a.signals.slice(0, 3) : a.signals
  return picked.map((s) => ({ signal_id: s.signal_id, direction: s.direction, signal_group: s.signal_group, signal_subgroup: s.signal_subgroup, signal_name: s.signal_name, contribution: s.contribution }))
}

/** Scoring context of one thread: the snapshot it maps and its cache shard. */
export interface ScoringContext {
  snapshot: Snapshot
  cache: ShardCache | null
}

function lookup (ctx: ScoringContext, profileKey: string, type: IndicatorType, normalized: string, ind: Parameters<typeof assess>[0], profile: Parameters<typeof assess>[1]): { entry: CacheEntry, hit: boolean } {
  const key = `${ctx.snapshot.version}|${profileKey}|${type}|${normalized}`
  const cached = ctx.cache?.get(key)
  if (cached !== undefined) {
    cached.hit = true
    return { entry: cached, hit: true }
  }
  const entry: CacheEntry = { a: assess(ind, profile, ctx.snapshot), hit: false, json: null, hist: null }
  ctx.cache?.set(key, entry)
  return { entry, hit: false }
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

function riskJson (entry: CacheEntry): string {
  return (entry.riskJson ??= jsonOf(entry.a.risk))
}

function scoresJson (entry: CacheEntry): string {
  return (entry.scoresJson ??= jsonOf(entry.a.scores))
}

function bulkTail (entry: CacheEntry, signalDetails: SignalDetails): string {
  let tail = entry.json?.[signalDetails]
  if (tail === undefined) {
    const a = entry.a
    // Only signals need rendering, and only when some are asked for: signal_details none is the default.
    let signals = '[]'
    let count = 0
    if (signalDetails !== 'none' && a.signals.length > 0) {
      const v = render(a, '', [], { signalDetails, evidenceDetails: 'none' })
      signals = JSON.stringify(v.signals)
      count = v.signal_count
    }
    tail = `"risk":${riskJson(entry)},"signals":${signals},"signal_count":${count},` +
      `"scores":${scoresJson(entry)},"threat_context":${JSON.stringify(a.threat_context)},` +
      `"recommended_actions":${jsonOf(a.recommended_actions)}`
    if (entry.hit) (entry.json ??= {})[signalDetails] = tail
  }
  return tail
}

function historyMembers (entry: CacheEntry, signalDetails: SignalDetails): string {
  let members = entry.hist?.[signalDetails]
  if (members === undefined) {
    const labels = labelsOf(entry.a, signalDetails)
    members = `"risk":${riskJson(entry)},"scores":${scoresJson(entry)},` +
      `"labels":${JSON.stringify(labels)},"label_count":${labels.length}`
    if (entry.hit) (entry.hist ??= {})[signalDetails] = members
  }
  return members
}

/** History needs a string value: a non-string is recorded as its JSON text, a missing one as ''. */
function valueAsText (value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value) ?? ''
}

const kEmptyScores = { signal_groups: {}, signal_subgroups: {} }

/** Scores a bulk chunk. Items answer in chunk order; `ends[i]` is the end offset of item i in `body`. */
export function scoreBulkChunk (items: ChunkItem[], params: ChunkParams, ctx: ScoringContext): BulkChunkOutput {
  const { profile } = selectProfile(params.scoringVersion)
  const sink = new ByteSink()
  const ends = new Uint32Array(items.length)
  const history = new HistoryItems(items.length)
  let cacheHits = 0
  let invalid = 0
  for (let i = 0; i < items.length; i++) {
    const [type, value, actionTaken, actionSource] = items[i] as ChunkItem
    const n = normalize(value, type)
    const sentType = n.ok ? n.indicator.type : typeAsSent(type)
    if (!n.ok) {
      invalid++
      const indicator = { type: type === undefined ? null : type, value: value === undefined ? null : value }
      if (params.format === 'json') {
        sink.write(`{"indicator":${JSON.stringify(indicator)},"risk":null,"signals":[],"signal_count":0,` +
          '"scores":{"signal_groups":{},"signal_subgroups":{}},"threat_context":{},"recommended_actions":[]' +
          (n.warnings.length > 0 ? `,"warnings":${JSON.stringify(n.warnings)}` : '') + `,"errors":${JSON.stringify(n.errors)}}`)
      } else {
        const item: Record<string, unknown> = { indicator, risk: null, signals: [], signal_count: 0, scores: kEmptyScores, threat_context: {}, recommended_actions: [] }
        if (n.warnings.length > 0) item.warnings = n.warnings
        item.errors = n.errors
        sink.bytes(clientPackr.pack(item))
      }
      ends[i] = sink.len
      const text = valueAsText(value)
      history.add(sentType, text, null, itemFragment({ type: sentType, value: text, normalized: null }, kInvalidVerdictMembers, actionTaken, actionSource))
      continue
    }
    const ind = n.indicator
    const { entry, hit } = lookup(ctx, profile.version, ind.type, ind.normalized, ind, profile)
    if (hit) cacheHits++
    // The indicator as echoed, as JSON once: the bulk item and the history record both carry it.
    const sentJson = JSON.stringify({ type: ind.type, value, normalized: ind.normalized })
    if (params.format === 'json') {
      // Piece by piece: the cached tail is written as is, never copied into a concatenated string first.
      sink.write('{"indicator":')
      sink.write(sentJson)
      sink.write(',')
      sink.write(bulkTail(entry, params.signalDetails))
      sink.write(ind.warnings.length > 0 ? `,"warnings":${JSON.stringify(ind.warnings)}}` : '}')
    } else {
      const v = render(entry.a, value as string, ind.warnings, { signalDetails: params.signalDetails, evidenceDetails: 'none' })
      const item: Record<string, unknown> = {
        indicator: v.indicator, risk: v.risk, signals: v.signals, signal_count: v.signal_count, scores: v.scores, threat_context: v.threat_context, recommended_actions: v.recommended_actions
      }
      if (ind.warnings.length > 0) item.warnings = ind.warnings
      sink.bytes(clientPackr.pack(item))
    }
    ends[i] = sink.len
    history.add(ind.type, value as string, ind.normalized, fragmentOf(sentJson, historyMembers(entry, params.signalDetails), actionTaken, actionSource))
  }
  return { body: sink.take(), ends, history: history.encode(), cacheHits, invalid }
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
    history.add(sentType, text, null, itemFragment({ type: sentType, value: text, normalized: null }, kInvalidVerdictMembers, actionTaken, actionSource))
    return { verdict: null, errors: n.errors, warnings: n.warnings, cacheHit: false, history: history.encode() }
  }
  const ind = n.indicator
  const { entry, hit } = lookup(ctx, profile.version, ind.type, ind.normalized, ind, profile)
  const v = render(entry.a, value as string, ind.warnings, { signalDetails: params.signalDetails, evidenceDetails: params.evidenceDetails })
  history.add(ind.type, v.indicator.value, ind.normalized, itemFragment(v.indicator, historyMembers(entry, params.signalDetails), actionTaken, actionSource))
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
  return { verdict, errors: [], warnings: ind.warnings, cacheHit: hit, history: history.encode() }
}
