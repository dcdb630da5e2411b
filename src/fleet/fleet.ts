/**
 * The fleet: what instances sharing one PostgreSQL schema do together. With SQLite (one instance) it is inactive and
 * changes nothing. On PostgreSQL:
 *
 * - Changes: every instance listens for the store's key and allowlist notifications (changes.ts) and applies them to
 *   its next request.
 * - One snapshot: one instance leads (election.ts). The leader alone fetches feeds (the refresher's `fetching` gate),
 *   rebuilds, and publishes each snapshot it swaps to as a generation (snapshots.ts); it shares each feed's last good
 *   copy so the next leader rebuilds from the same data and asks the hosts conditionally. Followers are told of a
 *   generation by NOTIFY (and check every kHeartbeatMs, in case one was lost), read and verify it and swap to it, so
 *   every instance serving a generation has the same snapshot identity and data_timestamp. A follower that cannot
 *   read or verify a generation keeps the snapshot it serves and reports `degraded` (`error`) until one works.
 * - Status: each instance keeps its row in fleet_instances (role, generation, state) fresh every kHeartbeatMs; the
 *   sources route and `intel status` show them.
 */
import { hostname } from 'node:os'
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import type { SnapshotData } from '../engine/index.ts'
import { PoolClosedError, type StoreError } from '../errors.ts'
import type { FeedMeta, FeedRefresher, SourceState } from '../intel/index.ts'
import type { IntelService, ReloadResult } from '../pool/intel-service.ts'
import { secretsOf } from '../store/redact.ts'
import { ChangeFeed } from './changes.ts'
import { Election } from './election.ts'
import { PgListener, pgFailure } from './listener.ts'
import { kIntelChannel, latestGeneration, publishSnapshot, readSnapshot, type Published } from './snapshots.ts'

/** How often an instance refreshes its row, a follower checks for a missed generation and reads the leader's feed state. */
const kHeartbeatMs = 5_000
/** An instance whose row is older than this is shown as gone. */
const kGoneMs = 30_000
/** Rows of instances gone this long are deleted by the leader. */
const kForgetMs = 3_600_000

/** Logger subset the fleet writes to. */
export interface FleetLogger {
  info: (obj: object, msg: string) => void
  warn: (obj: object, msg: string) => void
}

/** Options of the fleet. */
export interface FleetOptions {
  /** PostgreSQL URL, or null (SQLite: the fleet is inactive). */
  url: string | null
  schema: string
  /** This instance's name (IOC_INSTANCE_NAME), or null: host name, pid and a random suffix. */
  instance: string | null
  logger: FleetLogger
  /**
   * Longest wait for a new PostgreSQL connection of the fleet's own (pool, LISTEN, lock session); default 5 s, as the
   * store's. A server that accepts and never answers then fails the attempt instead of holding start or close.
   */
  connectionTimeoutMs?: number
}

/** Default of FleetOptions.connectionTimeoutMs. */
const kConnectionTimeoutMs = 5_000

/** One instance as the status shows it. */
export interface InstanceRow {
  instance: string
  leader: boolean
  generation: number | null
  version: string | null
  state: string
  seen_at: string
}

/** The fleet's state as this instance sees it (the sources route's `fleet`, status.json's `snapshot.fleet`). */
export interface FleetStatus {
  instance: string
  role: 'leader' | 'follower'
  /** The instance that leads, as last seen (null: none seen yet). */
  leader: string | null
  /** The generation this instance serves (null: its own build, none published or adopted yet). */
  generation: number | null
  /** The newest generation published, as last seen. */
  published_generation: number | null
  /** Why this instance is degraded (it could not adopt the published generation), or null. */
  error: string | null
  /** Instances seen in the last kGoneMs. */
  instances: InstanceRow[]
}

/** A name for this instance that no other running one has. */
export function instanceName (configured: string | null): string {
  return configured ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`
}

/** The fleet part of one instance. */
export class Fleet {
  /** Key and allowlist writes of every instance. */
  readonly changes: ChangeFeed
  /** This instance's name. */
  readonly instance: string
  private readonly options: FleetOptions
  private readonly s: string
  private readonly secrets: string[]
  /** FleetOptions.connectionTimeoutMs, or its default. */
  private readonly connectionTimeoutMs: number
  private pool: pg.Pool | null = null
  private listener: PgListener | null = null
  private election: Election | null = null
  private session: pg.Client | null = null
  private intel: IntelService | null = null
  private feeds: FeedRefresher | null = null
  private heartbeat: NodeJS.Timeout | null = null
  private syncing: Promise<void> | null = null
  private syncAgain = false
  private closed = false
  private generation: number | null = null
  private published: number | null = null
  private leaderName: string | null = null
  /** When a heartbeat first found no leader among the instances seen (null: one was found, or none has looked yet). */
  private noLeaderSince: number | null = null
  private instances: InstanceRow[] = []
  private failure: string | null = null
  private rebuildPending = false
  /** The feed states last shared by this leader (null: none yet, or sharing failed). */
  private sharedStatus: string | null = null
  private rebuilding: Promise<ReloadResult> | null = null
  /** The rebuild that follows the one running, for calls made while it runs. */
  private rebuildNext: Promise<ReloadResult> | null = null
  /** Told when this instance takes the lead (onLead). */
  private readonly leadListeners: Array<() => void> = []
  /** Generations adopted from another instance since start. */
  adopted = 0
  /** Generations this instance published since start. */
  publishedHere = 0

  constructor (options: FleetOptions) {
    this.options = options
    this.instance = instanceName(options.instance)
    this.changes = new ChangeFeed(options.schema)
    this.s = `"${options.schema}"`
    this.secrets = options.url === null ? [] : secretsOf(options.url)
    this.connectionTimeoutMs = options.connectionTimeoutMs ?? kConnectionTimeoutMs
  }

  /** Whether instances share a store (PostgreSQL). */
  get active (): boolean {
    return this.options.url !== null
  }

  /** Whether this instance leads (always, when the fleet is inactive: it is alone). */
  get leading (): boolean {
    return this.election === null ? !this.active : this.election.leading
  }

  /** Why this instance is degraded, or null. */
  get error (): string | null {
    return this.failure
  }

  /** Whether change notifications are being received (null: inactive). */
  get listening (): boolean | null {
    return this.listener === null ? null : this.listener.listening
  }

  /**
   * Whether no instance has led for kGoneMs by this instance's heartbeats: none shows itself as leader (a leader whose
   * process is stopped but whose lock session lives on, or an election that keeps failing), so no one fetches feeds.
   */
  leaderless (): boolean {
    return this.active && !this.leading && this.noLeaderSince !== null && Date.now() - this.noLeaderSince >= kGoneMs
  }

  /** The status, or null when the fleet is inactive. */
  status (): FleetStatus | null {
    if (!this.active) return null
    return {
      instance: this.instance,
      role: this.leading ? 'leader' : 'follower',
      leader: this.leading ? this.instance : this.leaderName,
      generation: this.generation,
      published_generation: this.published,
      error: this.failure,
      instances: this.instances
    }
  }

  /** Opens the fleet's connections and listens (PostgreSQL only). Leading begins with attach(). */
  async start (): Promise<void> {
    if (this.options.url === null) return
    const log = this.options.logger
    const name = `ioc-verdict fleet ${this.instance}`.slice(0, 63)
    this.pool = new pg.Pool({ connectionString: this.options.url, max: 2, application_name: name, keepAlive: true, connectionTimeoutMillis: this.connectionTimeoutMs })
    this.pool.on('error', () => {}) // an idle connection that dies is replaced on next use
    const listener = new PgListener({
      url: this.options.url,
      channels: [ChangeFeed.channel, kIntelChannel],
      applicationName: name,
      connectionTimeoutMs: this.connectionTimeoutMs,
      onNotify: (channel, payload) => {
        if (channel === ChangeFeed.channel) this.changes.notify(payload)
        else this.intelNotice(payload)
      },
      onResync: () => {
        log.info({ instance: this.instance }, 'fleet notifications resumed; cached keys and allowlists are read again')
        this.changes.resync()
        this.sync()
      },
      onError: (err: StoreError) => { log.warn({ code: err.code, error: err.message }, 'fleet notifications interrupted') }
    })
    try {
      await listener.start()
    } catch (err) {
      await this.pool.end().catch(() => {})
      throw err
    }
    this.listener = listener
  }

  /**
   * The newest published generation, read and verified, for a starting instance (null: none published, or the fleet is
   * inactive). One that cannot be read leaves the instance degraded until a generation can be.
   */
  async loadPublished (): Promise<{ data: SnapshotData, published: Published } | null> {
    if (this.pool === null) return null
    try {
      const pub = await latestGeneration(this.pool, this.s)
      if (pub === null) return null
      this.published = pub.generation
      const data = await this.read(pub)
      this.generation = pub.generation
      this.adopted++
      return { data, published: pub }
    } catch (err) {
      this.fail(err)
      return null
    }
  }

  /** Begins leading or following with the running snapshot service and refresher. */
  attach (intel: IntelService, feeds: FeedRefresher): void {
    this.intel = intel
    this.feeds = feeds
    if (this.options.url === null) return
    this.election = new Election({
      url: this.options.url,
      schema: this.options.schema,
      applicationName: `ioc-verdict leader ${this.instance}`.slice(0, 63),
      connectionTimeoutMs: this.connectionTimeoutMs,
      onLead: (session) => { this.lead(session) },
      onLose: () => {
        this.session = null
        this.options.logger.warn({ instance: this.instance }, 'this instance no longer leads the fleet; it stops fetching feeds')
      },
      onError: (err) => { this.options.logger.warn({ code: err.code, error: err.message }, 'fleet leadership') }
    })
    this.election.start()
    this.heartbeat = setInterval(() => { void this.beat() }, kHeartbeatMs)
    this.heartbeat.unref()
    void this.beat()
  }

  /**
   * POST /api/v2/mgmt/intel/reload: the leader (or an instance alone) rebuilds and publishes; a follower catches up
   * with the newest published generation instead (it never builds from its own feed copies).
   */
  async reload (): Promise<ReloadResult> {
    const intel = this.intel
    if (intel === null) throw new PoolClosedError()
    if (this.leading) return await this.rebuild()
    this.sync()
    while (this.syncing !== null) await this.syncing
    const snap = intel.snapshot
    return { version: snap.version, data_timestamp: snap.dataTimestamp, warm: true, build_ms: 0 }
  }

  /**
   * Rebuilds from the feeds' last good copies (the refresher saw a change, or an admin asked) and swaps to it; a fleet's
   * leader publishes it first, so that followers read it while the leader starts its pool and all swap at about the
   * same time. An instance alone reloads as before.
   */
  async rebuild (): Promise<ReloadResult> {
    if (this.rebuilding !== null) {
      // The one running may have read the feeds' copies before the change this call is for: one more follows it,
      // shared by every call made meanwhile (at most one runs and one waits).
      this.rebuildNext ??= this.rebuilding.catch(() => {}).then(async () => {
        this.rebuildNext = null
        return await this.rebuild()
      })
      return await this.rebuildNext
    }
    this.rebuilding = this.rebuildOnce().finally(() => { this.rebuilding = null })
    return await this.rebuilding
  }

  private async rebuildOnce (): Promise<ReloadResult> {
    const intel = this.intel
    if (intel === null) throw new PoolClosedError()
    if (!this.active) return await intel.reload()
    // Until it succeeds, the leader's heartbeat tries again: the feed copies changed, the next fetch may not.
    this.rebuildPending = true
    const built = await intel.prepare()
    const pub = this.session === null ? null : await this.publish(built.data)
    const result = await intel.adopt(built.data, built.info)
    // Serving it from now on (the generation a status shows is always the one whose snapshot answers).
    if (pub !== null) this.generation = pub.generation
    this.rebuildPending = false
    void this.beat()
    return result
  }

  /** Asks the leader to fetch every feed now (a follower's refresh request); the leader refreshes itself. */
  async requestRefresh (): Promise<void> {
    if (this.pool === null) return
    await this.pool.query('SELECT pg_notify($1, $2)', [kIntelChannel, `${this.options.schema}|refresh`])
  }

  /** Runs `fn` on the lock session while this instance leads (null: it does not). */
  private async onSession<T> (fn: (session: pg.Client) => Promise<T>): Promise<T | null> {
    const session = this.session
    if (session === null || this.election === null) return null
    return await this.election.use(session, fn)
  }

  /** Calls `fn` whenever this instance takes the fleet's lead (not for leading it had before). */
  onLead (fn: () => void): void {
    this.leadListeners.push(fn)
  }

  private lead (session: pg.Client): void {
    this.session = session
    this.sharedStatus = null
    this.options.logger.info({ instance: this.instance }, 'this instance leads the fleet: it fetches feeds and publishes the snapshot')
    for (const fn of this.leadListeners) fn()
    void (async () => {
      try {
        await this.onSession(async (c) => {
          await c.query(`INSERT INTO ${this.s}.fleet_instances (instance, leader, state, started_at, seen_at) VALUES ($1, true, 'ok', now(), now())
            ON CONFLICT (instance) DO UPDATE SET leader = true, seen_at = now()`, [this.instance])
          await c.query(`UPDATE ${this.s}.fleet_instances SET leader = false WHERE instance <> $1 AND leader`, [this.instance])
        })
        // The former leader's last good copies, so a rebuild here reads what the fleet's snapshot was built from.
        const adopted = await this.adoptFeeds()
        const latest = this.pool === null ? null : await latestGeneration(this.pool, this.s)
        this.published = latest?.generation ?? null
        if (adopted > 0) {
          await this.rebuild()
        } else if (latest === null) {
          await this.publish()
        } else if (latest.generation !== this.generation) {
          // Behind (or the newest generation could not be read): adopt it, or replace it with what this instance serves.
          if (!await this.adopt(latest)) await this.publish()
        }
      } catch (err) {
        this.options.logger.warn({ error: pgFailure(err, this.secrets, 'taking the lead').message }, 'taking the fleet\'s lead')
      }
      // Feeds are fetched from now on (the refresher's gate); the first round now rather than at each timer's next turn.
      if (this.session === session) void this.feeds?.refreshAll().catch(() => {})
    })()
  }

  private async adoptFeeds (): Promise<number> {
    const feeds = this.feeds
    if (feeds === null || this.pool === null) return 0
    const { rows } = await this.pool.query<{ name: string, meta: FeedMeta, body: Buffer }>(`SELECT name, meta, body FROM ${this.s}.fleet_feeds`)
    let adopted = 0
    for (const r of rows) if (await feeds.adopt(r.name, r.meta, r.body)) adopted++
    return adopted
  }

  /** The leader shares a feed's new last good copy (the refresher's onStored). */
  async shareFeed (name: string, meta: FeedMeta, body: Buffer): Promise<void> {
    await this.onSession(async (c) => await c.query(`INSERT INTO ${this.s}.fleet_feeds (name, meta, body) VALUES ($1, $2, $3)
      ON CONFLICT (name) DO UPDATE SET meta = EXCLUDED.meta, body = EXCLUDED.body`, [name, JSON.stringify(meta), body]))
  }

  /** The leader's sources' state, for followers to show at once (the refresher's onStatus). */
  shareStatus (states: SourceState[]): void {
    // The heartbeat writes the status every 5 s: only a change is shared (and announced).
    const text = JSON.stringify(states)
    if (text === this.sharedStatus || this.session === null) return
    this.sharedStatus = text
    this.onSession(async (c) => await c.query(`WITH u AS (UPDATE ${this.s}.fleet_instances SET sources = $2 WHERE instance = $1 RETURNING 1) SELECT pg_notify($3, $4) FROM u`,
      [this.instance, text, kIntelChannel, `${this.options.schema}|status`])).catch(() => { this.sharedStatus = null })
  }

  /**
   * Publishes `data` as the next generation while this instance leads (null: it does not); without `data`, the
   * snapshot it serves, which is then its generation.
   */
  private async publish (data?: SnapshotData): Promise<Published | null> {
    const snapshot = data ?? this.intel?.data
    if (snapshot === undefined) return null
    const pub = await this.onSession(async (c) => await publishSnapshot(c, this.s, this.options.schema, snapshot, this.instance))
    if (pub === null) return null
    if (data === undefined) this.generation = pub.generation
    this.published = pub.generation
    this.failure = null
    this.publishedHere++
    this.options.logger.info({ generation: pub.generation, version: pub.version, bytes: pub.bytes }, 'intel snapshot published to the fleet')
    if (data === undefined) await this.beat()
    return pub
  }

  private intelNotice (payload: string | undefined): void {
    if (payload === undefined) return
    const bar = payload.lastIndexOf('|')
    if (bar < 0 || payload.slice(0, bar) !== this.options.schema) return
    const what = payload.slice(bar + 1)
    if (what === 'refresh') {
      if (this.session !== null) void this.feeds?.refreshAll().catch(() => {})
      return
    }
    if (what === 'status') {
      if (!this.leading) void this.followStatus()
      return
    }
    const generation = Number(what)
    if (Number.isSafeInteger(generation)) this.published = Math.max(this.published ?? 0, generation)
    this.sync()
  }

  /** A follower catches up with the newest generation; calls while one runs make it run once more. */
  private sync (): void {
    if (this.intel === null || this.closed) return
    if (this.syncing !== null) {
      this.syncAgain = true
      return
    }
    this.syncing = (async () => {
      do {
        this.syncAgain = false
        if (this.leading || this.pool === null) return
        try {
          const latest = await latestGeneration(this.pool, this.s)
          if (latest === null) return
          this.published = latest.generation
          if (latest.generation === this.generation) {
            this.failure = null
            continue
          }
          await this.adopt(latest)
        } catch (err) {
          this.fail(err)
        }
      } while (this.syncAgain && !this.closed)
    })().finally(() => { this.syncing = null })
  }

  /** Reads a generation on a pooled connection of its own (COPY needs one). */
  private async read (pub: Published): Promise<SnapshotData> {
    const pool = this.pool
    if (pool === null) throw new PoolClosedError()
    const client = await pool.connect()
    let broken = false
    try {
      return await readSnapshot(client, this.s, pub)
    } catch (err) {
      broken = true
      throw err
    } finally {
      client.release(broken)
    }
  }

  /** A follower takes the leader's sources' state (announced after each of its fetches). */
  private async followStatus (): Promise<void> {
    try {
      const { rows } = await this.pool!.query<{ sources: SourceState[] | null }>(`SELECT sources FROM ${this.s}.fleet_instances WHERE leader LIMIT 1`)
      const sources = rows[0]?.sources
      if (sources != null) this.feeds?.adoptStates(sources)
    } catch {
      // The heartbeat reads it again.
    }
  }

  /** Reads, verifies and swaps to a generation; false (and degraded) when it cannot. */
  private async adopt (pub: Published): Promise<boolean> {
    const intel = this.intel
    if (intel === null || this.pool === null) return false
    try {
      const t0 = performance.now()
      const data = await this.read(pub)
      const readMs = performance.now() - t0
      await intel.adopt(data, null)
      this.generation = pub.generation
      this.failure = null
      this.adopted++
      this.options.logger.info({ generation: pub.generation, version: pub.version, published_by: pub.publishedBy, read_ms: Math.round(readMs), swap_ms: Math.round(performance.now() - t0 - readMs) }, 'intel snapshot of the fleet adopted')
      void this.beat()
      return true
    } catch (err) {
      this.fail(err)
      return false
    }
  }

  private fail (err: unknown): void {
    const message = pgFailure(err, this.secrets, 'reading the published snapshot').message
    if (this.failure !== message) this.options.logger.warn({ error: message, generation: this.generation }, 'cannot adopt the fleet\'s published snapshot; the current one stays in use')
    this.failure = message
  }

  /** Refreshes this instance's row; reads the others'; a follower checks for a missed generation and takes the leader's feed state. */
  private async beat (): Promise<void> {
    const pool = this.pool
    if (pool === null || this.closed) return
    try {
      const state = this.failure === null ? 'ok' : `degraded: ${this.failure}`
      await pool.query(`INSERT INTO ${this.s}.fleet_instances (instance, leader, generation, version, state, started_at, seen_at) VALUES ($1, $2, $3, $4, $5, now(), now())
        ON CONFLICT (instance) DO UPDATE SET leader = EXCLUDED.leader, generation = EXCLUDED.generation, version = EXCLUDED.version, state = EXCLUDED.state, seen_at = now()`,
      [this.instance, this.leading, this.generation, this.intel?.snapshot.version ?? null, state.slice(0, 500)])
      if (this.leading && this.rebuildPending && this.rebuilding === null) {
        this.rebuild().catch((err: unknown) => { this.options.logger.warn({ error: (err as Error).message }, 'rebuilding the fleet\'s snapshot failed; trying again') })
      }
      if (this.leading) await pool.query(`DELETE FROM ${this.s}.fleet_instances WHERE seen_at < now() - $1 * interval '1 millisecond'`, [kForgetMs])
      const { rows } = await pool.query<{ instance: string, leader: boolean, generation: string | null, version: string | null, state: string, seen_at: Date, sources: SourceState[] | null }>(
        `SELECT instance, leader, generation, version, state, seen_at, CASE WHEN leader THEN sources END AS sources FROM ${this.s}.fleet_instances
         WHERE seen_at > now() - $1 * interval '1 millisecond' ORDER BY instance`, [kGoneMs])
      this.instances = rows.map((r) => ({ instance: r.instance, leader: r.leader, generation: r.generation === null ? null : Number(r.generation), version: r.version, state: r.state, seen_at: r.seen_at.toISOString() }))
      const leader = rows.find((r) => r.leader)
      this.leaderName = leader?.instance ?? null
      if (leader !== undefined || this.leading) this.noLeaderSince = null
      else this.noLeaderSince ??= Date.now()
      if (!this.leading) {
        if (leader?.sources != null) this.feeds?.adoptStates(leader.sources)
        this.sync()
      }
      // status.json (for `intel status`) shows the fleet as of this beat.
      await this.feeds?.writeStatus()
    } catch (err) {
      this.options.logger.warn({ error: pgFailure(err, this.secrets, 'fleet heartbeat').message }, 'fleet heartbeat failed')
    }
  }

  /** Stops leading (another instance leads at once), following and listening; removes this instance's row. Idempotent. */
  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    if (this.heartbeat !== null) clearInterval(this.heartbeat)
    await this.election?.close()
    await this.syncing
    await this.listener?.close()
    if (this.pool !== null) {
      await this.pool.query(`DELETE FROM ${this.s}.fleet_instances WHERE instance = $1`, [this.instance]).catch(() => {})
      await this.pool.end().catch(() => {})
    }
  }
}
