/**
 * Retro-hunt webhooks and their deliveries, one implementation over both stores (as accounts.ts): SQLite and
 * PostgreSQL hand it a SqlPort with `?` placeholders and {table} names.
 *
 * A webhook's signing secret is needed in clear to sign (HMAC), so it is stored encrypted (AES-256-GCM under the
 * service's webhook key, webhook-secret.ts), never hashed, and never returned but by the create call. A delivery keeps
 * its exact body, so every attempt sends the same bytes under the same delivery id; `lease_until` lets one instance
 * of a fleet claim a due delivery at a time.
 */
import { randomBytes } from 'node:crypto'
import { StoreError } from '../errors.ts'
import type { RetroHit } from './retro-hunt.ts'
import type { SqlPort } from './sql-port.ts'

/** A webhook as listed (never its secret). */
export interface Webhook {
  id: string
  tenant: string
  url: string
  minScore: number
  description: string
  createdAt: string
}

/** A webhook with its encrypted secret (the sender's view). */
export interface WebhookWithSecret extends Webhook { secretSealed: string }

/** Delivery states. */
export type DeliveryStatus = 'pending' | 'delivered' | 'failed'

/** A delivery as listed. */
export interface WebhookDelivery {
  id: string
  webhookId: string
  status: DeliveryStatus
  attempts: number
  hits: number
  lastError: string | null
  createdAt: string
  nextAttemptAt: string | null
  deliveredAt: string | null
}

/** A delivery the sender works on. */
export interface DueDelivery { id: string, webhookId: string, body: string, attempts: number, createdMs: number }

/** Most deliveries a listing shows. */
export const kMaxDeliveryLimit = 500
/** Webhooks a tenant may have. */
export const kMaxWebhooks = 20

let last = 0
function timeId (prefix: string, now: number): string {
  last = Math.max(now, last + 1)
  return `${prefix}_${last.toString(36).padStart(9, '0')}${randomBytes(5).toString('hex')}`
}

const kWebhookId = /^wh_[0-9a-z]{9}[0-9a-f]{10}$/

interface HookRow { id: string, tenant: string, url: string, min_score: number, description: string, secret: string, created_at: string }
interface DeliveryRow { id: string, webhook_id: string, status: string, attempts: number, hits: number, last_error: string | null, created_at: string, next_at: number | string, delivered_at: string | null }

function hookOf (r: HookRow): Webhook {
  return { id: r.id, tenant: r.tenant, url: r.url, minScore: Number(r.min_score), description: r.description, createdAt: r.created_at }
}

/** Inserts a delivery due at `now` through `db` (the store's port or a transaction's). */
async function enqueueOn (db: SqlPort, d: { id: string, webhookId: string, tenant: string, body: string, hits: number }, now: number): Promise<void> {
  await db.run('INSERT INTO {webhook_deliveries} (id, webhook_id, tenant, status, attempts, hits, body, last_error, created_at, created_ms, next_at, lease_until, delivered_at) ' +
    'VALUES (?, ?, ?, ?, 0, ?, ?, NULL, ?, ?, ?, 0, NULL)', [d.id, d.webhookId, d.tenant, 'pending', d.hits, d.body, new Date(now).toISOString(), now, now])
}

/** Webhooks and deliveries over one store's SQL port. */
export class WebhookStore {
  readonly #db: SqlPort
  readonly #id: string

  /**
   * PostgreSQL: instances handing hits on at once take disjoint rows, in id order, instead of waiting on (or
   * deadlocking over) each other's; SQLite's write transactions take turns already.
   */
  readonly #skipLocked: string

  constructor (db: SqlPort, dialect: 'sqlite' | 'postgres') {
    this.#db = db
    this.#id = dialect === 'sqlite' ? 'id' : 'id COLLATE "C"'
    this.#skipLocked = dialect === 'sqlite' ? '' : ' FOR UPDATE SKIP LOCKED'
  }

  /** A tenant's webhook rows, oldest first, through `db` (the store's port or a transaction's). */
  async #rowsOf (db: SqlPort, tenant: string): Promise<HookRow[]> {
    return await db.all<HookRow>(`SELECT * FROM {webhooks} WHERE tenant = ? ORDER BY ${this.#id}`, [tenant])
  }

  /** Stores a webhook; INVALID_REQUEST past kMaxWebhooks for the tenant. */
  async create (h: Omit<Webhook, 'id' | 'createdAt'> & { secretSealed: string }, now = Date.now()): Promise<Webhook> {
    const n = await this.#db.all<{ n: number | string }>('SELECT count(*) AS n FROM {webhooks} WHERE tenant = ?', [h.tenant])
    if (Number(n[0]?.n ?? 0) >= kMaxWebhooks) throw new StoreError('INVALID_REQUEST', `a tenant has at most ${kMaxWebhooks} webhooks`)
    const hook: Webhook = { id: timeId('wh', now), tenant: h.tenant, url: h.url, minScore: h.minScore, description: h.description, createdAt: new Date(now).toISOString() }
    await this.#db.run('INSERT INTO {webhooks} (id, tenant, url, min_score, description, secret, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
      [hook.id, hook.tenant, hook.url, hook.minScore, hook.description, h.secretSealed, hook.createdAt])
    return hook
  }

  /** A tenant's webhooks, oldest first. */
  async list (tenant: string): Promise<Webhook[]> {
    return (await this.#rowsOf(this.#db, tenant)).map(hookOf)
  }

  /** A tenant's webhooks with their sealed secrets (the sender). */
  async forTenant (tenant: string): Promise<WebhookWithSecret[]> {
    return (await this.#rowsOf(this.#db, tenant)).map((r) => ({ ...hookOf(r), secretSealed: r.secret }))
  }

  /** One webhook with its sealed secret, or null (deleted). */
  async get (id: string): Promise<WebhookWithSecret | null> {
    const r = (await this.#db.all<HookRow>('SELECT * FROM {webhooks} WHERE id = ?', [id]))[0]
    return r === undefined ? null : { ...hookOf(r), secretSealed: r.secret }
  }

  /** Deletes one of a tenant's webhooks and its deliveries; false when unknown or another tenant's. */
  async delete (tenant: string, id: string): Promise<boolean> {
    if (!kWebhookId.test(id)) return false
    const n = await this.#db.run('DELETE FROM {webhooks} WHERE tenant = ? AND id = ?', [tenant, id])
    if (n === 1) await this.#db.run('DELETE FROM {webhook_deliveries} WHERE webhook_id = ?', [id])
    return n === 1
  }

  /** Queues a delivery of `body` (its id inside it) due now. */
  async enqueue (d: { id: string, webhookId: string, tenant: string, body: string, hits: number }, now = Date.now()): Promise<void> {
    await enqueueOn(this.#db, d, now)
  }

  /**
   * Hands up to `limit` retro-hunt hits not yet handed on (RetroHuntStore.addHits records them so) to the webhooks,
   * oldest first, in one transaction: marks them handed and queues, for each webhook of a hit's tenant, deliveries
   * of its hits at or above the webhook's min_score, at most `perDelivery` hits each, whose body `body` makes. A crash
   * before the commit leaves them to the next call; instances calling it at once hand each hit on once (the mark is
   * taken only where it is still 0). Returns how many hits it handed on.
   */
  async handOnHits (limit: number, perDelivery: number, body: (deliveryId: string, hits: RetroHit[]) => string, now = Date.now()): Promise<number> {
    // Nearly always none: a read, not a write transaction, finds that out.
    if ((await this.#db.all('SELECT 1 FROM {retro_hits} WHERE handed = 0 LIMIT 1', [])).length === 0) return 0
    return await this.#db.transaction(async (tx) => {
      const rows = await tx.all<{ id: string, tenant: string, found_at: string, hit: string }>(
        `UPDATE {retro_hits} SET handed = 1 WHERE id IN (SELECT id FROM {retro_hits} WHERE handed = 0 ORDER BY ${this.#id} LIMIT ?${this.#skipLocked}) AND handed = 0 ` +
        'RETURNING id, tenant, found_at, hit', [limit])
      const byTenant = new Map<string, RetroHit[]>()
      for (const r of rows.sort((a, b) => a.id < b.id ? -1 : a.id > b.id ? 1 : 0)) {
        const hit: RetroHit = { id: r.id, found_at: r.found_at, ...(JSON.parse(r.hit) as Omit<RetroHit, 'id' | 'found_at'>) }
        const list = byTenant.get(r.tenant)
        if (list === undefined) byTenant.set(r.tenant, [hit])
        else list.push(hit)
      }
      for (const [tenant, hits] of byTenant) {
        for (const hook of await this.#rowsOf(tx, tenant)) {
          const picked = hits.filter((h) => h.now.score >= Number(hook.min_score))
          for (let i = 0; i < picked.length; i += perDelivery) {
            const id = this.newDeliveryId(now)
            const chunk = picked.slice(i, i + perDelivery)
            await enqueueOn(tx, { id, webhookId: hook.id, tenant, hits: chunk.length, body: body(id, chunk) }, now)
          }
        }
      }
      return rows.length
    }, 'write')
  }

  /** A new delivery id. */
  newDeliveryId (now = Date.now()): string {
    return timeId('dl', now)
  }

  /**
   * Claims up to `limit` pending deliveries due at `now` for `leaseMs` (an instance that claims one delivers it; the
   * others skip it until the lease ends).
   */
  async claimDue (now: number, limit: number, leaseMs: number): Promise<DueDelivery[]> {
    const rows = await this.#db.all<{ id: string, webhook_id: string, body: string, attempts: number, created_ms: number | string }>(
      'SELECT id, webhook_id, body, attempts, created_ms FROM {webhook_deliveries} WHERE status = \'pending\' AND next_at <= ? AND lease_until <= ? ORDER BY next_at LIMIT ?',
      [now, now, limit])
    const out: DueDelivery[] = []
    for (const r of rows) {
      const n = await this.#db.run("UPDATE {webhook_deliveries} SET lease_until = ? WHERE id = ? AND status = 'pending' AND lease_until <= ?", [now + leaseMs, r.id, now])
      if (n === 1) out.push({ id: r.id, webhookId: r.webhook_id, body: r.body, attempts: Number(r.attempts), createdMs: Number(r.created_ms) })
    }
    return out
  }

  /** Records an attempt: delivered, to be retried at `nextAt`, or failed for good. */
  async attempted (id: string, outcome: { status: DeliveryStatus, error: string | null, nextAt: number }, now = Date.now()): Promise<void> {
    await this.#db.run('UPDATE {webhook_deliveries} SET status = ?, attempts = attempts + 1, last_error = ?, next_at = ?, lease_until = 0, delivered_at = ? WHERE id = ?',
      [outcome.status, outcome.error, outcome.nextAt, outcome.status === 'delivered' ? new Date(now).toISOString() : null, id])
  }

  /** A webhook's deliveries, newest first (only the tenant's). */
  async deliveries (tenant: string, webhookId: string, limit: number): Promise<WebhookDelivery[]> {
    const rows = await this.#db.all<DeliveryRow>(
      `SELECT id, webhook_id, status, attempts, hits, last_error, created_at, next_at, delivered_at FROM {webhook_deliveries} WHERE tenant = ? AND webhook_id = ? ORDER BY ${this.#id} DESC LIMIT ?`,
      [tenant, webhookId, limit])
    return rows.map((r) => ({
      id: r.id,
      webhookId: r.webhook_id,
      status: r.status as DeliveryStatus,
      attempts: Number(r.attempts),
      hits: Number(r.hits),
      lastError: r.last_error,
      createdAt: r.created_at,
      nextAttemptAt: r.status === 'pending' ? new Date(Number(r.next_at)).toISOString() : null,
      deliveredAt: r.delivered_at
    }))
  }
}

/** The tables both stores create. */
export function webhooksSchema (hooks: string, deliveries: string, collate = ''): string {
  return `
  CREATE TABLE ${hooks} (
    id TEXT PRIMARY KEY,                     -- wh_ + time-ordered id
    tenant TEXT NOT NULL,
    url TEXT NOT NULL,
    min_score INTEGER NOT NULL,
    description TEXT NOT NULL,
    secret TEXT NOT NULL,                    -- AES-256-GCM sealed signing secret (webhook-secret.ts)
    created_at TEXT NOT NULL
  );
  CREATE INDEX webhooks_tenant ON ${hooks} (tenant, id${collate});
  CREATE TABLE ${deliveries} (
    id TEXT PRIMARY KEY,                     -- dl_ + time-ordered id, the body's delivery_id
    webhook_id TEXT NOT NULL,
    tenant TEXT NOT NULL,
    status TEXT NOT NULL,                    -- pending, delivered, failed
    attempts INTEGER NOT NULL,
    hits INTEGER NOT NULL,
    body TEXT NOT NULL,                      -- the exact JSON sent on every attempt
    last_error TEXT,
    created_at TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    next_at BIGINT NOT NULL,                 -- epoch ms of the next attempt
    lease_until BIGINT NOT NULL,             -- epoch ms until which an instance works on it
    delivered_at TEXT
  );
  CREATE INDEX webhook_deliveries_due ON ${deliveries} (status, next_at);
  CREATE INDEX webhook_deliveries_hook ON ${deliveries} (tenant, webhook_id, id${collate});
  `
}
