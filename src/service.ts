/**
 * Wires the running service from a Config: store, quota counter, intel snapshot and scoring pool, history
 * writer, and the app. Closing the app shuts everything down in order: stop accepting -> drain the pool ->
 * flush and close history -> close the quota counter and the store. Service.destroy(err) stops it all now instead.
 */
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import pino, { type Logger } from 'pino'
import { buildApp } from './app.ts'
import { lockDataDir } from './data-dir-lock.ts'
import { redactUrl } from './http/edges.ts'
import { storeOptions, type Config } from './config.ts'
import { startHistory, type HistoryClient } from './history/client.ts'
import { buildSnapshot, buildSummary, FeedRefresher, loadManifest, type IntelSourceOptions } from './intel/index.ts'
import { IntelService } from './pool/intel-service.ts'
import { SpareBuffers } from './bytes/byte-sink.ts'
import { openQuota, openStore, type QuotaCounter, type Store } from './store/index.ts'

/**
 * History part buffers kept between the writer handing them back and the scoring threads taking them: a bulk takes
 * one per chunk, so a few cover concurrent bulks; the rest are left to the collector.
 */
const kHistorySpares = 8

/** A started service (not yet listening). */
export interface Service {
  app: FastifyInstance
  store: Store
  quota: QuotaCounter
  intel: IntelService
  history: HistoryClient
  /** Fetched feeds (inactive when the manifest has none). */
  feeds: FeedRefresher
  logger: Logger
  /** Key printed on a first start, or null. */
  bootstrapKey: string | null
  /**
   * Stops everything now, whether or not a graceful app.close() is running (its shutdown timeout): open connections
   * are cut, fetches aborted, scoring tasks failed, the history writer stopped at its next transaction boundary
   * (records not yet in the store stay in the journal for the next start), then the quota counter and the store close.
   * Idempotent.
   */
  destroy: (err?: Error) => Promise<void>
}

/** Where the intel snapshot comes from. */
export function intelSource (config: Readonly<Config>): IntelSourceOptions & { feedsDir: string } {
  return { manifest: config.feeds, feedsDir: join(config.dataDir, 'feeds'), cacheDir: config.intelCacheDir ?? join(config.dataDir, 'intel'), asnDir: config.asnDir, countryDir: config.countryDir }
}

/** A request as its log lines show it: never its query string or headers (keys, cookies). */
function requestSerializer (req: { method?: string, url?: string, ip?: string, socket?: { remotePort?: number } }): object {
  return { method: req.method, url: redactUrl(req.url), remoteAddress: req.ip, remotePort: req.socket?.remotePort }
}

/** The service's logger: JSON lines on stdout; keys and URLs are redacted wherever they appear. */
export function createLogger (config: Readonly<Config>, destination?: pino.DestinationStream): Logger {
  return pino({
    level: config.logLevel,
    serializers: { req: requestSerializer, err: pino.stdSerializers.err },
    redact: { paths: ['req.headers["x-api-key"]', 'req.headers.authorization', 'req.headers.cookie', '*.databaseUrl', '*.redisUrl'], censor: '[redacted]' }
  }, destination)
}

/**
 * Starts every component and builds the app. On failure, whatever was started is closed again.
 * `scoringEntry` (a file URL) replaces the scoring worker module, for tests.
 */
export async function startService (config: Readonly<Config>, options: { logger?: Logger, scoringEntry?: string } = {}): Promise<Service> {
  const logger = options.logger ?? createLogger(config)
  mkdirSync(config.dataDir, { recursive: true })
  const lock = lockDataDir(config.dataDir)
  if (lock.warning !== null) logger.warn(lock.warning)
  const closers: Array<() => Promise<void>> = [async () => { lock.release() }]
  try {
    const sopts = storeOptions(config)
    const store = await openStore(sopts)
    closers.push(async () => await store.close())
    const quota = await openQuota(config.redisUrl === null ? { kind: 'memory', store } : { kind: 'redis', url: config.redisUrl, store, prefix: config.redisPrefix })
    closers.push(async () => await quota.close())

    let bootstrapKey: string | null = null
    if (config.bootstrapKey && await store.countKeys() === 0) {
      const created = await store.createKey({ tenant: 'default', permissions: ['verdict', 'verdict_bulk', 'mgmt', 'admin'], quota: null })
      bootstrapKey = created.key
    }

    const source = intelSource(config)
    // The manifest is validated here first, so a bad one is a startup error on the main thread.
    const specs = await loadManifest(source.manifest, { feedsDir: source.feedsDir })
    const built = await buildSnapshot(source)
    const startBuild = buildSummary(built)
    logger.info({ intel: { version: built.data.header.version, warm: built.warm, ms: Math.round(built.ms), bytes: built.data.buffer.byteLength, parsed: startBuild.parsed, reused: startBuild.reused } }, 'intel snapshot loaded')
    // scoringEntry swaps the scoring worker module (tests start fixtures that crash); it is not configuration.
    // Part buffers the history writer has stored come back through here to the scoring threads (byte-sink.ts).
    const historySpares = new SpareBuffers(kHistorySpares)
    const poolOptions = { size: config.poolSize, cacheSize: config.cacheSize, historySpares, ...(options.scoringEntry === undefined ? {} : { entry: options.scoringEntry }) }
    const intel = new IntelService(built.data, poolOptions, source, { warm: built.warm, ms: built.ms, report: built.report })
    closers.push(async () => await intel.close())
    await intel.ready()

    // Fetched feeds: a changed last good copy rebuilds the snapshot on a worker and swaps it in (leases keep
    // requests in flight on the snapshot they started with).
    const feeds = new FeedRefresher({
      specs,
      dir: source.feedsDir,
      logger: logger.child({ component: 'feeds' }),
      variables: config.feedVariables,
      retry: { attempts: config.feedAttempts, baseMs: config.feedRetryBaseMs, maxMs: Math.max(config.feedRetryBaseMs, 30_000) },
      validation: { maxRejectedRatio: config.feedMaxRejectedPercent / 100, minShrinkRatio: config.feedMinShrinkPercent / 100 },
      onChange: async () => {
        const r = await intel.reload()
        const b = intel.build === null ? null : buildSummary(intel.build)
        logger.info({ intel: { ...r, parsed: b?.parsed ?? [], reused: b?.reused ?? 0 } }, 'intel snapshot reloaded after a feed change')
      },
      snapshot: () => {
        const build = intel.build === null ? null : buildSummary(intel.build)
        return {
          version: intel.snapshot.version,
          data_timestamp: intel.snapshot.dataTimestamp,
          ...(build === null ? {} : { build: { warm: build.warm, build_ms: build.build_ms, parsed: build.parsed, reused: build.reused } })
        }
      }
    })
    closers.push(async () => await feeds.close())
    await feeds.start()

    const history = await startHistory({
      store: sopts,
      spoolDir: join(config.dataDir, 'spool'),
      journalDir: join(config.dataDir, 'journal'),
      journalLimit: config.journalLimit,
      journalSegmentBytes: config.journalSegmentBytes,
      durability: config.historyDurability,
      asyncWindowMs: config.historyAsyncWindowMs,
      asyncWindowBytes: config.historyAsyncWindowBytes,
      commitTimeoutMs: config.historyCommitTimeoutMs,
      batch: config.historyBatch,
      flushMs: config.historyFlushMs,
      retentionDays: config.retentionDays,
      maxBacklog: config.historyMaxBacklog,
      logger,
      spares: historySpares
    })
    closers.push(async () => await history.close())

    const app = await buildApp(config, { store, quota, intel, history, feeds, logger })
    app.addHook('onClose', async () => {
      // Order matters: stop fetching (a rebuild in flight finishes), requests are done, so drain scoring, then
      // flush history, then close the stores.
      await feeds.close()
      await intel.close()
      await history.close()
      await quota.close()
      await store.close()
      lock.release()
    })
    await app.ready()
    let destroying: Promise<void> | null = null
    const destroy = async (err?: Error): Promise<void> => {
      destroying ??= (async () => {
        app.server.closeAllConnections()
        await Promise.allSettled([feeds.destroy(), intel.destroy()])
        await history.destroy(err)
        await quota.close().catch(() => {})
        await store.close().catch(() => {})
        lock.release()
      })()
      await destroying
    }
    return { app, store, quota, intel, history, feeds, logger, bootstrapKey, destroy }
  } catch (err) {
    for (const close of closers.reverse()) await close().catch(() => {})
    throw err
  }
}
