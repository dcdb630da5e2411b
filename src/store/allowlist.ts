/**
 * Tenant allowlists (docs/API.md "Tenant allowlist") over one store's SQL port: entry ids sort by creation time, and
 * a listing pages through them oldest first.
 */
import { SortableIds } from './sortable-id.ts'
import { isoOf, isoOrNull, type SqlPort } from './sql-port.ts'
import type { AllowEntry, AllowPage, NewAllowEntry } from './types.ts'

/** Allowlist entry ids (`al_...`) and listing cursors. */
export const kAllowIds = new SortableIds('al')

interface AllowRow { id: string, tenant: string, kind: string, value: string, reason: string, created_by: string, created_at: unknown, expires_at: unknown }

function allowEntry (r: AllowRow): AllowEntry {
  return {
    id: r.id,
    tenant: r.tenant,
    kind: r.kind,
    value: r.value,
    reason: r.reason,
    createdBy: r.created_by,
    createdAt: isoOf(r.created_at),
    expiresAt: isoOrNull(r.expires_at)
  }
}

/** Rolls back an add that would pass its bound. */
class Full extends Error {}

/** Allowlist entries (the Store methods addAllowEntry, listAllowEntries, deleteAllowEntry). */
export class Allowlist {
  readonly #db: SqlPort

  constructor (db: SqlPort) {
    this.#db = db
  }

  /**
   * Stores an entry; `expiresAt` is canonical ISO 8601 UTC (the route makes it so) or null. With `most`, null (and
   * nothing stored) when the tenant would then hold more than `most` active entries: the insert and a count of the
   * tenant's active entries run in one write transaction, in which the tenant's adds take turns (SqlPort.turns), so
   * concurrent adds on any instance stop exactly at the bound.
   */
  async add (entry: NewAllowEntry, most?: number): Promise<AllowEntry | null> {
    const now = Date.now()
    const stored: AllowEntry = {
      id: kAllowIds.next(now),
      tenant: entry.tenant,
      kind: entry.kind,
      value: entry.value,
      reason: entry.reason,
      createdBy: entry.createdBy,
      createdAt: new Date(now).toISOString(),
      expiresAt: entry.expiresAt
    }
    const insert = async (db: SqlPort): Promise<void> => {
      await db.run('INSERT INTO {allowlist} (id, tenant, kind, value, reason, created_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
        [stored.id, stored.tenant, stored.kind, stored.value, stored.reason, stored.createdBy, stored.createdAt, stored.expiresAt])
    }
    if (most === undefined) {
      await insert(this.#db)
      return stored
    }
    const active = async (db: SqlPort): Promise<number> => Number((await db.all<{ n: number | string }>(
      'SELECT count(*) AS n FROM {allowlist} WHERE tenant = ? AND (expires_at IS NULL OR expires_at > ?)', [stored.tenant, new Date().toISOString()]))[0]?.n ?? 0)
    try {
      await this.#db.transaction(async (tx) => {
        await tx.turns(`allowlist:${stored.tenant}`)
        await insert(tx)
        if (await active(tx) > most) throw new Full()
      })
    } catch (err) {
      if (err instanceof Full) return null
      throw err
    }
    return stored
  }

  /** A page of a tenant's entries, oldest first (with `activeAt`, those not expired by then); INVALID_REQUEST for a bad cursor. */
  async list (tenant: string, limit: number, cursor: string | null, activeAt?: string): Promise<AllowPage> {
    const after = cursor === null ? '' : kAllowIds.afterCursor(cursor)
    const rows = activeAt === undefined
      ? await this.#db.all<AllowRow>(
        'SELECT * FROM {allowlist} WHERE tenant = ? AND id > ? COLLATE {bytes} ORDER BY id COLLATE {bytes} LIMIT ?', [tenant, after, limit + 1])
      : await this.#db.all<AllowRow>(
        'SELECT * FROM {allowlist} WHERE tenant = ? AND id > ? COLLATE {bytes} AND (expires_at IS NULL OR expires_at > ?) ORDER BY id COLLATE {bytes} LIMIT ?',
        [tenant, after, activeAt, limit + 1])
    const entries = rows.slice(0, limit).map(allowEntry)
    return { entries, nextCursor: rows.length > limit ? kAllowIds.cursorOf(entries[entries.length - 1]!.id) : null }
  }

  /** Deletes one of a tenant's entries: false when the id is unknown or another tenant's. */
  async delete (tenant: string, id: string): Promise<boolean> {
    return await this.#db.run('DELETE FROM {allowlist} WHERE tenant = ? AND id = ?', [tenant, id]) > 0
  }
}
