/**
 * Scores one chunk of indicators against a snapshot and a cache shard, and encodes everything the
 * main thread needs as bytes: each result item in the response format, and each item's history record.
 * Scoring workers call it on decoded chunks; inline mode calls it directly on the main thread.
 *
 * The loop here normalizes, counts and records history; the items are written by the writer of the chunk's kind
 * (chunk-writers.ts), into the scratch state of the context (chunk-scratch.ts).
 */
import { normalize, render, selectProfile } from '../engine/index.ts'
import { INDICATOR_TYPES, type EvidenceDetails, type IndicatorType, type SignalDetails } from '../engine/types.ts'
import type { AllowRule } from '../engine/index.ts'
import { HistoryItems } from '../history/codec.ts'
import { itemTail, kInvalidVerdictMembers, labelsOf, recordedString, verdictMembers } from '../history/record.ts'
import { VerdictCache } from './verdict-cache.ts'
import { clientPackr, invalidIndicator, invalidItemJson, invalidItemObject, wellFormed } from './bulk-item.ts'
import { scratchOf, type ScoringContext } from './chunk-scratch.ts'
import { allowlisted, writerOf } from './chunk-writers.ts'

export type { ScoringContext } from './chunk-scratch.ts'

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

/**
 * Position of a type in INDICATOR_TYPES (per-type counts). A switch: a keyed load from an object by five different
 * strings was 2% of a cold chunk's time (a line profile). test/pool/answer-writers.test.ts holds the counts to the list.
 */
function typeIndex (type: IndicatorType): number {
  switch (type) {
    case 'ip': return 0
    case 'domain': return 1
    case 'ip_block': return 2
    case 'file_hash_sha256': return 3
    case 'asn': return 4
  }
}

/**
 * Items in a row that ItemWriter.sentAsNormalized could not answer before it is asked about one item in kMissStride
 * only. On a cold item its lookup is the one the item's own path then takes (chunk-writers.ts Lookups), yet asking
 * about every item cost cold bulks about 3% more service CPU (started services, per-thread CPU, pairs of both orders;
 * docs/PERFORMANCE.md); with the pause, within the noise. A chunk of a writer without the path stops asking too.
 */
const kMissRun = 32
const kMissStride = 16

/** The type as sent when it is one of the five (a switch, as typeIndex: no keyed lookup per item); else null. */
export function givenType (type: unknown): IndicatorType | null {
  switch (type) {
    case 'ip': return 'ip'
    case 'domain': return 'domain'
    case 'ip_block': return 'ip_block'
    case 'file_hash_sha256': return 'file_hash_sha256'
    case 'asn': return 'asn'
    default: return null
  }
}

/**
 * The value an invalid item's record keeps: history needs a string, so a non-string is recorded as its JSON text, a
 * missing one as ''; one longer than a record holds is cut (recordedString).
 */
function valueAsText (value: unknown): string {
  return recordedString(typeof value === 'string' ? value : JSON.stringify(value) ?? '')
}

/** The type an invalid item's record keeps: the type as sent when it is a string (cut as values are), else null. */
function typeAsText (type: unknown): string | null {
  return typeof type === 'string' ? recordedString(type) : null
}

/**
 * Scores a bulk chunk. Items answer in chunk order; `ends[i]` is the end offset of item i in `body`. `spare`: the
 * buffer of an earlier chunk's body, merged and handed back (ScoringPool.recycle), which `body` then reuses if it
 * suits; `historySpare`: likewise for `history`, a part buffer the history writer has stored and handed back.
 */
export function scoreBulkChunk (items: ChunkItem[], params: ChunkParams, ctx: ScoringContext, spare?: ArrayBuffer, historySpare?: ArrayBuffer): BulkChunkOutput {
  const { profile } = selectProfile(params.scoringVersion)
  const scratch = scratchOf(ctx)
  const allow = scratch.matcherOf(params.allow)
  const writer = writerOf(scratch, params.format, params.signalDetails)
  scratch.begin()
  const sink = scratch.body
  const ends = new Uint32Array(items.length)
  const history = new HistoryItems(items.length, scratch.history, scratch.tails)
  let cacheHits = 0
  let invalid = 0
  const types = new Uint32Array(INDICATOR_TYPES.length)
  // Categories are a handful of names chosen by the engine (never by a caller), so the record stays small.
  const categories: Record<string, number> = Object.create(null) as Record<string, number>
  let missed = 0
  for (let i = 0; i < items.length; i++) {
    const [type, value, actionTaken, actionSource] = items[i] as ChunkItem
    // A value cached as sent, with its type, skips normalizing when its entry says it normalizes to itself
    // (ItemWriter.sentAsNormalized); a tenant allowlist's match needs the normalized indicator. After a run of
    // kMissRun items it could not answer (a cold chunk), it is asked about one item in kMissStride until one hits.
    const ask = allow === null && typeof value === 'string' && (missed < kMissRun || i % kMissStride === 0)
    const sent = ask ? givenType(type) : null
    let out = sent === null ? null : writer.sentAsNormalized?.(profile, sent, value as string) ?? null
    if (sent !== null) missed = out === null ? missed + 1 : 0
    let t: IndicatorType
    let normalized: string
    if (out !== null && sent !== null) {
      t = sent
      normalized = value as string
    } else {
      const n = normalize(value, type)
      if (!n.ok) {
        invalid++
        const indicator = invalidIndicator(type, value)
        if (params.format === 'json') sink.write(invalidItemJson(indicator, n.warnings, n.errors))
        else sink.bytes(clientPackr.pack(wellFormed(invalidItemObject(indicator, n.warnings, n.errors))))
        ends[i] = sink.len
        history.addVerdict(typeAsText(type), valueAsText(value), null, itemTail(kInvalidVerdictMembers, actionTaken, actionSource))
        continue
      }
      const ind = n.indicator
      t = ind.type
      normalized = ind.normalized
      out = writer.item(profile, ind, value, allow === null ? null : allow.match(ind))
    }
    const ti = typeIndex(t)
    types[ti] = (types[ti] as number) + 1
    ends[i] = sink.len
    if (out.hit) cacheHits++
    categories[out.category] = (categories[out.category] ?? 0) + 1
    // A valid value is a string. A facet's tail, when the item has no log-only fields, is found by the facet's number
    // (block.ts addVerdict).
    if (out.facet !== null && actionTaken === null && actionSource === null) {
      history.addVerdict(t, value as string, normalized, out.facet.tail, out.facet.id)
    } else {
      history.addVerdict(t, value as string, normalized, itemTail(out.members, actionTaken, actionSource))
    }
  }
  const out = { body: sink.take(spare), ends, history: history.encode(historySpare), cacheHits, invalid, types, categories }
  scratch.end()
  return out
}

/** Scores the single endpoint's one indicator. */
export function scoreSingle (item: ChunkItem, params: ChunkParams, ctx: ScoringContext): SingleChunkOutput {
  const { profile } = selectProfile(params.scoringVersion)
  const [type, value, actionTaken, actionSource] = item
  const n = normalize(value, type)
  const scratch = scratchOf(ctx)
  const history = scratch.single
  history.reset()
  if (!n.ok) {
    history.addVerdict(typeAsText(type) ?? n.type, valueAsText(value), null, itemTail(kInvalidVerdictMembers, actionTaken, actionSource))
    return { verdict: null, errors: n.errors, warnings: n.warnings, cacheHit: false, history: history.encode(), members: null }
  }
  const ind = n.indicator
  const rule = scratch.matcherOf(params.allow)?.match(ind) ?? null
  const { a, hit } = rule === null ? scratch.lookup(profile, ind) : { a: allowlisted(scratch, profile, ind, rule), hit: false }
  const v = render(a, value as string, ind.warnings, { signalDetails: params.signalDetails, evidenceDetails: params.evidenceDetails })
  const members = verdictMembers(scratch.jsonOf(a.risk), scratch.jsonOf(a.scores), labelsOf(a, params.signalDetails))
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
