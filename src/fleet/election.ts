/**
 * Leader election: a PostgreSQL session advisory lock per schema, taken on a connection of the instance's own (the
 * lock session). Every instance waits in `pg_advisory_lock`; PostgreSQL grants it to one, and when that session ends
 * (the process exits, is killed, or its connection breaks) it grants it to the next waiter at once: no lease to
 * expire, no clock to trust. The session sets TCP keepalives so that PostgreSQL also notices a leader whose host
 * vanished without closing its socket (within about 25 s), and the leader checks its session every kCheckMs, so a
 * leader cut off from PostgreSQL stops leading within that time. Whatever only the leader may do (publishing a
 * generation) runs on the lock session itself: a leader that lost its session cannot publish.
 */
import pg from 'pg'
import type { StoreError } from '../errors.ts'
import { pgFailure } from './listener.ts'
import { secretsOf } from '../store/redact.ts'

/** How often the leader checks that its lock session is alive. */
const kCheckMs = 5_000
/** Longest a check may take before the session is taken for lost. */
const kCheckTimeoutMs = 10_000
const kFirstRetryMs = 200
const kMaxRetryMs = 5_000

/** Options of an election. */
export interface ElectionOptions {
  url: string
  schema: string
  applicationName: string
  /** Longest wait for the lock session's connection to be up (pg's connectionTimeoutMillis). */
  connectionTimeoutMs: number
  /** This instance leads; `session` holds the lock (run leader-only writes on it). */
  onLead: (session: pg.Client) => void
  /** This instance stopped leading (its session ended). */
  onLose: () => void
  onError: (err: StoreError) => void
}

/** Waits for leadership, leads while the lock session lives, and waits again. */
export class Election {
  private readonly options: ElectionOptions
  private readonly secrets: string[]
  private session: pg.Client | null = null
  private closed = false
  private loop: Promise<void> | null = null
  private wake: (() => void) | null = null
  /** The last use of the lock session queued: one at a time, so a check never waits behind a long publish. */
  private chain: Promise<unknown> = Promise.resolve()
  /** Whether this instance holds the lock. */
  leading = false

  constructor (options: ElectionOptions) {
    this.options = options
    this.secrets = secretsOf(options.url)
  }

  /** Starts campaigning in the background. */
  start (): void {
    this.loop ??= this.run()
  }

  private async run (): Promise<void> {
    let retryMs = kFirstRetryMs
    while (!this.closed) {
      const session = new pg.Client({
        connectionString: this.options.url,
        keepAlive: true,
        application_name: this.options.applicationName,
        connectionTimeoutMillis: this.options.connectionTimeoutMs
      })
      const ended = new Promise<void>((resolve) => {
        session.once('end', resolve)
        session.on('error', () => { resolve() })
      })
      this.session = session
      try {
        await session.connect()
        // Server-side keepalives for this session only: PostgreSQL ends it (releasing the lock) when the host is gone.
        await session.query('SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5; SET tcp_keepalives_count = 3')
        await session.query('SELECT pg_advisory_lock(hashtext($1))', [`ioc-verdict:leader:${this.options.schema}`])
        if (this.closed) break
        retryMs = kFirstRetryMs
        this.leading = true
        this.options.onLead(session)
        await Promise.race([ended, this.watch(session)])
      } catch (err) {
        if (!this.closed) this.options.onError(pgFailure(err, this.secrets, 'leader election'))
      } finally {
        if (this.leading) {
          this.leading = false
          this.options.onLose()
        }
        this.session = null
        await session.end().catch(() => {})
      }
      if (this.closed) break
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, retryMs)
        t.unref()
        this.wake = () => { clearTimeout(t); resolve() }
      })
      this.wake = null
      retryMs = Math.min(retryMs * 2, kMaxRetryMs)
    }
  }

  /** Runs `fn` on the lock session after every use queued before it. */
  async use<T> (session: pg.Client, fn: (session: pg.Client) => Promise<T>): Promise<T> {
    const run = this.chain.then(async () => await fn(session))
    this.chain = run.catch(() => {})
    return await run
  }

  /** Resolves when a check of the session fails (the connection is dead or PostgreSQL no longer answers it). */
  private async watch (session: pg.Client): Promise<void> {
    while (!this.closed) {
      await new Promise((resolve) => { setTimeout(resolve, kCheckMs).unref() })
      if (this.closed) return
      try {
        await this.use(session, async (c) => await c.query({ text: 'SELECT 1', query_timeout: kCheckTimeoutMs } as pg.QueryConfig))
      } catch (err) {
        this.options.onError(pgFailure(err, this.secrets, 'the leader lost its lock session'))
        return
      }
    }
  }

  /** Stops campaigning; a leader ends its lock session, so another instance leads at once. Idempotent. */
  async close (): Promise<void> {
    this.closed = true
    this.wake?.()
    const session = this.session
    if (session !== null) await session.end().catch(() => {})
    await this.loop
  }
}
