/**
 * The orchestration of a verdict request, one function per mode: admit -> lease the pool -> (chunk) -> dispatch ->
 * merge -> record history -> release. The HTTP routes parse, authenticate and validate, then call these.
 *
 * Order matters: the pool is leased after admission (a reload while a request waits for its quota must not hand it
 * a pool that is being retired), and released only when the answer's bytes are ready (the old pool closes after its
 * last lease). A request whose scoring or history hand-off fails counts nothing: its quota is refunded.
 */
import { randomUUID } from 'node:crypto'
import { INDICATOR_TYPES, selectProfile, type EvidenceDetails, type SignalDetails } from '../engine/index.ts'
import { InvalidIndicatorError, OverloadedError, ScoringFailedError } from '../errors.ts'
import type { HistoryEnvelope, HistorySink } from '../history/types.ts'
import type { IntelService } from '../pool/intel-service.ts'
import type { BulkChunkOutput, ChunkParams } from '../pool/score-chunk.ts'
import type { ApiKeyRecord } from '../store/index.ts'
import type { Admission, Ticket } from './admission.ts'
import type { TenantAllowlists } from './allowlist.ts'
import { chunkIndicators, type BulkIndicator, type Chunks } from './chunk.ts'
import { AnswerBuffers, csvPieces, mergeJson, mergeMsgpack, mergeNdjson } from './merge.ts'

/** Where errors of a request are logged (the request's logger). */
export interface RequestLog { error: (obj: object, msg: string) => void, warn: (obj: object, msg: string) => void }

/** Told of every answered request's indicators (metrics). */
export interface VerdictObserver {
  /** `types[i]` counts the valid indicators of INDICATOR_TYPES[i]; `categories` the valid ones per risk category. */
  scored: (mode: 'single' | 'bulk', count: number, cacheHits: number, invalid: number, types: ArrayLike<number>, categories: Readonly<Record<string, number>>) => void
}

/** What the orchestration needs; one per app. */
export interface VerdictDeps {
  intel: IntelService
  history: HistorySink
  admission: Admission
  answers: AnswerBuffers
  /** Tenant allowlists: a tenant's active entries travel with its chunks to the scoring threads. */
  allowlists: TenantAllowlists
  /** engine_version for a scoring profile. */
  engineVersion: (profileVersion: string) => string
  observer?: VerdictObserver
}

/** The request-level history fields the caller fills in (who asked, how). */
export type EnvelopeOf = (fields: Omit<HistoryEnvelope, 'request_id' | 'auth_type' | 'tenant' | 'apikey' | 'user_id'>) => HistoryEnvelope

/**
 * Per-type counts of a single verdict (one 1, or none for an invalid indicator), made once per type: observers read
 * them and never keep or change them.
 */
const kTypeCounts = new Map<string | null, Uint32Array>([null, ...INDICATOR_TYPES].map((type) => {
  const types = new Uint32Array(INDICATOR_TYPES.length)
  const i = type === null ? -1 : (INDICATOR_TYPES as readonly unknown[]).indexOf(type)
  if (i >= 0) types[i] = 1
  return [type, types]
}))
const kNoTypes = kTypeCounts.get(null) as Uint32Array

/** `{[category]: 1}` per risk category a single verdict counts (the engine's few names), made once each. */
const kOneOfCategory = new Map<string, Readonly<Record<string, number>>>()
const kNoCategory: Readonly<Record<string, number>> = Object.freeze({})
function oneOfCategory (category: string | null): Readonly<Record<string, number>> {
  if (category === null) return kNoCategory
  let c = kOneOfCategory.get(category)
  if (c === undefined) {
    c = Object.freeze({ [category]: 1 })
    if (kOneOfCategory.size < 64) kOneOfCategory.set(category, c)
  }
  return c
}

/**
 * Parameters of single calls without a tenant allowlist, per format and detail levels, made once each (scoring reads
 * them and never changes them); a call with an allowlist gets its own.
 */
const kSingleParams = new Map<string, ChunkParams>()
function singleParams (format: 'json' | 'msgpack', signalDetails: SignalDetails, evidenceDetails: EvidenceDetails): ChunkParams {
  const key = `${format}|${signalDetails}|${evidenceDetails}`
  let p = kSingleParams.get(key)
  if (p === undefined) {
    p = Object.freeze({ mode: 'single', format, scoringVersion: null, signalDetails, evidenceDetails }) as ChunkParams
    kSingleParams.set(key, p)
  }
  return p
}

/**
 * The JSON text of a single answer's meta, members in the order of the object form (answerSingle): `head` holds the
 * members fixed for a pool and detail levels (engine_version, data_timestamp), the rest is per call.
 */
function metaJson (engineVersion: string, dataTimestamp: string, cacheHit: boolean, queryTimeMs: number, requestId: string, warnings: readonly string[], signalDetails: string, evidenceDetails: string): string {
  return `{"engine_version":${JSON.stringify(engineVersion)},"data_timestamp":${JSON.stringify(dataTimestamp)},"cache_hit":${cacheHit},` +
    `"query_time_ms":${queryTimeMs},"request_id":${JSON.stringify(requestId)},"warnings":${warnings.length === 0 ? '[]' : JSON.stringify(warnings)},` +
    `"errors":[],"detail_levels":{"signal_details":${JSON.stringify(signalDetails)},"evidence_details":${JSON.stringify(evidenceDetails)}}}`
}

/** Runs scoring under a ticket: on failure the request counts nothing and the error is a clean 503. */
async function scored<T> (log: RequestLog, ticket: Ticket, run: () => Promise<T>): Promise<T> {
  try {
    return await run()
  } catch (err) {
    log.error({ err }, 'scoring failed')
    await ticket.refund().catch((e: unknown) => { log.error({ err: e }, 'quota refund failed') })
    throw new ScoringFailedError({ cause: err })
  }
}

/**
 * Makes the request's history durable before the answer goes out: a request whose history cannot be journalled
 * (disk full, the write took longer than its bound, shutdown) is not answered with verdicts, its quota is refunded,
 * and it may be retried. (After a timed-out write the records may still reach history: recorded but not answered is
 * the safe side of an audit trail.)
 */
async function record (log: RequestLog, ticket: Ticket, history: HistorySink, envelope: HistoryEnvelope, parts: Uint8Array[]): Promise<void> {
  try {
    await history.submit(envelope, parts)
  } catch (err) {
    // Logged once, with the request's refusal line (app.ts: its causes name the journal's refusal and the disk's error).
    await ticket.refund().catch((e: unknown) => { log.error({ err: e }, 'quota refund failed') })
    throw new OverloadedError('history cannot be recorded now; retry shortly', { cause: err })
  }
}

/** A single verdict request after validation. */
export interface SingleRequest {
  key: ApiKeyRecord
  log: RequestLog
  envelopeOf: EnvelopeOf
  format: 'json' | 'msgpack'
  type: string | null
  value: string
  actionTaken: string | null
  actionSource: string | null
  signalDetails: SignalDetails
  evidenceDetails: EvidenceDetails
  source: HistoryEnvelope['source']
  requestId: string
  started: number
}

/** A verdict answer, with what the caller's daily quota has left (null without a quota). */
export interface SingleAnswer {
  /** The verdict object (for a JSON call, parsed from `json` when read). */
  readonly verdict: object
  /** For a JSON call, the verdict's JSON text, to send as it is; else null. */
  readonly json: string | null
  readonly quotaRemaining: number | null
}

/**
 * A JSON call's answer: the text to send, with the object parsed from it only when read (the dashboard and feedback
 * routes read it). A class, not an object literal with a getter: the literal made a new accessor function per call,
 * closing over answerSingle's scope (and so the request), and V8 kept those accessors reachable from the old
 * generation until a full collection. Each call's request then outlived the young generation's collections: with
 * only this left, 16% of what the main thread allocated under single calls was promoted (docs/PERFORMANCE.md).
 */
class JsonAnswer implements SingleAnswer {
  readonly json: string
  readonly quotaRemaining: number | null

  constructor (json: string, quotaRemaining: number | null) {
    this.json = json
    this.quotaRemaining = quotaRemaining
  }

  get verdict (): object {
    return JSON.parse(this.json) as object
  }
}

/** Scores one indicator and records it; an invalid value is recorded with status 400, then INVALID_INDICATOR. */
export async function answerSingle (deps: VerdictDeps, req: SingleRequest): Promise<SingleAnswer> {
  const allow = await deps.allowlists.forRequest(req.key.tenant)
  const params: ChunkParams = allow === undefined
    ? singleParams(req.format, req.signalDetails, req.evidenceDetails)
    : { mode: 'single', format: req.format, scoringVersion: null, signalDetails: req.signalDetails, evidenceDetails: req.evidenceDetails, allow }
  const ticket = await deps.admission.admit(req.key, 1)
  try {
    const lease = deps.intel.lease()
    try {
      const out = await scored(req.log, ticket, async () => await lease.pool.runSingle([req.type, req.value, req.actionTaken, req.actionSource], params))
      await record(req.log, ticket, deps.history, req.envelopeOf({
        date: new Date().toISOString(),
        bulk_request_id: null,
        http_status: out.type === null ? 400 : 200,
        evidence_details: params.evidenceDetails,
        label_details: params.signalDetails,
        source: req.source,
        scoring_version: null,
        query_type: null,
        project_id: null,
        project_name: null,
        count: 1
      }), [out.history])
      deps.observer?.scored('single', 1, out.cacheHit ? 1 : 0, out.type === null ? 1 : 0, kTypeCounts.get(out.type) ?? kNoTypes, oneOfCategory(out.category))
      if (out.type === null) {
        // Counted against the quota like a verdict, so the refusal carries the quota headers too.
        throw Object.assign(new InvalidIndicatorError(out.errors.join('; ')), { quotaRemaining: ticket.quotaRemaining })
      }
      const engineVersion = deps.engineVersion(selectProfile(null).profile.version)
      const dataTimestamp = lease.pool.snapshot.dataTimestamp
      const queryTimeMs = Math.round(performance.now() - req.started)
      // The JSON text is the verdict object's with meta appended as its last member, as JSON.stringify would write it.
      if (out.jsonOpen !== null) {
        const json = `${out.jsonOpen},"meta":${metaJson(engineVersion, dataTimestamp, out.cacheHit, queryTimeMs, req.requestId, out.warnings, params.signalDetails, params.evidenceDetails)}}`
        return new JsonAnswer(json, ticket.quotaRemaining)
      }
      const meta = {
        engine_version: engineVersion,
        data_timestamp: dataTimestamp,
        cache_hit: out.cacheHit,
        query_time_ms: queryTimeMs,
        request_id: req.requestId,
        warnings: out.warnings,
        errors: [],
        detail_levels: { signal_details: params.signalDetails, evidence_details: params.evidenceDetails }
      }
      return { verdict: { ...out.verdict, meta }, json: null, quotaRemaining: ticket.quotaRemaining }
    } finally {
      lease.release()
    }
  } finally {
    ticket.done()
  }
}

/** A bulk request after schema validation and chunkBulk(). */
export interface BulkRequest {
  key: ApiKeyRecord
  log: RequestLog
  envelopeOf: EnvelopeOf
  /** ndjson and csv answers are built from the JSON items. */
  format: 'json' | 'msgpack' | 'ndjson' | 'csv'
  /** Indicators in the request (the chunks hold them; the parsed body is not kept). */
  count: number
  signalDetails: SignalDetails
  evidenceDetails: string | undefined
  scoringVersion: string | undefined
  logged: Pick<HistoryEnvelope, 'source' | 'scoring_version' | 'query_type' | 'project_id' | 'project_name'>
  started: number
}

/**
 * The answer: bytes (JSON, msgpack, NDJSON) or CSV pieces to stream; call `sent` once the bytes are written, so their
 * buffer serves a later answer. `meta` is the JSON and msgpack answers' meta, for the headers of the other formats.
 */
export interface BulkAnswer {
  payload: Buffer | Iterable<string>
  meta: { engine_version: string, data_timestamp: string, bulk_request_id: string, record_count: number, warnings: string[] }
  bulkRequestId: string
  sent: () => void
  quotaRemaining: number | null
}

/** Validates the log-only fields and chunks by shard (throws INVALID_ACTION_SOURCE before anything is admitted). */
export function chunkBulk (deps: VerdictDeps, indicators: readonly BulkIndicator[]): Chunks {
  return chunkIndicators(indicators, deps.intel.shards)
}

/** Scores a bulk request chunk by chunk on the shards' workers, merges in request order and records every item. */
export async function answerBulk (deps: VerdictDeps, req: BulkRequest, chunks: Chunks): Promise<BulkAnswer> {
  const n = req.count
  const warnings: string[] = []
  if (n === 0) warnings.push('indicators is empty: nothing to score')
  if (req.evidenceDetails !== undefined && req.evidenceDetails !== 'none') {
    warnings.push(`evidence_details "${req.evidenceDetails}" ignored: bulk results carry no evidence`)
  }
  const { profile, known } = selectProfile(req.scoringVersion)
  if (!known) warnings.push(`unknown scoring_version "${req.scoringVersion ?? ''}": used the default ${profile.version}`)
  const params: ChunkParams = { mode: 'bulk', format: req.format === 'msgpack' ? 'msgpack' : 'json', scoringVersion: profile.version, signalDetails: req.signalDetails, evidenceDetails: 'none' }
  const allow = await deps.allowlists.forRequest(req.key.tenant)
  if (allow !== undefined) params.allow = allow

  const ticket = await deps.admission.admit(req.key, n)
  try {
    const lease = deps.intel.lease()
    try {
      const pool = lease.pool
      const pending = chunks.items.map(async (items, s): Promise<BulkChunkOutput> => items.length === 0
        ? { body: new Uint8Array(0), ends: new Uint32Array(0), history: new Uint8Array(0), cacheHits: 0, invalid: 0, types: new Uint32Array(INDICATOR_TYPES.length), categories: {} }
        : await pool.runBulk(s, items, params))
      // The workers have their copies (or inline mode has scored them): the chunked items, up to ten thousand tuples,
      // are not kept reachable through the scoring phase, where the young-generation collector would copy and promote
      // them, and concurrent bulks would each hold theirs.
      chunks.items = []
      const outputs = await scored(req.log, ticket, async () => await Promise.all(pending))
      const bulkRequestId = randomUUID()
      let invalid = 0
      let cacheHits = 0
      const types = new Uint32Array(INDICATOR_TYPES.length)
      const categories: Record<string, number> = {}
      for (const o of outputs) {
        invalid += o.invalid
        cacheHits += o.cacheHits
        for (let t = 0; t < types.length; t++) types[t] = (types[t] as number) + (o.types[t] as number)
        for (const c in o.categories) categories[c] = (categories[c] ?? 0) + (o.categories[c] as number)
      }
      if (invalid > 0) warnings.push(`${invalid} of ${n} indicators are invalid: see each result's errors`)
      const meta = {
        engine_version: deps.engineVersion(profile.version),
        data_timestamp: pool.snapshot.dataTimestamp,
        bulk_request_id: bulkRequestId,
        signal_details: req.signalDetails,
        evidence_details: 'none',
        took_ms: Math.round(performance.now() - req.started),
        record_count: n,
        warnings,
        errors: [] as string[]
      }
      const payload = req.format === 'json'
        ? mergeJson(meta, chunks, outputs, deps.answers)
        : req.format === 'msgpack'
          ? mergeMsgpack(meta, chunks, outputs, deps.answers)
          : req.format === 'ndjson' ? mergeNdjson(chunks, outputs, deps.answers) : csvPieces(chunks, outputs)
      // The bodies are copied into the payload: their buffers go back to their shards for the next chunks. CSV reads
      // them while it streams, so they are left to the collector.
      if (req.format !== 'csv') outputs.forEach((o, s) => { pool.recycle(s, o.body) })
      if (n > 0) {
        await record(req.log, ticket, deps.history, req.envelopeOf({
          date: new Date().toISOString(),
          bulk_request_id: bulkRequestId,
          http_status: 200,
          evidence_details: 'none',
          label_details: req.signalDetails,
          ...req.logged,
          count: n
        }), outputs.filter((o) => o.history.length > 0).map((o) => o.history))
      }
      deps.observer?.scored('bulk', n, cacheHits, invalid, types, categories)
      const sent = Buffer.isBuffer(payload) ? () => { deps.answers.give(payload) } : () => {}
      return { payload, meta, bulkRequestId, sent, quotaRemaining: ticket.quotaRemaining }
    } finally {
      lease.release()
    }
  } finally {
    ticket.done()
  }
}
