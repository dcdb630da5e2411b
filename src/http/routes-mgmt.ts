/**
 * Management routes: search-history (the replacement of the retired POST /api/v2/ioc/history), usage, intel reload.
 * Every route is tenant-scoped by the caller's key.
 */
import type { FastifyInstance } from 'fastify'
import { InvalidRequestError } from '../errors.ts'
import { buildSummary, type FeedRefresher } from '../intel/index.ts'
import type { IntelService } from '../pool/intel-service.ts'
import type { Fleet } from '../fleet/fleet.ts'
import { INDICATOR_TYPES } from '../engine/types.ts'
import { DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT, utcDayOf, type QuotaCounter, type SearchFilters, type Store } from '../store/index.ts'
import { requireKey, type KeyVerifier } from './auth.ts'
import type { SessionAuth } from './session.ts'
import { errorsOf, reloadSchema, searchPageSchema, sourcesSchema, usageSchema } from './response-schemas.ts'

/** What the management routes need. */
export interface MgmtRouteDeps {
  store: Pick<Store, 'searchHistory' | 'usage'>
  /** Real-time counters (the store's usage lags by the history flush interval). */
  quota: Pick<QuotaCounter, 'used'>
  intel: IntelService
  feeds: Pick<FeedRefresher, 'rows' | 'refreshAll'>
  verifier: KeyVerifier
  /** Dashboard sessions, accepted in place of a key. */
  sessions: SessionAuth
  /** Instances sharing the store: a follower never builds or fetches, it follows the leader. */
  fleet?: Pick<Fleet, 'reload' | 'leading' | 'active' | 'requestRefresh' | 'status'>
}

const kSearchQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    date_gte: { type: 'string', minLength: 1, maxLength: 64 },
    date_lt: { type: 'string', minLength: 1, maxLength: 64 },
    user_id: { type: 'string', maxLength: 256 },
    apikey: { type: 'string', maxLength: 256 },
    exclude_bulk_requests: { type: 'string', enum: ['true', 'false', '1', '0'] },
    auth_type: { type: 'string', maxLength: 64 },
    indicator_type: { type: 'string', enum: INDICATOR_TYPES },
    indicator_value: { type: 'string', maxLength: 8192 },
    limit: { type: 'string', pattern: '^[0-9]{1,4}$' },
    cursor: { type: 'string', maxLength: 512 }
  }
} as const

type SearchQuery = Partial<Record<keyof typeof kSearchQuery.properties, string>>

/** Registers the management routes. */
export function mgmtRoutes (app: FastifyInstance, deps: MgmtRouteDeps): void {
  const { store, verifier } = deps

  app.get('/api/v2/mgmt/enrich-logs/search-history', {
    schema: {
      tags: ['management'],
      summary: 'Search the tenant\'s verdict history',
      description: 'Replaces the retired POST /api/v2/ioc/history. Any key of the tenant; newest first; pass next_cursor back as cursor.',
      security: [{ apiKey: [] }],
      querystring: kSearchQuery,
      response: { 200: searchPageSchema, ...errorsOf(400, 401, 503) }
    },
    onRequest: requireKey(verifier, null, deps.sessions)
  }, async (req) => {
    const q = req.query as SearchQuery
    const limit = q.limit === undefined ? DEFAULT_SEARCH_LIMIT : Number(q.limit)
    if (limit < 1 || limit > MAX_SEARCH_LIMIT) throw new InvalidRequestError(`limit must be from 1 to ${MAX_SEARCH_LIMIT}`)
    const filters: SearchFilters = {}
    for (const k of ['date_gte', 'date_lt', 'user_id', 'apikey', 'auth_type', 'indicator_type', 'indicator_value'] as const) {
      const v = q[k]
      if (v !== undefined) filters[k] = v
    }
    if (q.exclude_bulk_requests !== undefined) filters.exclude_bulk_requests = q.exclude_bulk_requests === 'true' || q.exclude_bulk_requests === '1'
    // A bad date or cursor is the store's INVALID_REQUEST, which toPublicError answers 400 with the store's message.
    return await store.searchHistory(req.apiKey!.tenant, filters, limit, q.cursor ?? null)
  })

  app.get('/api/v2/mgmt/usage', {
    schema: {
      tags: ['management'],
      summary: 'Usage of the tenant on one UTC day, and the calling key\'s quota',
      security: [{ apiKey: [] }],
      querystring: {
        type: 'object',
        additionalProperties: false,
        properties: { day: { type: 'string', pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}$' } }
      },
      response: { 200: usageSchema, ...errorsOf(400, 401, 503) }
    },
    onRequest: requireKey(verifier, null, deps.sessions)
  }, async (req) => {
    const key = req.apiKey!
    const day = (req.query as { day?: string }).day ?? utcDayOf(Date.now())
    // The pattern lets through impossible days (2024-02-30), which the store rejects with a code that is not a 400.
    const dayMs = Date.parse(`${day}T00:00:00.000Z`)
    if (!Number.isFinite(dayMs) || utcDayOf(dayMs) !== day) throw new InvalidRequestError('day must be a calendar day written YYYY-MM-DD')
    const report = await store.usage(key.tenant, null, day)
    const recorded = report.keys.find((k) => k.apikey === key.id)?.count ?? 0
    // Admission counts a request before its history is written, so the counter can run ahead of the rows.
    const used = key.quota === null ? recorded : Math.max(recorded, await deps.quota.used(key.id, day))
    return { ...report, key: { apikey: key.id, quota: key.quota, used, remaining: key.quota === null ? null : Math.max(0, key.quota - used) } }
  })

  app.post('/api/v2/mgmt/intel/reload', {
    schema: {
      tags: ['management'],
      summary: 'Rebuild the intel snapshot and swap it in (admin)',
      description: 'Requests in flight finish on the snapshot they started with; none fails.',
      security: [{ apiKey: [] }],
      response: { 200: reloadSchema, ...errorsOf(401, 403, 503) }
    },
    onRequest: requireKey(verifier, 'admin', deps.sessions)
  }, async (req) => {
    const result = deps.fleet === undefined ? await deps.intel.reload() : await deps.fleet.reload()
    req.log.info({ intel: result }, 'intel snapshot reloaded')
    return result
  })

  // Fetched feeds and the snapshot in use. URLs are shown redacted (no credentials, no query values).
  const sources = (): object => {
    const snap = deps.intel.snapshot
    const build = deps.intel.build === null ? null : buildSummary(deps.intel.build)
    const fleet = deps.fleet?.status() ?? null
    return {
      sources: deps.feeds.rows(),
      ...(fleet === null ? {} : { fleet }),
      snapshot: {
        version: snap.version,
        data_timestamp: snap.dataTimestamp,
        ...(build === null ? {} : { build: { warm: build.warm, build_ms: build.build_ms, parsed: build.parsed, reused: build.reused } }),
        sources: snap.sources.map((s) => {
          const b = build?.sources.get(s.name)
          return { name: s.name, kind: s.kind, indexed: s.indexed, rejected: s.rejected, parsed: b?.parsed ?? false, parse_ms: b?.parsed === true ? b.ms : 0 }
        })
      }
    }
  }
  app.get('/api/v2/mgmt/intel/sources', {
    schema: {
      tags: ['management'],
      summary: 'Status of each fetched feed (ok, stale, failed, pending) and the snapshot in use (admin)',
      security: [{ apiKey: [] }],
      response: { 200: sourcesSchema, ...errorsOf(401, 403) }
    },
    onRequest: requireKey(verifier, 'admin', deps.sessions)
  }, async () => sources())

  // Fetches every feed now (instead of waiting for its timer); answers once done and any rebuild swapped in.
  app.post('/api/v2/mgmt/intel/sources/refresh', {
    schema: {
      tags: ['management'],
      summary: 'Fetch every feed now; answers like GET /api/v2/mgmt/intel/sources once done (admin)',
      description: 'In a fleet (PostgreSQL) a follower asks the leader to fetch and answers at once; the new generation, if any, reaches it moments later.',
      security: [{ apiKey: [] }],
      response: { 200: sourcesSchema, ...errorsOf(401, 403, 503) }
    },
    onRequest: requireKey(verifier, 'admin', deps.sessions)
  }, async () => {
    // A follower fetches nothing: it asks the leader, whose new generation it adopts when one results.
    if (deps.fleet?.active === true && !deps.fleet.leading) await deps.fleet.requestRefresh()
    else await deps.feeds.refreshAll()
    return sources()
  })
}
