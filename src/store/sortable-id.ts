/**
 * Time-ordered entry ids and the listing cursors that continue after one, for every table whose listing order is its
 * creation order (allowlist `al_`, feedback `fb_`).
 *
 * An id is `<prefix>_` + 9 base-36 digits of milliseconds + 10 random hex digits, so ids compared as bytes sort by
 * creation time (PostgreSQL compares them COLLATE "C", SQLite's default is byte order). A cursor is the id of a page's
 * last entry in base64url: opaque to clients, checked against the id's form when it comes back.
 */
import { randomBytes } from 'node:crypto'
import { StoreError } from '../errors.ts'

/** Ids of one prefix. */
export class SortableIds {
  readonly #prefix: string
  readonly #pattern: RegExp
  /** The millisecond of the newest id this process made: ids made in one process strictly increase. */
  #last = 0

  /** `prefix`: lowercase letters, e.g. `al` (ids `al_...`). */
  constructor (prefix: string) {
    if (!/^[a-z]{1,8}$/.test(prefix)) throw new TypeError('an id prefix is 1 to 8 lowercase letters')
    this.#prefix = `${prefix}_`
    this.#pattern = new RegExp(`^${prefix}_[0-9a-z]{9}[0-9a-f]{10}$`)
  }

  /**
   * A new id. Within one process ids strictly increase (a second entry in the same millisecond takes the next one), so
   * entries list in the order they were added; across processes the order is by time, then random, total.
   */
  next (now: number): string {
    this.#last = Math.max(now, this.#last + 1)
    return `${this.#prefix}${this.#last.toString(36).padStart(9, '0')}${randomBytes(5).toString('hex')}`
  }

  /** Whether `id` has the form of one of these ids (anything else names no entry). */
  valid (id: unknown): id is string {
    return typeof id === 'string' && this.#pattern.test(id)
  }

  /** The cursor of a page ending at `id`. */
  cursorOf (id: string): string {
    return Buffer.from(id, 'latin1').toString('base64url')
  }

  /** The id a cursor continues after; INVALID_REQUEST for anything the service did not hand out. */
  afterCursor (cursor: string): string {
    const id = typeof cursor === 'string' && /^[A-Za-z0-9_-]{1,64}$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('latin1') : ''
    if (!this.valid(id)) throw new StoreError('INVALID_REQUEST', 'cursor is not valid')
    return id
  }
}
