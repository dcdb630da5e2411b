/**
 * Analysts' feedback on verdicts: POST/GET /api/v2/mgmt/feedback, GET /api/v2/mgmt/feedback/summary and
 * DELETE /api/v2/mgmt/feedback/:id (docs/API.md "Feedback"). Every route needs the `mgmt` permission (a dashboard
 * session stands in for a key, with its CSRF token on POST and DELETE) and sees only the caller's tenant.
 *
 * The client names the indicator and says false or true positive; the service scores the indicator itself, as a
 * single verdict query (the tenant's allowlist applied, all signals), and records that verdict's score, category and
 * signal ids, so what the team counts per signal is what the service said, not what a client claims. That scoring is
 * a verdict like any other: the caller needs the `verdict` permission too (a dashboard session, which looks
 * indicators up anyway, has it), it is admitted under the key's quota, recorded in history and counted in usage.
 */
import type { FastifyInstance } from 'fastify'
import { answerSingle, type VerdictDeps } from '../bulk/verdicts.ts'
import { normalize, INDICATOR_TYPES } from '../engine/index.ts'
import { InvalidIndicatorError, InvalidRequestError, NotFoundError, PermissionDeniedError } from '../errors.ts'
import { FEEDBACK_VERDICTS, kMaxFeedbackLimit } from '../store/feedback.ts'
import type { FeedbackEntry, FeedbackFilters, FeedbackVerdict, Store } from '../store/index.ts'
import { hasPermission, requireKey, type KeyVerifier } from './auth.ts'
import { envelopeOf, sourceOf } from './request-fields.ts'
import { errorsOf } from './response-schemas.ts'
import { kIdParams } from './schemas.ts'
import type { SessionAuth } from './session.ts'

/** Longest note kept, in characters (after trimming). */
export const kMaxNote = 1_000
const kDefaultLimit = 100

/** Told of every recorded feedback (metrics). */
export interface FeedbackObserver {
  feedback: (verdict: FeedbackVerdict) => void
}

/** What the feedback routes need. */
export interface FeedbackRouteDeps {
  store: Pick<Store, 'addFeedback' | 'listFeedback' | 'feedbackSummary' | 'deleteFeedback'>
  /** The verdict orchestration: feedback scores its indicator as a single verdict query. */
  verdicts: VerdictDeps
  verifier: KeyVerifier
  /** Dashboard sessions, accepted in place of a key. */
  sessions?: SessionAuth
  observer?: FeedbackObserver
}

const kBody = {
  type: 'object',
  additionalProperties: false,
  required: ['indicator', 'verdict'],
  properties: {
    indicator: {
      type: 'object',
      additionalProperties: false,
      required: ['value'],
      properties: {
        value: { type: 'string', minLength: 1, maxLength: 8192, description: 'Any form a verdict query takes (defanged, URL, CIDR, AS number, hash)' },
        type: { type: 'string', enum: INDICATOR_TYPES, description: 'Inferred from the value when omitted' }
      }
    },
    verdict: { type: 'string', enum: FEEDBACK_VERDICTS },
    note: { type: 'string', maxLength: kMaxNote, description: 'Why; trimmed, may be empty' }
  }
} as const

interface Body { indicator: { value: string, type?: string }, verdict: FeedbackVerdict, note?: string }

const kDate = { type: 'string', minLength: 1, maxLength: 64, description: 'ISO 8601 date-time with offset, or a date (UTC midnight)' } as const

const kListQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    verdict: { type: 'string', enum: FEEDBACK_VERDICTS },
    indicator: { type: 'string', minLength: 1, maxLength: 8192, description: 'Normalized like a verdict query, then matched exactly' },
    signal_id: { type: 'string', minLength: 1, maxLength: 256, description: 'Entries whose verdict had this signal' },
    created_by: { type: 'string', minLength: 1, maxLength: 256, description: 'Key id, or user:<name>' },
    since: kDate,
    until: kDate,
    limit: { type: 'string', pattern: '^[0-9]{1,4}$' },
    cursor: { type: 'string', minLength: 1, maxLength: 128 }
  }
} as const

type ListQuery = Partial<Record<keyof typeof kListQuery.properties, string>>

const kEntry = {
  type: 'object',
  required: ['id', 'verdict', 'indicator', 'note', 'score', 'category', 'signal_ids', 'engine_version', 'data_timestamp', 'created_by', 'created_at'],
  properties: {
    id: { type: 'string', example: 'fb_0mhx3k2f48a1c9e2b7d0' },
    verdict: { type: 'string', enum: FEEDBACK_VERDICTS },
    indicator: {
      type: 'object',
      required: ['type', 'value', 'normalized'],
      properties: { type: { type: 'string', enum: INDICATOR_TYPES }, value: { type: 'string', description: 'As sent' }, normalized: { type: 'string' } }
    },
    note: { type: 'string' },
    score: { type: 'integer', minimum: 0, maximum: 100, description: 'The verdict\'s score when the feedback was recorded' },
    category: { type: 'string' },
    signal_ids: { type: 'array', items: { type: 'string' }, description: 'Every signal of that verdict, largest contribution first' },
    engine_version: { type: 'string' },
    data_timestamp: { type: 'string', description: 'Of the intel snapshot that scored it' },
    created_by: { type: 'string', description: 'Key id (or user:<name> for a dashboard session)' },
    created_at: { type: 'string', format: 'date-time' }
  }
} as const

const kSummary = {
  type: 'object',
  required: ['since', 'until', 'totals', 'signals'],
  properties: {
    since: { type: ['string', 'null'], format: 'date-time' },
    until: { type: ['string', 'null'], format: 'date-time' },
    totals: {
      type: 'object',
      required: ['false_positive', 'true_positive'],
      properties: { false_positive: { type: 'integer' }, true_positive: { type: 'integer' } }
    },
    signals: {
      type: 'array',
      description: 'Most false positives first',
      items: {
        type: 'object',
        required: ['signal_id', 'false_positive', 'true_positive', 'false_positive_share'],
        properties: {
          signal_id: { type: 'string' },
          false_positive: { type: 'integer', description: 'Entries marked false positive whose verdict had this signal' },
          true_positive: { type: 'integer' },
          false_positive_share: { type: 'number', minimum: 0, maximum: 1, description: 'false_positive / (false_positive + true_positive), 4 decimals' }
        }
      }
    }
  }
} as const

/** The public form of an entry. */
function publicEntry (e: FeedbackEntry): object {
  return {
    id: e.id,
    verdict: e.verdict,
    indicator: { type: e.indicatorType, value: e.indicatorValue, normalized: e.indicatorNormalized },
    note: e.note,
    score: e.score,
    category: e.category,
    signal_ids: e.signalIds,
    engine_version: e.engineVersion,
    data_timestamp: e.dataTimestamp,
    created_by: e.createdBy,
    created_at: e.createdAt
  }
}

/** Registers the feedback routes. */
export function feedbackRoutes (app: FastifyInstance, deps: FeedbackRouteDeps): void {
  const { store } = deps
  const auth = requireKey(deps.verifier, 'mgmt', deps.sessions)

  app.post('/api/v2/mgmt/feedback', {
    schema: {
      tags: ['management'],
      summary: 'Mark the verdict of an indicator as a false or true positive, with a note',
      description: 'Needs `verdict` as well as `mgmt` (or a dashboard session). The service scores the indicator itself, as a single ' +
        'verdict query (the tenant\'s allowlist applied) recorded in history and counted against the quota, and records that ' +
        'verdict\'s score, category and signal ids with the feedback.',
      security: [{ apiKey: [] }],
      body: kBody,
      response: { 201: kEntry, ...errorsOf(400, 401, 403, 429, 503) }
    },
    onRequest: auth
  }, async (req, reply) => {
    const key = req.apiKey!
    // The answer holds a verdict: a key without `verdict` gets none this way either.
    if (req.session === null && !hasPermission(key, 'verdict')) throw new PermissionDeniedError('verdict')
    const body = req.body as Body
    const note = (body.note ?? '').trim()
    // Refused before anything is scored or counted; the scoring thread would say the same.
    const n = normalize(body.indicator.value, body.indicator.type)
    if (!n.ok) throw new InvalidIndicatorError(n.errors.join('; '))
    const answer = await answerSingle(deps.verdicts, {
      key,
      log: req.log,
      envelopeOf: (fields) => envelopeOf(req, fields),
      format: 'json',
      type: body.indicator.type ?? null,
      value: body.indicator.value,
      actionTaken: null,
      actionSource: null,
      signalDetails: 'all',
      evidenceDetails: 'none',
      source: sourceOf({ channel: req.session === null ? 'api' : 'portal', product: 'ioc-verdict feedback' }),
      requestId: req.id,
      started: performance.now()
    })
    const v = answer.verdict as { indicator: { type: string, normalized: string }, risk: { score: number, category: string }, signals: Array<{ signal_id: string }>, meta: { engine_version: string, data_timestamp: string } }
    const entry = await store.addFeedback({
      tenant: key.tenant,
      verdict: body.verdict,
      indicatorType: v.indicator.type,
      indicatorValue: body.indicator.value,
      indicatorNormalized: v.indicator.normalized,
      note,
      score: v.risk.score,
      category: v.risk.category,
      signalIds: v.signals.map((s) => s.signal_id),
      engineVersion: v.meta.engine_version,
      dataTimestamp: v.meta.data_timestamp,
      createdBy: key.id
    })
    deps.observer?.feedback(entry.verdict)
    req.log.info({ feedback: entry.id, verdict: entry.verdict }, 'feedback recorded')
    return reply.code(201).send(publicEntry(entry))
  })

  app.get('/api/v2/mgmt/feedback', {
    schema: {
      tags: ['management'],
      summary: 'The tenant\'s feedback, newest first, filtered, by cursor',
      security: [{ apiKey: [] }],
      querystring: kListQuery,
      response: {
        200: { type: 'object', required: ['entries', 'next_cursor'], properties: { entries: { type: 'array', items: kEntry }, next_cursor: { type: ['string', 'null'] } } },
        ...errorsOf(400, 401, 403)
      }
    },
    onRequest: auth
  }, async (req) => {
    const q = req.query as ListQuery
    const limit = q.limit === undefined ? kDefaultLimit : Number(q.limit)
    if (limit < 1 || limit > kMaxFeedbackLimit) throw new InvalidRequestError(`limit must be from 1 to ${kMaxFeedbackLimit}`)
    const filters: FeedbackFilters = {}
    if (q.verdict !== undefined) filters.verdict = q.verdict as FeedbackVerdict
    if (q.indicator !== undefined) {
      const n = normalize(q.indicator)
      if (!n.ok) throw new InvalidRequestError(`indicator is not a valid indicator: ${n.errors.join('; ')}`)
      filters.indicator = n.indicator.normalized
    }
    if (q.signal_id !== undefined) filters.signalId = q.signal_id
    if (q.created_by !== undefined) filters.createdBy = q.created_by
    if (q.since !== undefined) filters.since = q.since
    if (q.until !== undefined) filters.until = q.until
    const page = await store.listFeedback(req.apiKey!.tenant, filters, limit, q.cursor ?? null)
    return { entries: page.entries.map(publicEntry), next_cursor: page.nextCursor }
  })

  app.get('/api/v2/mgmt/feedback/summary', {
    schema: {
      tags: ['management'],
      summary: 'Per signal id: how often the tenant marked verdicts with it false or true positive',
      description: 'An entry counts once for each signal its verdict had. since is inclusive, until exclusive.',
      security: [{ apiKey: [] }],
      querystring: { type: 'object', additionalProperties: false, properties: { since: kDate, until: kDate } },
      response: { 200: kSummary, ...errorsOf(400, 401, 403) }
    },
    onRequest: auth
  }, async (req) => {
    const q = req.query as { since?: string, until?: string }
    const filters = { ...(q.since === undefined ? {} : { since: q.since }), ...(q.until === undefined ? {} : { until: q.until }) }
    const s = await store.feedbackSummary(req.apiKey!.tenant, filters)
    return {
      since: s.since,
      until: s.until,
      totals: { false_positive: s.falsePositive, true_positive: s.truePositive },
      signals: s.signals.map((r) => ({
        signal_id: r.signalId,
        false_positive: r.falsePositive,
        true_positive: r.truePositive,
        false_positive_share: Math.round((r.falsePositive / (r.falsePositive + r.truePositive)) * 10_000) / 10_000
      }))
    }
  })

  app.delete('/api/v2/mgmt/feedback/:id', {
    schema: {
      tags: ['management'],
      summary: 'Remove a feedback entry: your own, or any of the tenant\'s with the admin permission',
      security: [{ apiKey: [] }],
      response: { 204: { type: 'null', description: 'Removed' }, ...errorsOf(401, 403, 404) },
      params: kIdParams
    },
    onRequest: auth
  }, async (req, reply) => {
    const key = req.apiKey!
    const { id } = req.params as { id: string }
    const result = await store.deleteFeedback(key.tenant, id, hasPermission(key, 'admin') ? null : key.id)
    if (result === 'missing') throw new NotFoundError(`no feedback entry ${id}`)
    if (result === 'not_owner') throw new PermissionDeniedError('admin')
    return reply.code(204).send()
  })
}
