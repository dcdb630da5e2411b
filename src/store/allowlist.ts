/**
 * Shared by both stores: allowlist entry ids and listing cursors.
 */
import { randomBytes } from 'node:crypto'
import { StoreError } from '../errors.ts'

/** Ids sort by creation time: 9 base-36 digits of milliseconds, then 10 random hex digits. */
const kIdPattern = /^al_[0-9a-z]{9}[0-9a-f]{10}$/

let last = 0

/**
 * A new entry id. Within one process ids strictly increase (a second entry in the same millisecond takes the next
 * one), so entries list in the order they were added; across processes the order is by time, then random, total.
 */
export function newAllowId (now: number): string {
  last = Math.max(now, last + 1)
  return `al_${last.toString(36).padStart(9, '0')}${randomBytes(5).toString('hex')}`
}

/** The cursor of a page ending at `id`. */
export function allowCursorOf (id: string): string {
  return Buffer.from(id, 'latin1').toString('base64url')
}

/** The id a cursor continues after; INVALID_REQUEST for anything the service did not hand out. */
export function allowCursorId (cursor: string): string {
  const id = /^[A-Za-z0-9_-]{1,64}$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('latin1') : ''
  if (!kIdPattern.test(id)) throw new StoreError('INVALID_REQUEST', 'cursor is not valid')
  return id
}
