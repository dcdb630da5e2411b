/**
 * Management routes: search-history (the retired history query's replacement, spec 4.4), usage, intel reload.
 * Every route is tenant-scoped by the caller's key.
 */
import type { FastifyInstance } from 'fastify'
import { InvalidRequestError } from '../errors.ts'
import type { FeedRefresher } from '../intel/index.ts'
import type { IntelService } from '../pool/intel-service.ts'
import { StoreError, utcDayOf, type QuotaCounter, type SearchFilters, type Store } from '../store/index.ts'
import { requireKey, type KeyVerifier } from './auth.ts'

const kDefaultLimit = 100
const kMaxLimit = 1000

/** What the management routes need. */
export interface MgmtRouteDeps {
  store: Pick<Store, 'searchHistory' | 'usage'>
  /** Real-time counters (the store's usage lags by the history flush interval). */
  quota: Pick<QuotaCounter, 'used'>
  intel: IntelService
  feeds: Pick<FeedRefresher, 'rows' | 'refreshAll'>
  verifier: KeyVerifier
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
    indicator_type: { type: 'string', enum: ['ip', 'domain', 'ip_block', 'file_hash_sha256', 'asn'] },
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
    schema: { querystring: kSearchQuery },
    onRequest: requireKey(verifier, null)
  }, async (req) => {
    const q = req.query as SearchQuery
    const limit = q.limit === undefined ? kDefaultLimit : Number(q.limit)
    if (limit < 1 || limit > kMaxLimit) throw new InvalidRequestError(`limit must be from 1 to ${kMaxLimit}`)
    const filters: SearchFilters = {}
    for (const k of ['date_gte', 'date_lt', 'user_id', 'apikey', 'auth_type', 'indicator_type', 'indicator_value'] as const) {
      const v = q[k]
      if (v !== undefined) filters[k] = v
    }
    if (q.exclude_bulk_requests !== undefined) filters.exclude_bulk_requests = q.exclude_bulk_requests === 'true' || q.exclude_bulk_requests === '1'
    try {
      return await store.searchHistory(req.apiKey!.tenant, filters, limit, q.cursor ?? null)
    } catch (err) {
      // A bad date or cursor is the client's mistake: the store says so with its INVALID_REQUEST code, which
      // carries no HTTP status of its own and would otherwise surface as a 500.
      if (err instanceof StoreError && err.code === 'INVALID_REQUEST') throw new InvalidRequestError(err.message, { cause: err })
      throw err
    }
  })

  app.get('/api/v2/mgmt/usage', {
    schema: {
      querystring: {
        type: 'object',
        additionalProperties: false,
        properties: { day: { type: 'string', pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}$' } }
      }
    },
    onRequest: requireKey(verifier, null)
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
    onRequest: requireKey(verifier, 'admin')
  }, async (req) => {
    const result = await deps.intel.reload()
    req.log.info({ intel: result }, 'intel snapshot reloaded')
    return result
  })

  // Fetched feeds and the snapshot in use. URLs are shown redacted (no credentials, no query values).
  const sources = (): object => {
    const snap = deps.intel.snapshot
    return {
      sources: deps.feeds.rows(),
      snapshot: {
        version: snap.version,
        data_timestamp: snap.dataTimestamp,
        sources: snap.sources.map((s) => ({ name: s.name, kind: s.kind, indexed: s.indexed, rejected: s.rejected }))
      }
    }
  }
  app.get('/api/v2/mgmt/intel/sources', { onRequest: requireKey(verifier, 'admin') }, async () => sources())

  // Fetches every feed now (instead of waiting for its timer); answers once done and any rebuild swapped in.
  app.post('/api/v2/mgmt/intel/sources/refresh', { onRequest: requireKey(verifier, 'admin') }, async () => {
    await deps.feeds.refreshAll()
    return sources()
  })
}
