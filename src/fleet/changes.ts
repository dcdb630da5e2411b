/**
 * Changes made anywhere in the fleet, applied here on the next request: PostgreSQL announces each key and allowlist
 * write on commit (src/store/change-feed.ts), this instance's PgListener receives it, and the handlers forget what
 * they cached of it. After a reconnect every handler forgets everything (notifications sent meanwhile are lost). The
 * caches' own re-read intervals stay as the backstop for a notification that never arrives.
 */
import { kChangesChannel, parseChange, type StoreChange } from '../store/change-feed.ts'

/** A change to apply, or null: forget everything (a notification may have been missed). */
export type ChangeHandler = (change: StoreChange | null) => void

/** Dispatches the store's change notifications of one schema to the handlers. */
export class ChangeFeed {
  private readonly schema: string
  private readonly handlers: ChangeHandler[] = []
  /** Notifications applied since start. */
  applied = 0

  constructor (schema: string) {
    this.schema = schema
  }

  /** The channel to LISTEN on. */
  static readonly channel = kChangesChannel

  /** Adds a handler. */
  on (handler: ChangeHandler): void {
    this.handlers.push(handler)
  }

  /** A notification on the changes channel. */
  notify (payload: string | undefined): void {
    const change = parseChange(payload, this.schema)
    if (change === null) return
    this.applied++
    for (const h of this.handlers) h(change)
  }

  /** Everything may have changed (after a reconnect). */
  resync (): void {
    for (const h of this.handlers) h(null)
  }
}
