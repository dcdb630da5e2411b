/**
 * GET /api/v2/mgmt/retro-hunt/hits (docs/API.md "Retro-hunt"): the caller's tenant's retro-hunt hits, newest first,
 * filtered by `since` (on found_at), `min_score` and `category`, by cursor. Needs the `mgmt` permission or a
 * dashboard session; only the caller's tenant is ever read.
 */
import type { FastifyInstance } from 'fastify'
import { InvalidRequestError } from '../errors.ts'
import { kMaxRetroHitLimit, type RetroHitFilters, type Store } from '../store/index.ts'
import { requireKey, type KeyVerifier } from './auth.ts'
import { errorsOf } from './response-schemas.ts'
import type { SessionAuth } from './session.ts'

const kDefaultLimit = 100

/** What the route needs. */
export interface RetroHuntRouteDeps {
  store: Pick<Store, 'retroHunt'>
  verifier: KeyVerifier
  sessions?: SessionAuth
}

const kQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    since: { type: 'string', minLength: 1, maxLength: 64, description: 'ISO 8601 date-time with offset, or a date (UTC midnight): hits found at or after it' },
    min_score: { type: 'string', pattern: '^[0-9]{1,3}$', description: 'Hits whose score now is at least this (0-100)' },
    category: { type: 'string', minLength: 1, maxLength: 64, description: 'Hits whose category now is this' },
    limit: { type: 'string', pattern: '^[0-9]{1,4}$', description: `1-${kMaxRetroHitLimit}, default ${kDefaultLimit}` },
    cursor: { type: 'string', minLength: 1, maxLength: 128 }
  }
} as const

type Query = Partial<Record<keyof typeof kQuery.properties, string>>

const kStrings = { type: 'array', items: { type: 'string' } } as const

/** A hit as answered. */
export const kRetroHitSchema = {
  type: 'object',
  required: ['id', 'found_at', 'indicator', 'queried', 'then', 'now', 'cause'],
  properties: {
    id: { type: 'string', example: 'rh_0mhx3k2f48a1c9e2b7d0' },
    found_at: { type: 'string', format: 'date-time' },
    indicator: { type: 'object', required: ['type', 'value'], properties: { type: { type: 'string' }, value: { type: 'string', description: 'Normalized' } } },
    queried: {
      type: 'object',
      required: ['first_at', 'last_at', 'count', 'key_ids', 'action_sources'],
      description: 'The tenant\'s queries of the indicator within the lookback window',
      properties: {
        first_at: { type: 'string', format: 'date-time' },
        last_at: { type: 'string', format: 'date-time' },
        count: { type: 'integer' },
        key_ids: { ...kStrings, description: 'Keys that asked (at most 20)' },
        action_sources: { ...kStrings, description: 'action_source values sent with the queries (at most 20)' }
      }
    },
    then: { type: 'object', required: ['score', 'category'], description: 'The verdict of the latest query, from history', properties: { score: { type: 'integer' }, category: { type: 'string' } } },
    now: {
      type: 'object',
      required: ['score', 'category', 'strength', 'recommended_actions'],
      description: 'The verdict when the hit was found (the tenant\'s allowlist applied)',
      properties: {
        score: { type: 'integer' },
        category: { type: 'string' },
        strength: { type: 'string' },
        recommended_actions: { type: 'array', items: { type: 'object', additionalProperties: true } }
      }
    },
    cause: {
      type: 'object',
      required: ['signal_id', 'source', 'match', 'listed_value'],
      properties: {
        signal_id: { type: 'string' },
        source: { type: 'string' },
        match: { type: 'string', enum: ['exact', 'parent_domain', 'containing_network', 'announcing_as'] },
        listed_value: { type: 'string' }
      }
    }
  }
} as const

/** Registers the retro-hunt routes. */
export function retroHuntRoutes (app: FastifyInstance, deps: RetroHuntRouteDeps): void {
  const auth = requireKey(deps.verifier, 'mgmt', deps.sessions)
  app.get('/api/v2/mgmt/retro-hunt/hits', {
    schema: {
      tags: ['management'],
      summary: 'Indicators the tenant asked about that new intel now convicts, newest first',
      description: 'Found by the retro-hunt on each snapshot swap (docs/OPERATIONS.md "Retro-hunt").',
      security: [{ apiKey: [] }],
      querystring: kQuery,
      response: {
        200: { type: 'object', required: ['hits', 'next_cursor'], properties: { hits: { type: 'array', items: kRetroHitSchema }, next_cursor: { type: ['string', 'null'] } } },
        ...errorsOf(400, 401, 403)
      }
    },
    onRequest: auth
  }, async (req) => {
    const q = req.query as Query
    const limit = q.limit === undefined ? kDefaultLimit : Number(q.limit)
    if (limit < 1 || limit > kMaxRetroHitLimit) throw new InvalidRequestError(`limit must be from 1 to ${kMaxRetroHitLimit}`)
    const filters: RetroHitFilters = {}
    if (q.min_score !== undefined) {
      const n = Number(q.min_score)
      if (n > 100) throw new InvalidRequestError('min_score must be from 0 to 100')
      filters.minScore = n
    }
    if (q.category !== undefined) filters.category = q.category
    if (q.since !== undefined) filters.since = q.since
    const page = await deps.store.retroHunt.listHits(req.apiKey!.tenant, filters, limit, q.cursor ?? null)
    return { hits: page.hits, next_cursor: page.nextCursor }
  })
}
