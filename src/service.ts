/**
 * Wires the running service from a Config: its long-lived parts (kServiceParts) are started in order through one
 * Lifecycle (src/lifecycle.ts), which closes them in reverse when the app closes (the app's onClose hook), destroys
 * them in reverse on Service.destroy(err), and unwinds those started when a start fails.
 */
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import pino, { type Logger } from 'pino'
import { buildApp } from './app.ts'
import { Lifecycle, type PartSpec } from './lifecycle.ts'
import { lockDataDir } from './data-dir-lock.ts'
import { requestSerializer } from './http/request-logger.ts'
import { storeOptions, type Config } from './config.ts'
import { startHistory, type HistoryClient } from './history/client.ts'
import { buildSnapshot, buildSummary, cachedSnapshot, FeedRefresher, loadManifest, type IntelSourceOptions } from './intel/index.ts'
import { IntelService } from './pool/intel-service.ts'
import { Fleet } from './fleet/fleet.ts'
import { RetroHunter } from './pool/retro-hunt.ts'
import { WebhookSender, webhookKey } from './pool/webhook-sender.ts'
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
  /** Instances sharing the PostgreSQL store (inactive on SQLite). */
  fleet: Fleet
  /** Fetched feeds (inactive when the manifest has none). */
  feeds: FeedRefresher
  /** Retro-hunt passes on snapshot swaps. */
  retroHunt: RetroHunter
  /** Deliveries of retro-hunt hits to webhooks. */
  webhooks: WebhookSender
  logger: Logger
  /** Key printed on a first start, or null. */
  bootstrapKey: string | null
  /** Names of the started parts, in start order (kServiceParts). */
  parts: readonly string[]
  /**
   * Stops everything now, whether or not a graceful app.close() is running (its shutdown timeout): every part is
   * destroyed in reverse start order (kServiceParts says what that does to each). Idempotent.
   */
  destroy: (err?: Error) => Promise<void>
}

/** Where the intel snapshot comes from. */
export function intelSource (config: Readonly<Config>): IntelSourceOptions & { feedsDir: string } {
  return { manifest: config.feeds, feedsDir: join(config.dataDir, 'feeds'), cacheDir: config.intelCacheDir ?? join(config.dataDir, 'intel'), asnDir: config.asnDir, countryDir: config.countryDir }
}

/** The service's logger: JSON lines on stdout; keys and URLs are redacted wherever they appear. */
export function createLogger (config: Readonly<Config>, destination?: pino.DestinationStream): Logger {
  return pino({
    level: config.logLevel,
    serializers: { req: requestSerializer, err: pino.stdSerializers.err },
    redact: { paths: ['req.headers["x-api-key"]', 'req.headers.authorization', 'req.headers.cookie', '*.databaseUrl', '*.redisUrl', '*.webhookSecretKey', '*.secret'], censor: '[redacted]' }
  }, destination)
}

/**
 * The service's long-lived parts in start order; they close and are destroyed in the reverse order. A failed start
 * stops those started, in reverse. docs/ARCHITECTURE.md shows this table (test/e2e/lifecycle.test.ts checks it).
 * Why this order: scoring drains (intel) before history is flushed, and history is flushed before the stores close.
 */
export const kServiceParts: readonly PartSpec[] = [
  {
    name: 'data-dir',
    start: 'takes the data directory\'s lock (`src/data-dir-lock.ts`): a second instance on it is refused',
    close: 'releases the lock',
    destroy: '-'
  },
  {
    name: 'store',
    start: 'opens and migrates SQLite or PostgreSQL (`src/store/`); a first start\'s bootstrap key is made in it once every part has started',
    close: 'closes the connections',
    destroy: '-'
  },
  {
    name: 'quota',
    start: 'opens the quota counter: in memory, or Redis (pinged)',
    close: 'closes the connection',
    destroy: '-'
  },
  {
    name: 'history',
    start: '`startHistory` (`src/history/client.ts`): opens the journal, starts the writer thread (which writes what the store lacks)',
    close: 'syncs the journal, waits for the writer to copy it into the store, stops the thread',
    destroy: 'refuses writes (`HISTORY_CLOSED`), syncs the journal; the writer ends its store transaction and stops, then the thread is terminated (after 8 s at most); what the store lacks stays in the journal'
  },
  {
    name: 'fleet',
    start: '`Fleet` (`src/fleet/fleet.ts`), PostgreSQL only: listens for key and allowlist changes and snapshot generations; campaigns for the lead once `feeds` started',
    close: 'stops leading (another instance leads at once), following and listening',
    destroy: '-'
  },
  {
    name: 'intel',
    start: 'loads the fleet\'s published snapshot, or loads or builds one; starts `IntelService` (`src/pool/intel-service.ts`) and its scoring threads',
    close: 'refuses new leases, waits for held ones, drains and stops every pool',
    destroy: 'fails queued and running scoring tasks, stops every pool'
  },
  {
    name: 'webhooks',
    start: '`WebhookSender` (`src/pool/webhook-sender.ts`): opens the webhook key, polls the store for retro-hunt hits not yet handed on (queuing their deliveries in the transaction that marks them) and for due deliveries',
    close: 'stops polling, waits for attempts in flight (each bounded by `IOC_WEBHOOK_TIMEOUT_MS`)',
    destroy: 'aborts attempts in flight (their deliveries stay pending and are sent again)'
  },
  {
    name: 'retro-hunt',
    start: '`RetroHunter` (`src/pool/retro-hunt.ts`): told of every snapshot swap, runs one retro-hunt pass per swap on a thread of its own, and one over every listing at start when a pass is owed or the snapshot is not the one last hunted with',
    close: 'starts no new pass and notes a waiting one as owed to the next start; a running pass gets back the normal priority of its thread (where the process may raise it), stops at its next part and closes its store connection',
    destroy: '-'
  },
  {
    name: 'feeds',
    start: '`FeedRefresher` (`src/intel/refresher.ts`): one timer per fetched feed (in a fleet only the leader fetches); the first fetch in the background',
    close: 'stops the timers and a download in flight (it has stored nothing), waits for a rebuild in flight',
    destroy: 'aborts a download and a validation in flight, stops the timers'
  },
  {
    name: 'http',
    start: '`buildApp` (`src/app.ts`): routes and hooks, ready; `main.ts` listens',
    close: 'nothing more: `app.close()` stops listening, drains connections (`src/http/connection-drain.ts`), finishes running requests, then runs this close (its `onClose` hook)',
    destroy: 'cuts every open connection'
  }
]

/**
 * Starts every part and builds the app; if a part fails to start, those started are closed again in reverse.
 * `scoringEntry` (a file URL) replaces the scoring worker module, for tests.
 */
export async function startService (config: Readonly<Config>, options: { logger?: Logger, scoringEntry?: string } = {}): Promise<Service> {
  const logger = options.logger ?? createLogger(config)
  for (const warning of config.warnings) logger.warn(warning)
  const source = intelSource(config)
  // The manifest is validated first: a bad one is a startup error on the main thread, before any part starts.
  const specs = await loadManifest(source.manifest, { feedsDir: source.feedsDir })
  const life = new Lifecycle(kServiceParts, { budgetMs: config.shutdownTimeoutMs, logger: logger.child({ component: 'lifecycle' }) })
  await life.start('data-dir', () => {
    mkdirSync(config.dataDir, { recursive: true, mode: 0o700 })
    const lock = lockDataDir(config.dataDir)
    if (lock.warning !== null) logger.warn(lock.warning)
    return lock
  }, (lock) => ({ close: () => { lock.release() } }))

  const sopts = storeOptions(config)
  const store = await life.start('store', async () => await openStore(sopts))

  const quota = await life.start('quota', async () => await openQuota(config.redisUrl === null
    ? { kind: 'memory', store }
    : { kind: 'redis', url: config.redisUrl, store, prefix: config.redisPrefix }))

  // Part buffers the history writer has stored come back through here to the scoring threads (byte-sink.ts).
  const historySpares = new SpareBuffers(kHistorySpares)
  const history = await life.start('history', async () => await startHistory({
    store: sopts,
    legacySpoolDir: join(config.dataDir, 'spool'),
    journalDir: join(config.dataDir, 'journal'),
    journalLimit: config.journalLimit,
    journalSegmentBytes: config.journalSegmentBytes,
    journalPreallocateBytes: config.journalPreallocateBytes,
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
  }))

  const fleet = await life.start('fleet', async () => {
    const fleet = new Fleet({
      url: config.store === 'postgres' ? config.databaseUrl : null,
      schema: config.databaseSchema,
      instance: config.instanceName,
      logger: logger.child({ component: 'fleet' })
    })
    await fleet.start()
    return fleet
  })

  const intel = await life.start('intel', async () => {
    // In a fleet, the published generation (no build, no fetch); else, or when none is published yet, a build.
    const published = await fleet.loadPublished()
    const built = published === null ? await buildSnapshot(source) : { data: published.data, warm: true, ms: 0, report: null }
    if (published !== null) {
      logger.info({ intel: { version: built.data.header.version, generation: published.published.generation, published_by: published.published.publishedBy } }, 'intel snapshot of the fleet loaded')
    } else {
      const startBuild = buildSummary(built)
      logger.info({ intel: { version: built.data.header.version, warm: built.warm, ms: Math.round(built.ms), bytes: built.data.buffer.byteLength, parsed: startBuild.parsed, reused: startBuild.reused } }, 'intel snapshot loaded')
    }
    // scoringEntry swaps the scoring worker module (tests start fixtures that crash); it is not configuration.
    const poolOptions = { size: config.poolSize, cacheSize: config.cacheSize, historySpares, ...(options.scoringEntry === undefined ? {} : { entry: options.scoringEntry }) }
    const intel = new IntelService(built.data, poolOptions, source, { warm: built.warm, ms: built.ms, report: built.report })
    try {
      await intel.ready()
    } catch (err) {
      await intel.destroy()
      throw err
    }
    return intel
  })

  const webhooks = await life.start('webhooks', () => {
    const sender = new WebhookSender({
      store,
      key: webhookKey(config.webhookSecretKey, join(config.dataDir, 'webhook.key')),
      allowPrivate: config.webhookAllowPrivate,
      retryBaseMs: config.webhookRetryBaseMs,
      timeoutMs: config.webhookTimeoutMs,
      logger: logger.child({ component: 'webhooks' })
    })
    sender.start()
    return sender
  })

  // Every swap after this point (feed refresh, reload) is matched against the tenants' history off the request path.
  const retroHunt = await life.start('retro-hunt', () => {
    const hunter = new RetroHunter({
      store: sopts,
      days: config.retroHuntDays,
      retentionDays: config.retentionDays,
      dutyPercent: config.retroHuntDutyPercent,
      lowPriority: config.retroHuntLowPriority,
      logger: logger.child({ component: 'retro-hunt' }),
      onHits: async () => { await webhooks.handOn() },
      owed: store.retroHunt,
      // The snapshot last hunted with, while the intel cache still holds it, so a start hunts only what changed.
      previous: async (seen) => source.cacheDir === null ? null : await cachedSnapshot(source.cacheDir, seen.inputKey, seen.version)
    })
    // In a fleet every instance swaps to each generation; only the leader, which published it, hunts (once per
    // generation). Alone (or on SQLite) this instance leads.
    intel.onSwap((prev, next) => { if (fleet.leading) hunter.onSwap(prev, next) })
    // A pass cut by the last stop (or a crash, or a leader that died) runs again, on the instance that leads.
    fleet.onLead(() => { void hunter.resumeOwed(intel.data) })
    if (fleet.leading) void hunter.resumeOwed(intel.data)
    return hunter
  }, (hunter) => ({ close: async () => { await hunter.close() } }))

  // Fetched feeds: a changed last good copy rebuilds the snapshot on a worker and swaps it in (leases keep
  // requests in flight on the snapshot they started with).
  const feeds = await life.start('feeds', async () => {
    const feeds = new FeedRefresher({
      specs,
      dir: source.feedsDir,
      logger: logger.child({ component: 'feeds' }),
      variables: config.feedVariables,
      retry: { attempts: config.feedAttempts, baseMs: config.feedRetryBaseMs, maxMs: Math.max(config.feedRetryBaseMs, 30_000) },
      validation: { maxRejectedRatio: config.feedMaxRejectedPercent / 100, minShrinkRatio: config.feedMinShrinkPercent / 100 },
      onChange: async () => {
        // In a fleet the leader publishes the new snapshot before it swaps (src/fleet/fleet.ts).
        const r = await fleet.rebuild()
        const b = intel.build === null ? null : buildSummary(intel.build)
        logger.info({ intel: { ...r, parsed: b?.parsed ?? [], reused: b?.reused ?? 0 } }, 'intel snapshot reloaded after a feed change')
      },
      // In a fleet only the leader fetches; it shares what it fetched with the fleet (src/fleet/fleet.ts).
      fetching: () => fleet.leading,
      onStored: async (name, meta, body) => { await fleet.shareFeed(name, meta, body) },
      onStatus: (states) => { fleet.shareStatus(states) },
      snapshot: () => {
        const build = intel.build === null ? null : buildSummary(intel.build)
        const status = fleet.status()
        return {
          version: intel.snapshot.version,
          data_timestamp: intel.snapshot.dataTimestamp,
          ...(build === null ? {} : { build: { warm: build.warm, build_ms: build.build_ms, parsed: build.parsed, reused: build.reused } }),
          ...(status === null ? {} : { fleet: status })
        }
      }
    })
    await feeds.start()
    fleet.attach(intel, feeds)
    return feeds
  })

  const app = await life.start('http', async () => {
    const app = await buildApp(config, { store, quota, intel, history, feeds, logger, fleet, retroHunt, webhooks })
    // Requests are done when this runs (app.close() stops listening and waits for them first).
    app.addHook('onClose', async () => { await life.close() })
    try {
      await app.ready()
    } catch (err) {
      await app.close().catch(() => {})
      throw err
    }
    return app
  }, (app) => ({ destroy: () => { app.server.closeAllConnections() } }))

  // The bootstrap key comes last, once every part has started: a start that fails before it leaves no key that was
  // never shown, and the next start makes one (and shows it). One between instances starting together on an empty
  // store (the store's createFirstKey takes turns).
  let bootstrapKey: string | null = null
  if (config.bootstrapKey) {
    try {
      bootstrapKey = (await store.createFirstKey({ tenant: 'default', permissions: ['verdict', 'verdict_bulk', 'mgmt', 'admin'], quota: null }))?.key ?? null
    } catch (err) {
      await app.close().catch(() => {})
      throw err
    }
  }
  return { app, store, quota, intel, history, fleet, feeds, retroHunt, webhooks, logger, bootstrapKey, parts: life.parts, destroy: async (err) => { await life.destroy(err) } }
}
