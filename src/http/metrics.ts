/**
 * Prometheus metrics at GET /metrics (prom-client), one registry per app. Request counts and latencies by route and
 * status come from an onResponse hook; indicators and cache hits from the verdict orchestration (VerdictObserver);
 * gauges (in-flight indicators, pool queue, history backlog and journal, snapshot age) are read when scraped, from the
 * parts that own them, so a figure that lives in a worker thread is reported by the main thread that sees it.
 */
import type { FastifyInstance } from 'fastify'
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client'
import type { Admission } from '../bulk/admission.ts'
import type { VerdictObserver } from '../bulk/verdicts.ts'
import type { FeedbackObserver } from './routes-feedback.ts'
import { INDICATOR_TYPES } from '../engine/index.ts'
import type { HistorySink } from '../history/types.ts'
import type { FeedRefresher } from '../intel/index.ts'
import type { IntelService } from '../pool/intel-service.ts'
import type { RetroHunter } from '../pool/retro-hunt.ts'
import type { WebhookSender } from '../pool/webhook-sender.ts'

/** What the scrape reads. */
export interface MetricSources {
  admission: Admission
  intel: IntelService
  history: HistorySink
  feeds: Pick<FeedRefresher, 'rows'>
  /** Retro-hunt passes and hits (absent: not counted). */
  retroHunt?: Pick<RetroHunter, 'state'>
  /** Webhook deliveries (absent: not counted). */
  webhooks?: Pick<WebhookSender, 'state'>
}

/** Seconds: from a cached single verdict (~1 ms) to a 10,000-indicator bulk under load (seconds). */
const kDurationBuckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

/** The app's metrics and the observer the verdict orchestration reports to. */
export class Metrics implements VerdictObserver, FeedbackObserver {
  readonly registry = new Registry()
  private readonly requests: Counter<'method' | 'route' | 'status'>
  private readonly duration: Histogram<'method' | 'route' | 'status'>
  private readonly indicators: Counter<'mode'>
  private readonly invalid: Counter<'mode'>
  private readonly cacheHits: Counter<'mode'>
  private readonly byType: Counter<'type'>
  private readonly byCategory: Counter<'category'>
  private readonly feedbacks: Counter<'verdict'>

  constructor (sources: MetricSources) {
    const registers = [this.registry]
    collectDefaultMetrics({ register: this.registry, prefix: 'iocv_' })
    this.requests = new Counter({ name: 'iocv_http_requests_total', help: 'HTTP requests answered, by route and status', labelNames: ['method', 'route', 'status'], registers })
    this.duration = new Histogram({ name: 'iocv_http_request_duration_seconds', help: 'Time from request to answer, by route and status', labelNames: ['method', 'route', 'status'], buckets: kDurationBuckets, registers })
    this.indicators = new Counter({ name: 'iocv_indicators_scored_total', help: 'Indicators answered with a verdict or an item error, by mode (single, bulk)', labelNames: ['mode'], registers })
    this.invalid = new Counter({ name: 'iocv_indicators_invalid_total', help: 'Indicators answered with an error (invalid value), by mode', labelNames: ['mode'], registers })
    this.cacheHits = new Counter({ name: 'iocv_verdict_cache_hits_total', help: 'Indicators answered from the verdict cache, by mode; ratio = this / iocv_indicators_scored_total', labelNames: ['mode'], registers })
    this.byType = new Counter({ name: 'iocv_indicators_by_type_total', help: 'Valid indicators answered, by indicator type', labelNames: ['type'], registers })
    this.byCategory = new Counter({ name: 'iocv_indicators_by_category_total', help: 'Valid indicators answered, by risk category', labelNames: ['category'], registers })
    this.feedbacks = new Counter({ name: 'iocv_feedback_total', help: 'Analysts\' feedback recorded, by verdict (false_positive, true_positive)', labelNames: ['verdict'], registers })
    // The history writer thread reports running totals; these counters add what changed since the last scrape.
    const runningTotal = (name: string, help: string, read: () => number): void => {
      let seen = 0
      // eslint-disable-next-line no-new
      new Counter({
        name,
        help,
        registers,
        collect () {
          const now = read()
          if (now > seen) this.inc(now - seen)
          seen = now
        }
      })
    }
    runningTotal('iocv_history_store_writes_total', 'History batches written to the store (one transaction each)', () => sources.history.state().storeWrites)
    runningTotal('iocv_history_store_write_seconds_total', 'Seconds the store took to write history batches; per batch = this / iocv_history_store_writes_total',
      () => sources.history.state().storeWriteSeconds)
    const hunt = sources.retroHunt
    if (hunt !== undefined) {
      runningTotal('iocv_retro_hunt_passes_total', 'Retro-hunt passes finished (one per snapshot swap), failed ones included', () => hunt.state().passes)
      runningTotal('iocv_retro_hunt_failed_passes_total', 'Retro-hunt passes that failed', () => hunt.state().failedPasses)
      runningTotal('iocv_retro_hunt_hits_total', 'Retro-hunt hits recorded', () => hunt.state().hits)
    }
    const hooks = sources.webhooks
    if (hooks !== undefined) {
      runningTotal('iocv_retro_hunt_deliveries_total', 'Retro-hunt webhook deliveries that reached their receiver (2xx)', () => hooks.state().delivered)
      runningTotal('iocv_retro_hunt_delivery_retries_total', 'Retro-hunt webhook attempts that failed and will be retried', () => hooks.state().retried)
      runningTotal('iocv_retro_hunt_deliveries_failed_total', 'Retro-hunt webhook deliveries given up after 24 h of retries', () => hooks.state().failed)
    }
    const gauge = (name: string, help: string, read: () => number): void => {
      // eslint-disable-next-line no-new
      new Gauge({ name, help, registers, collect () { this.set(read()) } })
    }
    gauge('iocv_indicators_in_flight', 'Indicators admitted and not yet answered', () => sources.admission.inFlight)
    gauge('iocv_pool_threads', 'Scoring threads (0 = inline mode)', () => sources.intel.size)
    gauge('iocv_pool_queue_depth', 'Scoring tasks queued or running across shards', () => sources.intel.pending)
    gauge('iocv_history_backlog_records', 'History records accepted and not yet committed to the store', () => sources.history.state().pending)
    gauge('iocv_history_written_records', 'History records committed since start', () => sources.history.state().written)
    gauge('iocv_history_journal_bytes', 'History journal bytes not yet in the store (at IOC_JOURNAL_LIMIT, 503 OVERLOADED)', () => sources.history.state().journalBytes)
    gauge('iocv_history_legacy_spool_bytes', 'Bytes of a history spool left by a version before the journal, replayed at start', () => sources.history.state().legacySpoolBytes)
    gauge('iocv_history_spool_bytes', 'Deprecated: the former name of iocv_history_legacy_spool_bytes', () => sources.history.state().legacySpoolBytes)
    gauge('iocv_history_up', '1 while the history writer accepts records, 0 when it is down', () => sources.history.state().status === 'down' ? 0 : 1)
    gauge('iocv_pool_utilization', 'Mean share of time the scoring threads spend running tasks since they started (0-1)', () => sources.intel.utilization)
    // eslint-disable-next-line no-new
    new Gauge({
      name: 'iocv_feed_age_seconds',
      help: 'Seconds since each fetched feed was last downloaded and accepted (absent until its first success)',
      labelNames: ['feed'],
      registers,
      collect () {
        this.reset()
        const now = Date.now()
        for (const row of sources.feeds.rows(now)) {
          if (row.last_success_at !== null) this.set({ feed: row.name }, (now - Date.parse(row.last_success_at)) / 1000)
        }
      }
    })
    // eslint-disable-next-line no-new
    new Gauge({
      name: 'iocv_feed_up',
      help: 'Per fetched feed: 1 when ok, 0 when stale, failed or never fetched',
      labelNames: ['feed'],
      registers,
      collect () {
        this.reset()
        for (const row of sources.feeds.rows()) this.set({ feed: row.name }, row.status === 'ok' ? 1 : 0)
      }
    })
    gauge('iocv_intel_snapshot_age_seconds', 'Seconds since the intel snapshot in use was compiled', () => (Date.now() - Date.parse(sources.intel.snapshot.dataTimestamp)) / 1000)
  }

  /** Records one answered request. */
  observeRequest (method: string, route: string, status: number, seconds: number): void {
    const labels = { method, route, status: String(status) }
    this.requests.inc(labels)
    this.duration.observe(labels, seconds)
  }

  /** VerdictObserver: indicators of one answered request. */
  scored (mode: 'single' | 'bulk', count: number, cacheHits: number, invalid: number, types: ArrayLike<number>, categories: Readonly<Record<string, number>>): void {
    this.indicators.inc({ mode }, count)
    for (const category in categories) this.byCategory.inc({ category }, categories[category] as number)
    for (let i = 0; i < INDICATOR_TYPES.length; i++) {
      const n = types[i] as number
      if (n > 0) this.byType.inc({ type: INDICATOR_TYPES[i] as string }, n)
    }
    if (cacheHits > 0) this.cacheHits.inc({ mode }, cacheHits)
    if (invalid > 0) this.invalid.inc({ mode }, invalid)
  }

  /** FeedbackObserver: one recorded feedback entry. */
  feedback (verdict: 'false_positive' | 'true_positive'): void {
    this.feedbacks.inc({ verdict })
  }
}

/** Adds the request hook and GET /metrics (no auth: bind it to a private interface or scrape through a proxy). */
export function metricsRoutes (app: FastifyInstance, metrics: Metrics): void {
  app.addHook('onResponse', (req, reply, done) => {
    // The route's pattern, never the raw URL: bounded label values, and no query string (which may hold secrets).
    metrics.observeRequest(req.method, req.routeOptions.url ?? 'unmatched', reply.statusCode, reply.elapsedTime / 1000)
    done()
  })
  app.get('/metrics', { schema: { hide: true } }, async (_req, reply) => {
    reply.type(metrics.registry.contentType)
    return await metrics.registry.metrics()
  })
}
