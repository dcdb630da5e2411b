/**
 * One PostgreSQL connection of its own that LISTENs on the fleet's channels (a pooled connection cannot: LISTEN
 * belongs to a session). A lost connection is opened again with a growing wait (100 ms doubling to 5 s); since
 * notifications sent meanwhile are lost, `onResync` runs once it listens again, and the caller re-reads what it
 * caches (the periodic re-reads stay the backstop while it is down).
 */
import pg from 'pg'
import { StoreError } from '../errors.ts'
import { safeCause, scrub, secretsOf } from '../store/redact.ts'

const kFirstRetryMs = 100
const kMaxRetryMs = 5_000

/** What the listener reports to. */
export interface ListenerOptions {
  url: string
  channels: readonly string[]
  /** Name PostgreSQL shows for the connection (pg_stat_activity.application_name). */
  applicationName: string
  /** Longest wait for the connection to be up (pg's connectionTimeoutMillis). */
  connectionTimeoutMs: number
  onNotify: (channel: string, payload: string | undefined) => void
  /** Runs after a reconnect: notifications may have been missed. */
  onResync: () => void
  /** A lost connection or a failed reconnect (already scrubbed of the URL and password). */
  onError: (err: StoreError) => void
}

/** A pg error as a StoreError without the URL or password. */
export function pgFailure (err: unknown, secrets: readonly string[], what: string): StoreError {
  if (err instanceof StoreError) return err
  const message = scrub(err instanceof Error ? err.message : String(err), secrets)
  return new StoreError('STORE_UNAVAILABLE', `${what}: ${message}`, { cause: safeCause(err, secrets) })
}

/** A LISTEN connection that comes back after it is lost. */
export class PgListener {
  private readonly options: ListenerOptions
  private readonly secrets: string[]
  private client: pg.Client | null = null
  private retryMs = kFirstRetryMs
  private timer: NodeJS.Timeout | null = null
  private closed = false
  /** Whether the connection is up and listening. */
  listening = false

  constructor (options: ListenerOptions) {
    this.options = options
    this.secrets = secretsOf(options.url)
  }

  /** Connects and listens; throws (scrubbed) when the first connection fails. */
  async start (): Promise<void> {
    await this.connect()
  }

  private async connect (): Promise<void> {
    const client = new pg.Client({
      connectionString: this.options.url,
      keepAlive: true,
      application_name: this.options.applicationName,
      connectionTimeoutMillis: this.options.connectionTimeoutMs
    })
    client.on('error', () => { this.lost(client) })
    client.on('end', () => { this.lost(client) })
    client.on('notification', (msg) => { this.options.onNotify(msg.channel, msg.payload) })
    try {
      await client.connect()
      for (const channel of this.options.channels) await client.query(`LISTEN "${channel}"`)
    } catch (err) {
      client.removeAllListeners('end')
      await client.end().catch(() => {})
      throw pgFailure(err, this.secrets, 'cannot listen for fleet notifications')
    }
    if (this.closed) {
      await client.end().catch(() => {})
      return
    }
    this.client = client
    this.listening = true
    this.retryMs = kFirstRetryMs
  }

  private lost (client: pg.Client): void {
    if (this.client !== client) return
    this.client = null
    this.listening = false
    client.removeAllListeners('end')
    void client.end().catch(() => {})
    if (this.closed) return
    this.options.onError(new StoreError('STORE_UNAVAILABLE', 'the fleet notification connection was lost; reconnecting'))
    this.retry()
  }

  private retry (): void {
    if (this.closed || this.timer !== null) return
    this.timer = setTimeout(() => {
      this.timer = null
      this.connect().then(() => { if (!this.closed) this.options.onResync() }, (err: unknown) => {
        this.options.onError(err as StoreError)
        this.retryMs = Math.min(this.retryMs * 2, kMaxRetryMs)
        this.retry()
      })
    }, this.retryMs)
    this.timer.unref()
  }

  /** Stops listening (idempotent). */
  async close (): Promise<void> {
    this.closed = true
    if (this.timer !== null) clearTimeout(this.timer)
    this.timer = null
    const client = this.client
    this.client = null
    this.listening = false
    if (client !== null) {
      client.removeAllListeners('end')
      await client.end().catch(() => {})
    }
  }
}
