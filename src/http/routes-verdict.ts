/**
 * POST /api/v2/ioc/verdict (spec 4.1) and POST /api/v2/ioc/verdict/bulk (spec 4.2).
 */
import { randomUUID } from 'node:crypto'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { selectProfile } from '../engine/index.ts'
import { InvalidIndicatorError, OverloadedError, ScoringFailedError, TooManyIndicatorsError } from '../errors.ts'
import type { Admission, Ticket } from '../bulk/admission.ts'
import { chunkIndicators } from '../bulk/chunk.ts'
import { AnswerBuffers, mergeJson, mergeMsgpack } from '../bulk/merge.ts'
import type { HistoryEnvelope, HistorySink } from '../history/types.ts'
import type { IntelService } from '../pool/intel-service.ts'
import { clientPackr, type BulkChunkOutput, type ChunkParams } from '../pool/score-chunk.ts'
import { requireKey, type KeyVerifier } from './auth.ts'
import { responseFormat } from './content.ts'
import { normalizeActionSource, normalizeActionTaken } from '../bulk/log-fields.ts'
import { engineVersion, envelopeOf, sourceOf } from './request-fields.ts'
import { bulkBodySchema, singleBodySchema, type BulkBody, type SingleBody } from './schemas.ts'

/** Most indicators one bulk request may carry (spec 8). */
export const kMaxBulk = 10_000

/** What the verdict routes need. */
export interface VerdictRouteDeps {
  intel: IntelService
  history: HistorySink
  admission: Admission
  verifier: KeyVerifier
  bodyLimit: number
}

function send (reply: FastifyReply, format: 'json' | 'msgpack', payload: Buffer | object): FastifyReply {
  if (format === 'msgpack') {
    return reply.type('application/msgpack').send(Buffer.isBuffer(payload) ? payload : Buffer.from(clientPackr.pack(payload)))
  }
  return reply.type('application/json; charset=utf-8').send(Buffer.isBuffer(payload) ? payload : JSON.stringify(payload))
}

/** Runs scoring with a ticket: on failure the request counts nothing and the error is a clean 503. */
async function scored<T> (req: FastifyRequest, ticket: Ticket, run: () => Promise<T>): Promise<T> {
  try {
    return await run()
  } catch (err) {
    req.log.error({ err }, 'scoring failed')
    await ticket.refund().catch((e: unknown) => req.log.error({ err: e }, 'quota refund failed'))
    throw new ScoringFailedError({ cause: err })
  }
}

/**
 * Hands the request's history to the writer before the answer goes out: a request whose history cannot be taken
 * (the writer died after admission) is not answered with verdicts, counts nothing, and may be retried.
 */
async function record (req: FastifyRequest, ticket: Ticket, history: HistorySink, envelope: HistoryEnvelope, parts: Uint8Array[]): Promise<void> {
  try {
    history.submit(envelope, parts)
  } catch (err) {
    req.log.error({ err }, 'history writer refused the request')
    await ticket.refund().catch((e: unknown) => req.log.error({ err: e }, 'quota refund failed'))
    throw new OverloadedError('history writer unavailable; retry shortly', { cause: err })
  }
}

/** Registers the single and bulk verdict routes. */
export function verdictRoutes (app: FastifyInstance, deps: VerdictRouteDeps): void {
  const { intel, history, admission, verifier } = deps
  const answers = new AnswerBuffers()

  app.post('/api/v2/ioc/verdict', {
    schema: { body: singleBodySchema },
    onRequest: requireKey(verifier, 'verdict')
  }, async (req, reply) => {
    const started = performance.now()
    const format = responseFormat(req)
    const body = req.body as SingleBody
    const ind = body.indicator
    // The indicator's log-only fields win over the request's (API.md); empty means not provided, so an empty one
    // falls back to the request's. Every action_source sent is validated, including one that is overridden.
    const topSource = normalizeActionSource(body.action_source, '')
    const actionSource = normalizeActionSource(ind.action_source, 'indicator.') ?? topSource
    const actionTaken = normalizeActionTaken(ind.action_taken) ?? normalizeActionTaken(body.action_taken)
    const params: ChunkParams = {
      mode: 'single',
      format,
      scoringVersion: null,
      signalDetails: body.signal_details ?? 'top',
      evidenceDetails: body.evidence_details ?? 'summary'
    }
    const ticket = await admission.admit(req.apiKey!, 1)
    try {
      const pool = intel.pool
      const out = await scored(req, ticket, async () => await pool.runSingle([ind.type ?? null, ind.value, actionTaken, actionSource], params))
      const date = new Date().toISOString()
      await record(req, ticket, history, envelopeOf(req, {
        date,
        bulk_request_id: null,
        http_status: out.verdict === null ? 400 : 200,
        evidence_details: params.evidenceDetails,
        label_details: params.signalDetails,
        source: sourceOf(body.source),
        scoring_version: null,
        query_type: null,
        project_id: null,
        project_name: null,
        count: 1
      }), [out.history])
      if (out.verdict === null) throw new InvalidIndicatorError(out.errors.join('; '))
      const profile = selectProfile(null).profile
      return send(reply, format, {
        ...out.verdict,
        meta: {
          engine_version: engineVersion(profile.version),
          data_timestamp: pool.snapshot.dataTimestamp,
          cache_hit: out.cacheHit,
          query_time_ms: Math.round(performance.now() - started),
          request_id: req.id,
          warnings: out.warnings,
          errors: [],
          detail_levels: { signal_details: params.signalDetails, evidence_details: params.evidenceDetails }
        }
      })
    } finally {
      ticket.done()
    }
  })

  app.post('/api/v2/ioc/verdict/bulk', {
    schema: { body: bulkBodySchema },
    onRequest: requireKey(verifier, 'verdict_bulk'),
    bodyLimit: deps.bodyLimit
  }, async (req, reply) => {
    const started = performance.now()
    const format = responseFormat(req)
    let body: BulkBody | null = req.body as BulkBody
    const n = body.indicators.length
    if (n > kMaxBulk) throw new TooManyIndicatorsError(`${n} indicators sent; at most ${kMaxBulk} per request`)
    const warnings: string[] = []
    if (n === 0) warnings.push('indicators is empty: nothing to score')
    if (body.evidence_details !== undefined && body.evidence_details !== 'none') {
      warnings.push(`evidence_details "${body.evidence_details}" ignored: bulk results carry no evidence`)
    }
    const { profile, known } = selectProfile(body.scoring_version)
    if (!known) warnings.push(`unknown scoring_version "${body.scoring_version ?? ''}": used the default ${profile.version}`)
    const signalDetails = body.signal_details ?? 'none'
    const pool = intel.pool
    const chunks = chunkIndicators(body.indicators, pool.shards)
    const params: ChunkParams = { mode: 'bulk', format, scoringVersion: profile.version, signalDetails, evidenceDetails: 'none' }
    // What history needs from the body. The parsed indicators are then let go (below), not held while scoring runs.
    const logged = {
      source: sourceOf(body.source),
      scoring_version: body.scoring_version ?? null,
      query_type: body.query_type ?? null,
      project_id: body.project_id ?? null,
      project_name: body.project_name ?? null
    }

    const ticket = await admission.admit(req.apiKey!, n)
    try {
      const pending = chunks.items.map(async (items, s): Promise<BulkChunkOutput> => items.length === 0
        ? { body: new Uint8Array(0), ends: new Uint32Array(0), history: new Uint8Array(0), cacheHits: 0, invalid: 0 }
        : await pool.runBulk(s, items, params))
      // The workers have their copies (or inline mode has scored them): the parsed body, up to ten thousand objects,
      // is not kept reachable through the scoring phase, where the young-generation collector would copy and promote
      // it, and concurrent bulks would each hold theirs.
      body = null
      req.body = null
      chunks.items = []
      const outputs = await scored(req, ticket, async () => await Promise.all(pending))
      const bulkRequestId = randomUUID()
      let invalid = 0
      for (const o of outputs) invalid += o.invalid
      if (invalid > 0) warnings.push(`${invalid} of ${n} indicators are invalid: see each result's errors`)
      const meta = {
        engine_version: engineVersion(profile.version),
        data_timestamp: pool.snapshot.dataTimestamp,
        bulk_request_id: bulkRequestId,
        signal_details: signalDetails,
        evidence_details: 'none',
        took_ms: Math.round(performance.now() - started),
        record_count: n,
        warnings,
        errors: [] as string[]
      }
      const payload = format === 'json' ? mergeJson(meta, chunks, outputs, answers) : mergeMsgpack(meta, chunks, outputs, answers)
      // Once every byte has gone to the operating system the buffer serves a later answer; an answer that does not
      // finish (the client went away) keeps its buffer until the collector frees it.
      reply.raw.once('finish', () => { answers.give(payload) })
      // The bodies are copied into the payload: their buffers go back to their shards for the next chunks.
      outputs.forEach((o, s) => { pool.recycle(s, o.body) })
      if (n > 0) {
        await record(req, ticket, history, envelopeOf(req, {
          date: new Date().toISOString(),
          bulk_request_id: bulkRequestId,
          http_status: 200,
          evidence_details: 'none',
          label_details: signalDetails,
          ...logged,
          count: n
        }), outputs.filter((o) => o.history.length > 0).map((o) => o.history))
      }
      reply.header('x-bulk-request-id', bulkRequestId)
      return send(reply, format, payload)
    } finally {
      ticket.done()
    }
  })
}
