/**
 * Usage counters (indicators per tenant, key and UTC day) as the stores read them. They are written with history, in
 * the history batch's transaction (the dialect's history writer), and kept when history is purged: billing records
 * with their own retention.
 */
import { assertUtcDay } from '../history/utc-day.ts'
import type { SqlPort } from './sql-port.ts'
import type { UsageReport } from './types.ts'

/** Reads of the usage table (the Store methods usage and usageForKey). */
export class Usage {
  readonly #db: SqlPort

  constructor (db: SqlPort) {
    this.#db = db
  }

  /** Counters of a tenant, or of one of its keys, on one UTC day; keys in byte order. */
  async report (tenant: string, keyId: string | null, day: string): Promise<UsageReport> {
    this.#db.assertOpen()
    assertUtcDay(day)
    const rows = keyId === null
      ? await this.#db.all<{ key_id: string, count: number | string }>('SELECT key_id, count FROM {usage} WHERE tenant = ? AND day = ? ORDER BY key_id COLLATE {bytes}', [tenant, day])
      : await this.#db.all<{ key_id: string, count: number | string }>('SELECT key_id, count FROM {usage} WHERE tenant = ? AND day = ? AND key_id = ?', [tenant, day, keyId])
    const keys = rows.map((r) => ({ apikey: r.key_id, count: Number(r.count) }))
    return { tenant, day, keys, total: keys.reduce((sum, k) => sum + k.count, 0) }
  }

  /** Counter of one key on one UTC day (0 when none). */
  async forKey (keyId: string, day: string): Promise<number> {
    this.#db.assertOpen()
    assertUtcDay(day)
    const rows = await this.#db.all<{ n: number | string }>('SELECT coalesce(sum(count), 0) AS n FROM {usage} WHERE key_id = ? AND day = ?', [keyId, day])
    return Number(rows[0]?.n ?? 0)
  }
}
