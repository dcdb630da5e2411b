/**
 * POST /api/v2/ioc/verdict (spec 4.1) and POST /api/v2/ioc/verdict/bulk (spec 4.2).
 */
import type { FastifyInstance, FastifyReply } from 'fastify'
import { TooManyIndicatorsError } from '../errors.ts'
import type { Admission } from '../bulk/admission.ts'
import type { TenantAllowlists } from '../bulk/allowlist.ts'
import { AnswerBuffers } from '../bulk/merge.ts'
import { answerBulk, answerSingle, chunkBulk, type VerdictDeps } from '../bulk/verdicts.ts'
import type { HistorySink } from '../history/types.ts'
import type { IntelService } from '../pool/intel-service.ts'
import { clientPackr } from '../pool/score-chunk.ts'
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
  allowlists: TenantAllowlists
  bodyLimit: number
}

function send (reply: FastifyReply, format: 'json' | 'msgpack', payload: Buffer | object): FastifyReply {
  if (format === 'msgpack') {
    return reply.type('application/msgpack').send(Buffer.isBuffer(payload) ? payload : Buffer.from(clientPackr.pack(payload)))
  }
  return reply.type('application/json; charset=utf-8').send(Buffer.isBuffer(payload) ? payload : JSON.stringify(payload))
}

/** Registers the single and bulk verdict routes. */
export function verdictRoutes (app: FastifyInstance, deps: VerdictRouteDeps): void {
  const verdicts: VerdictDeps = { intel: deps.intel, history: deps.history, admission: deps.admission, answers: new AnswerBuffers(), allowlists: deps.allowlists, engineVersion }

  app.post('/api/v2/ioc/verdict', {
    schema: { body: singleBodySchema },
    onRequest: requireKey(deps.verifier, 'verdict')
  }, async (req, reply) => {
    const started = performance.now()
    const format = responseFormat(req)
    const body = req.body as SingleBody
    const ind = body.indicator
    // The indicator's log-only fields win over the request's (API.md); empty means not provided, so an empty one
    // falls back to the request's. Every action_source sent is validated, including one that is overridden.
    const topSource = normalizeActionSource(body.action_source, '')
    const verdict = await answerSingle(verdicts, {
      key: req.apiKey!,
      log: req.log,
      envelopeOf: (fields) => envelopeOf(req, fields),
      format,
      type: ind.type ?? null,
      value: ind.value,
      actionTaken: normalizeActionTaken(ind.action_taken) ?? normalizeActionTaken(body.action_taken),
      actionSource: normalizeActionSource(ind.action_source, 'indicator.') ?? topSource,
      signalDetails: body.signal_details ?? 'top',
      evidenceDetails: body.evidence_details ?? 'summary',
      source: sourceOf(body.source),
      requestId: req.id,
      started
    })
    return send(reply, format, verdict)
  })

  app.post('/api/v2/ioc/verdict/bulk', {
    schema: { body: bulkBodySchema },
    onRequest: requireKey(deps.verifier, 'verdict_bulk'),
    bodyLimit: deps.bodyLimit
  }, async (req, reply) => {
    const started = performance.now()
    const format = responseFormat(req)
    const body = req.body as BulkBody
    const n = body.indicators.length
    if (n > kMaxBulk) throw new TooManyIndicatorsError(`${n} indicators sent; at most ${kMaxBulk} per request`)
    const chunks = chunkBulk(verdicts, body.indicators)
    // The chunks hold what scoring needs: the parsed body, up to ten thousand objects, is let go of here.
    req.body = null
    const answer = await answerBulk(verdicts, {
      key: req.apiKey!,
      log: req.log,
      envelopeOf: (fields) => envelopeOf(req, fields),
      format,
      count: n,
      signalDetails: body.signal_details ?? 'none',
      evidenceDetails: body.evidence_details,
      scoringVersion: body.scoring_version,
      logged: {
        source: sourceOf(body.source),
        scoring_version: body.scoring_version ?? null,
        query_type: body.query_type ?? null,
        project_id: body.project_id ?? null,
        project_name: body.project_name ?? null
      },
      started
    }, chunks)
    // Once every byte has gone to the operating system the buffer serves a later answer; an answer that does not
    // finish (the client went away) keeps its buffer until the collector frees it.
    reply.raw.once('finish', answer.sent)
    reply.header('x-bulk-request-id', answer.bulkRequestId)
    return send(reply, format, answer.payload)
  })
}
