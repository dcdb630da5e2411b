/**
 * The fleet: what instances sharing one PostgreSQL schema do together. With SQLite (one instance) it is inactive and
 * changes nothing. On PostgreSQL it listens for the store's change notifications (changes.ts), so every instance
 * applies a key or allowlist write to its next request.
 */
import { hostname } from 'node:os'
import { randomBytes } from 'node:crypto'
import type { StoreError } from '../errors.ts'
import { ChangeFeed } from './changes.ts'
import { PgListener } from './listener.ts'

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
  private listener: PgListener | null = null

  constructor (options: FleetOptions) {
    this.options = options
    this.instance = instanceName(options.instance)
    this.changes = new ChangeFeed(options.schema)
  }

  /** Whether instances share a store (PostgreSQL). */
  get active (): boolean {
    return this.options.url !== null
  }

  /** Whether change notifications are being received (null: inactive). */
  get listening (): boolean | null {
    return this.listener === null ? null : this.listener.listening
  }

  /** Starts listening (PostgreSQL only). */
  async start (): Promise<void> {
    if (this.options.url === null) return
    const log = this.options.logger
    const listener = new PgListener({
      url: this.options.url,
      channels: [ChangeFeed.channel],
      applicationName: `ioc-verdict fleet ${this.instance}`.slice(0, 63),
      onNotify: (channel, payload) => {
        if (channel === ChangeFeed.channel) this.changes.notify(payload)
      },
      onResync: () => {
        log.info({ instance: this.instance }, 'fleet notifications resumed; cached keys and allowlists are read again')
        this.changes.resync()
      },
      onError: (err: StoreError) => { log.warn({ code: err.code, error: err.message }, 'fleet notifications interrupted') }
    })
    await listener.start()
    this.listener = listener
  }

  /** Stops listening (idempotent). */
  async close (): Promise<void> {
    await this.listener?.close()
  }
}
