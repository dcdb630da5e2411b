/**
 * GET /api/v2/ioc/health (docs/API.md "Health"), the probes GET /livez and GET /readyz, and the retired
 * POST /api/v2/ioc/history, which answers 404 to any call with no plan to return.
 */
import type { FastifyInstance } from 'fastify'
import { NotFoundError } from '../errors.ts'
import { errorsOf, healthSchema, probeSchema } from './response-schemas.ts'
import type { HistorySink } from '../history/types.ts'
import type { FeedRefresher } from '../intel/index.ts'
import type { IntelService } from '../pool/intel-service.ts'
import type { Fleet } from '../fleet/fleet.ts'
import type { QuotaCounter, Store } from '../store/index.ts'

/** The retired history query: 404 to any call (docs/API.md "Endpoints"). */
export const kRetiredHistoryRoute = '/api/v2/ioc/history'
/** The route that replaced the retired history query. */
export const kHistoryReplacement = 'GET /api/v2/mgmt/enrich-logs/search-history'

/** What health reads. */
export interface ServiceRouteDeps {
  store: Pick<Store, 'ping'>
  quota: Pick<QuotaCounter, 'ping'>
  history: HistorySink
  intel: IntelService
  feeds: Pick<FeedRefresher, 'rows'>
  closing: () => boolean
  /** Instances sharing the store (health shows this one's role and generation). */
  fleet?: Pick<Fleet, 'status' | 'leaderless'>
}

/**
 * Longest a health or readiness answer waits for the store or the quota counter, ms: an answer within a probe's usual
 * 1 s timeout that says the part is unreachable, rather than a probe timing out on a server that does not answer.
 */
const kCheckDeadlineMs = 750

type CheckResult = 'ok' | 'error'

/**
 * A part's check, run at most once at a time: calls that arrive while it runs share its answer, so a flood of
 * unauthenticated probes costs the part one query at a time. A check not answered within kCheckDeadlineMs is an
 * error (it goes on in the background and the next call after it ends runs a fresh one).
 */
function sharedCheck (fn: () => Promise<void>): () => Promise<CheckResult> {
  let running: Promise<CheckResult> | null = null
  return async () => {
    running ??= (async (): Promise<CheckResult> => {
      let timer: NodeJS.Timeout | undefined
      const late = new Promise<CheckResult>((resolve) => { timer = setTimeout(() => resolve('error'), kCheckDeadlineMs) })
      const done = fn().then((): CheckResult => 'ok', (): CheckResult => 'error')
      try {
        return await Promise.race([done, late])
      } finally {
        clearTimeout(timer)
        // Shared until the check itself ends (a late one too): no second query while one still waits.
        void done.finally(() => { running = null })
      }
    })()
    return await running
  }
}

/** The health and readiness reason of a journal write failure, by its error code. */
function journalReason (code: string): string {
  return `history journal cannot be written (${code})`
}

/** Registers health and the retired history route. */
export function serviceRoutes (app: FastifyInstance, deps: ServiceRouteDeps): void {
  const storeCheck = sharedCheck(async () => await deps.store.ping())
  const quotaCheck = sharedCheck(async () => await deps.quota.ping())
  app.get('/api/v2/ioc/health', {
    schema: {
      tags: ['service'],
      summary: 'Health: ok, degraded or unavailable (503), with the state of each part',
      response: { 200: healthSchema, 503: healthSchema }
    }
  }, async (_req, reply) => {
    const [store, quota] = await Promise.all([storeCheck(), quotaCheck()])
    const h = deps.history.state()
    const snap = deps.intel.snapshot
    const reasons: string[] = []
    let status: 'ok' | 'degraded' | 'unavailable' = 'ok'
    if (deps.closing()) {
      status = 'unavailable'
      reasons.push('shutting down')
    }
    if (store === 'error') {
      // History waits in the journal while the store is down; verdicts still work, but keys cannot be checked.
      status = 'unavailable'
      reasons.push('store unreachable')
    }
    if (quota === 'error') {
      status = 'unavailable'
      reasons.push('quota counter unreachable')
    }
    if (h.status === 'down') {
      // Requests are still answered (their history is journalled); a new writer thread is starting.
      if (status === 'ok') status = 'degraded'
      reasons.push(h.reason ?? 'history writer down')
    } else if (h.status === 'store_failing' && status === 'ok') {
      status = 'degraded'
      reasons.push(h.reason ?? 'history store unavailable; records wait in the journal')
    }
    if (h.journalError !== null) {
      // Every verdict needs its history journalled first: while the journal cannot be written, none is answered.
      status = 'unavailable'
      reasons.push(journalReason(h.journalError))
    }
    // A fetched feed that is stale or refused keeps its last good copy in use: verdicts work, on older data.
    const feeds = deps.feeds.rows()
    const feedCounts = { ok: 0, stale: 0, failed: 0, pending: 0 }
    for (const f of feeds) {
      feedCounts[f.status]++
      if ((f.status === 'stale' || f.status === 'failed')) reasons.push(`feed ${f.name} is ${f.status}`)
    }
    if ((feedCounts.stale > 0 || feedCounts.failed > 0) && status === 'ok') status = 'degraded'
    // A follower that cannot adopt the fleet's published snapshot serves the one it has: verdicts work, maybe on older data.
    const fleet = deps.fleet?.status() ?? null
    if (fleet !== null && fleet.error !== null) {
      if (status === 'ok') status = 'degraded'
      reasons.push(`cannot adopt the fleet's published snapshot: ${fleet.error}`)
    }
    // No instance has shown itself as leader for 30 s (a leader stopped but still holding its lock, or an election
    // that keeps failing): verdicts work, but no one fetches feeds or publishes snapshots.
    if (fleet !== null && deps.fleet?.leaderless() === true) {
      if (status === 'ok') status = 'degraded'
      reasons.push('no instance of the fleet leads: feeds are not fetched')
    }
    reply.code(status === 'unavailable' ? 503 : 200)
    return {
      status,
      reasons,
      checks: {
        store,
        quota,
        history: {
          status: h.status,
          pending: h.pending,
          written: h.written,
          legacy_spool_bytes: h.legacySpoolBytes,
          // Deprecated name of legacy_spool_bytes (docs/API.md "Health").
          spool_bytes: h.legacySpoolBytes,
          journal_bytes: h.journalBytes,
          journal_error: h.journalError,
          journal_limit: h.journalLimit,
          writer_restarts: h.restarts
        },
        intel: {
          version: snap.version,
          data_timestamp: snap.dataTimestamp,
          feeds: feedCounts,
          ...(fleet === null ? {} : { fleet: { instance: fleet.instance, role: fleet.role, leader: fleet.leader, generation: fleet.generation, published_generation: fleet.published_generation, error: fleet.error } })
        },
        pool: { workers: deps.intel.size }
      }
    }
  })

  // Probes for orchestrators. livez: the process answers (restart it when it does not). readyz: it can serve verdicts
  // now (snapshot mapped, pool accepting, store and quota counter reachable, history writer up), else 503 so a load
  // balancer sends traffic elsewhere; unlike health it does not go degraded, only ready or not.
  app.get('/livez', { schema: { tags: ['service'], summary: 'Liveness: the process answers', response: { 200: probeSchema } } }, async () => ({ status: 'ok' }))
  app.get('/readyz', {
    schema: { tags: ['service'], summary: 'Readiness: 200 when verdicts can be served, else 503 with reasons', response: { 200: probeSchema, 503: probeSchema } }
  }, async (_req, reply) => {
    const [store, quota] = await Promise.all([storeCheck(), quotaCheck()])
    const reasons: string[] = []
    if (deps.closing()) reasons.push('shutting down')
    if (store === 'error') reasons.push('store unreachable')
    if (quota === 'error') reasons.push('quota counter unreachable')
    const refusal = deps.history.refusal()
    if (refusal !== null) reasons.push(refusal)
    const journalError = deps.history.state().journalError
    // A journal that refuses appends for good says so in the refusal already.
    if (journalError !== null && refusal === null) reasons.push(journalReason(journalError))
    reply.code(reasons.length === 0 ? 200 : 503)
    return reasons.length === 0 ? { status: 'ok' } : { status: 'unavailable', reasons }
  })

  // Retired: always 404, whatever the key or body, with a pointer to the replacement. It answers in
  // onRequest, before the body is read, so no content type, malformed or oversized body can turn it into 4xx else.
  const retired = async (): Promise<never> => {
    throw new NotFoundError(`POST /api/v2/ioc/history is retired; use ${kHistoryReplacement}`)
  }
  app.post(kRetiredHistoryRoute, {
    schema: {
      tags: ['service'],
      summary: 'Retired: always 404, naming GET /api/v2/mgmt/enrich-logs/search-history',
      deprecated: true,
      response: errorsOf(404)
    },
    onRequest: retired
  }, retired)
}
