/**
 * POST /api/v2/ioc/verdict and POST /api/v2/ioc/verdict/bulk (docs/API.md "Verdicts", "Bulk").
 */
import { Readable } from 'node:stream'
import type { FastifyInstance, FastifyReply } from 'fastify'
import { TooManyIndicatorsError } from '../errors.ts'
import { AnswerBuffers } from '../bulk/merge.ts'
import { answerBulk, answerSingle, chunkBulk, type VerdictDeps } from '../bulk/verdicts.ts'
import { clientPackr } from '../pool/bulk-item.ts'
import { requireKey, type KeyVerifier } from './auth.ts'
import type { CountedMember } from './body-guard.ts'
import { bulkResponseFormat, responseFormat } from './content.ts'
import { normalizeActionSource, normalizeActionTaken } from '../bulk/log-fields.ts'
import { engineVersion, envelopeOf, sourceOf } from './request-fields.ts'
import { bulkResultSchema, errorsOf, verdictResultSchema } from './response-schemas.ts'
import { bulkBodySchema, singleBodySchema, type BulkBody, type SingleBody } from './schemas.ts'

/** Most indicators one bulk request may carry: 10,000, as the interface's limits say. */
export const kMaxBulk = 10_000
const kBulkUrl = '/api/v2/ioc/verdict/bulk'

function tooManyIndicators (n: number): Error {
  return new TooManyIndicatorsError(`${n} indicators sent; at most ${kMaxBulk} per request`)
}

/**
 * The body guard's counted members (content.ts registerParsers): a bulk far past kMaxBulk reaches the body's element
 * limit before the handler could count it, and gets TOO_MANY_INDICATORS all the same.
 */
export const kCountedMembers: Readonly<Record<string, CountedMember>> = {
  [kBulkUrl]: { name: 'indicators', most: kMaxBulk, error: tooManyIndicators }
}

/** What the verdict routes need. */
export interface VerdictRouteDeps {
  verdicts: VerdictDeps
  verifier: KeyVerifier
  bodyLimit: number
}

function send (reply: FastifyReply, format: 'json' | 'msgpack', payload: Buffer | object): FastifyReply {
  if (format === 'msgpack') {
    return reply.type('application/msgpack').send(Buffer.isBuffer(payload) ? payload : Buffer.from(clientPackr.pack(payload)))
  }
  return reply.type('application/json; charset=utf-8').send(Buffer.isBuffer(payload) ? payload : JSON.stringify(payload))
}

/** The daily quota of a key that has one: X-Quota-Limit and X-Quota-Remaining (indicators per UTC day). */
function quotaHeaders (reply: FastifyReply, quota: number | null, remaining: number | null): void {
  if (quota === null || remaining === null) return
  reply.header('x-quota-limit', String(quota))
  reply.header('x-quota-remaining', String(remaining))
}

/** The orchestration's dependencies for one app (shared by the verdict routes and the dashboard's lookups). */
export function verdictDeps (deps: Omit<VerdictDeps, 'answers' | 'engineVersion'>): VerdictDeps {
  return { ...deps, answers: new AnswerBuffers(), engineVersion }
}

/** Registers the single and bulk verdict routes. */
export function verdictRoutes (app: FastifyInstance, deps: VerdictRouteDeps): void {
  const verdicts = deps.verdicts

  app.post('/api/v2/ioc/verdict', {
    schema: {
      tags: ['verdicts'],
      summary: 'Verdict for one indicator',
      description: 'Requires the `verdict` permission. signal_details defaults to top (3 signals), evidence_details to summary. ' +
        'An invalid value answers 400 INVALID_INDICATOR (and is recorded with http_status 400).',
      security: [{ apiKey: [] }],
      body: singleBodySchema,
      response: {
        200: {
          description: 'The verdict, JSON (default) or msgpack (Accept: application/msgpack)',
          content: { 'application/json': { schema: verdictResultSchema }, 'application/msgpack': { schema: verdictResultSchema } }
        },
        ...errorsOf(400, 401, 403, 406, 413, 415, 429, 503)
      }
    },
    onRequest: requireKey(deps.verifier, 'verdict')
  }, async (req, reply) => {
    const started = performance.now()
    const format = responseFormat(req)
    const body = req.body as SingleBody
    const ind = body.indicator
    // The indicator's log-only fields win over the request's (API.md); empty means not provided, so an empty one
    // falls back to the request's. Every action_source sent is validated, including one that is overridden.
    const topSource = normalizeActionSource(body.action_source, '')
    let answer: Awaited<ReturnType<typeof answerSingle>>
    try {
      answer = await answerSingle(verdicts, {
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
    } catch (err) {
      // An invalid indicator is answered 400 and counted: its quota headers as a verdict's.
      const counted = (err as { quotaRemaining?: number | null }).quotaRemaining
      if (counted !== undefined) quotaHeaders(reply, req.apiKey!.quota, counted)
      throw err
    }
    quotaHeaders(reply, req.apiKey!.quota, answer.quotaRemaining)
    if (answer.json !== null) return reply.type('application/json; charset=utf-8').send(answer.json)
    return send(reply, format, answer.verdict)
  })

  app.post(kBulkUrl, {
    schema: {
      tags: ['verdicts'],
      summary: 'Verdicts for up to 10,000 indicators',
      description: 'Requires the `verdict_bulk` permission. One parameter set for the batch; results[i] answers indicators[i]; an ' +
        'invalid item gets `errors` and never fails the batch. Admitted only when the whole batch fits the daily quota.',
      security: [{ apiKey: [] }],
      body: bulkBodySchema,
      response: {
        200: {
          description: 'JSON (default) or msgpack: {meta, results}. With Accept: application/x-ndjson, one result item per line; ' +
            'with Accept: text/csv, a header line and one row per indicator (value, type, normalized, score, strength, category, ' +
            'top_signals, error). Both in request order; the batch\'s ids are in the x-bulk-request-id, x-engine-version, ' +
            'x-data-timestamp and x-record-count headers.',
          content: {
            'application/json': { schema: bulkResultSchema },
            'application/msgpack': { schema: bulkResultSchema },
            'application/x-ndjson': { schema: { type: 'string' } },
            'text/csv': { schema: { type: 'string' } }
          }
        },
        ...errorsOf(400, 401, 403, 406, 413, 415, 429, 503)
      }
    },
    onRequest: requireKey(deps.verifier, 'verdict_bulk'),
    bodyLimit: deps.bodyLimit
  }, async (req, reply) => {
    const started = performance.now()
    const format = bulkResponseFormat(req)
    const body = req.body as BulkBody
    const n = body.indicators.length
    if (n > kMaxBulk) throw tooManyIndicators(n)
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
    quotaHeaders(reply, req.apiKey!.quota, answer.quotaRemaining)
    if (format === 'json' || format === 'msgpack') return send(reply, format, answer.payload as Buffer)
    // NDJSON and CSV carry the items only: what meta says of the batch goes in headers.
    reply.header('x-engine-version', answer.meta.engine_version)
    reply.header('x-data-timestamp', answer.meta.data_timestamp)
    reply.header('x-record-count', String(answer.meta.record_count))
    if (format === 'ndjson') return reply.type('application/x-ndjson; charset=utf-8').send(answer.payload)
    return reply.type('text/csv; charset=utf-8; header=present').send(Readable.from(answer.payload as Iterable<string>))
  })
}
