/**
 * Retro-hunt storage, one implementation over both stores (as accounts.ts): the hits a pass records, and the reads a
 * pass makes of the history blocks (history/blocks.ts) of the lookback window. SQLite and PostgreSQL each hand it a
 * SqlPort whose statements use `?` placeholders and {table} names; the two dialects differ only in how a request's
 * date is read (SQLite keeps epoch ms in `ts`, PostgreSQL a timestamptz `date`).
 *
 * A hit is recorded once per (tenant, indicator, cause): the cause key names the source, the match, the listed
 * value and the source's category and confidence, so a later, stronger listing of the same source is a new hit.
 */
import { randomBytes } from 'node:crypto'
import { StoreError } from '../errors.ts'
import { parseTimestamp } from '../history/utc-day.ts'
import type { SqlPort } from './sql-port.ts'

/** Which SQL a port speaks. */
export type SqlDialect = 'sqlite' | 'postgres'

/** A hit as the API shows it (docs/API.md "Retro-hunt"). */
export interface RetroHit {
  id: string
  found_at: string
  indicator: { type: string, value: string }
  queried: { first_at: string, last_at: string, count: number, key_ids: string[], action_sources: string[] }
  then: { score: number, category: string }
  now: { score: number, category: string, strength: string, recommended_actions: unknown[] }
  cause: { signal_id: string, source: string, match: string, listed_value: string }
}

/** A hit to record: the store assigns id and found_at. */
export type NewRetroHit = Omit<RetroHit, 'id' | 'found_at'> & { tenant: string, causeKey: string }

/** Filters of a listing (validated by the route). */
export interface RetroHitFilters {
  /** ISO 8601: hits found at or after it. */
  since?: string
  minScore?: number
  category?: string
}

/** One page, newest first. */
export interface RetroHitPage { hits: RetroHit[], nextCursor: string | null }

/** The snapshot a retro-hunt pass hunted with: its header's version and input key. */
export interface HuntedSnapshot { version: string, inputKey: string }

/** A history block of the lookback window. */
export interface RetroBlock { id: number, types: number }
/** A stored part. */
export interface RetroPart { id: number, n: number, req: number, part: Buffer }
/** The request fields a hit shows. */
export interface RetroRequest { id: number, ts: number, apikey: string }

/** Hits per INSERT statement (9 parameters each: within SQLite's and PostgreSQL's bounds). */
const kInsertRows = 200

/** Largest page of a listing. */
export const kMaxRetroHitLimit = 1000

const kIdPattern = /^rh_[0-9a-z]{9}[0-9a-f]{10}$/
let last = 0

/** A new hit id: time-ordered (strictly increasing in one process), so newest first is by id. */
export function newRetroHitId (now: number): string {
  last = Math.max(now, last + 1)
  return `rh_${last.toString(36).padStart(9, '0')}${randomBytes(5).toString('hex')}`
}

function cursorOf (id: string): string {
  return Buffer.from(id, 'latin1').toString('base64url')
}

function cursorId (cursor: string): string {
  const id = /^[A-Za-z0-9_-]{1,64}$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('latin1') : ''
  if (!kIdPattern.test(id)) throw new StoreError('INVALID_REQUEST', 'cursor is not valid')
  return id
}

interface HitRow { id: string, found_at: string, hit: string }

/** Retro-hunt hits and history reads over one store's SQL port. */
export class RetroHuntStore {
  readonly #db: SqlPort
  readonly #dialect: SqlDialect

  /** Ids compare bytewise on both (PostgreSQL's default collation may not). */
  readonly #id: string

  constructor (db: SqlPort, dialect: SqlDialect) {
    this.#db = db
    this.#dialect = dialect
    this.#id = dialect === 'sqlite' ? 'id' : 'id COLLATE "C"'
  }

  /** Records a hit unless one of the same (tenant, indicator, cause) exists; the hit, or null when it existed. */
  async addHit (h: NewRetroHit, now = Date.now()): Promise<RetroHit | null> {
    return (await this.addHits([h], now))[0] ?? null
  }

  /**
   * Records hits, each unless one of the same (tenant, indicator, cause) exists, in statements of kInsertRows rows;
   * returns the hits recorded (those new), in order. They are recorded as not yet handed to the webhooks
   * (WebhookStore.handOnHits hands them on).
   */
  async addHits (list: readonly NewRetroHit[], now = Date.now()): Promise<RetroHit[]> {
    const out: RetroHit[] = []
    const foundAt = new Date(now).toISOString()
    for (let at = 0; at < list.length; at += kInsertRows) {
      const rows = list.slice(at, at + kInsertRows)
      const params: unknown[] = []
      const made = new Map<string, RetroHit>()
      for (const h of rows) {
        const id = newRetroHitId(now)
        const { tenant, causeKey, ...body } = h
        made.set(id, { id, found_at: foundAt, ...body })
        params.push(id, tenant, foundAt, h.indicator.type, h.indicator.value, causeKey, h.now.score, h.now.category, JSON.stringify(body))
      }
      const inserted = await this.#db.all<{ id: string }>(
        'INSERT INTO {retro_hits} (id, tenant, found_at, indicator_type, indicator_value, cause_key, score, category, hit, handed) VALUES ' +
        rows.map(() => '(?, ?, ?, ?, ?, ?, ?, ?, ?, 0)').join(', ') +
        ' ON CONFLICT (tenant, indicator_type, indicator_value, cause_key) DO NOTHING RETURNING id', params)
      const ids = new Set(inserted.map((r) => r.id))
      for (const [id, hit] of made) if (ids.has(id)) out.push(hit)
    }
    return out
  }

  /** A page of a tenant's hits, newest first; INVALID_REQUEST for a bad cursor, date or limit. Only `tenant`'s rows. */
  async listHits (tenant: string, filters: RetroHitFilters, limit: number, cursor: string | null): Promise<RetroHitPage> {
    if (!Number.isInteger(limit) || limit < 1 || limit > kMaxRetroHitLimit) throw new StoreError('INVALID_REQUEST', `limit must be from 1 to ${kMaxRetroHitLimit}`)
    const where = ['tenant = ?']
    const params: unknown[] = [tenant]
    if (filters.since !== undefined) {
      const ms = parseTimestamp(filters.since)
      if (ms === null) throw new StoreError('INVALID_REQUEST', 'since must be an ISO 8601 date-time with an offset, or a date')
      where.push('found_at >= ?')
      params.push(new Date(ms).toISOString())
    }
    if (filters.minScore !== undefined) {
      where.push('score >= ?')
      params.push(filters.minScore)
    }
    if (filters.category !== undefined) {
      where.push('category = ?')
      params.push(filters.category)
    }
    if (cursor !== null) {
      where.push(`${this.#id} < ?`)
      params.push(cursorId(cursor))
    }
    params.push(limit + 1)
    const rows = await this.#db.all<HitRow>(`SELECT id, found_at, hit FROM {retro_hits} WHERE ${where.join(' AND ')} ORDER BY ${this.#id} DESC LIMIT ?`, params)
    const hits = rows.slice(0, limit).map((r) => ({ id: r.id, found_at: r.found_at, ...(JSON.parse(r.hit) as Omit<RetroHit, 'id' | 'found_at'>) }))
    return { hits, nextCursor: rows.length > limit && hits.length > 0 ? cursorOf((hits.at(-1) as RetroHit).id) : null }
  }

  /** Tenants with history blocks holding requests at or after `sinceMs`. */
  async tenantsSince (sinceMs: number): Promise<string[]> {
    const rows = await this.#db.all<{ tenant: string }>('SELECT DISTINCT tenant FROM {history_blocks} WHERE max_ts >= ? ORDER BY tenant', [sinceMs])
    return rows.map((r) => r.tenant)
  }

  /** A tenant's blocks holding requests at or after `sinceMs`, oldest first (ids and type masks). */
  async blocksSince (tenant: string, sinceMs: number): Promise<RetroBlock[]> {
    const rows = await this.#db.all<{ id: number | string, types: number | string }>('SELECT id, types FROM {history_blocks} WHERE tenant = ? AND max_ts >= ? ORDER BY id', [tenant, sinceMs])
    return rows.map((r) => ({ id: Number(r.id), types: Number(r.types) >>> 0 }))
  }

  /** The parts of a block, by item id. */
  async blockParts (block: number): Promise<RetroPart[]> {
    const rows = await this.#db.all<{ id: number | string, n: number, req: number | string, part: Buffer }>('SELECT id, n, req, part FROM {history_parts} WHERE block = ? ORDER BY id', [block])
    return rows.map((r) => ({ id: Number(r.id), n: Number(r.n), req: Number(r.req), part: r.part }))
  }

  /**
   * Notes that a pass is owed: one started (and may be cut by a stop or a crash before it finishes) or one waited
   * when the service stopped. `sinceMs` is its lookback start; an older one already owed is kept. Returns the note's
   * number, which only this note has: clearOwed with it clears the debt unless another note was made since.
   */
  async noteOwed (sinceMs: number, now = Date.now()): Promise<number> {
    const rows = await this.#db.all<{ notes: number | string }>('INSERT INTO {retro_hunt_owed} (id, since_ms, notes, noted_at) VALUES (1, ?, 1, ?) ' +
      'ON CONFLICT (id) DO UPDATE SET since_ms = CASE WHEN excluded.since_ms < {retro_hunt_owed}.since_ms ' +
      'THEN excluded.since_ms ELSE {retro_hunt_owed}.since_ms END, notes = {retro_hunt_owed}.notes + 1, noted_at = excluded.noted_at ' +
      'RETURNING notes', [sinceMs, new Date(now).toISOString()])
    return Number(rows[0]?.notes)
  }

  /** The lookback start of the pass owed, or null when none is. */
  async owed (): Promise<number | null> {
    const r = (await this.#db.all<{ since_ms: number | string }>('SELECT since_ms FROM {retro_hunt_owed} WHERE id = 1', []))[0]
    return r === undefined ? null : Number(r.since_ms)
  }

  /** A pass that made note `note` finished uncut: the debt is cleared, unless a note was made after it. */
  async clearOwed (note: number): Promise<void> {
    await this.#db.run('DELETE FROM {retro_hunt_owed} WHERE id = 1 AND notes = ?', [note])
  }

  /** The snapshot the last pass that finished hunted with (its version and input key), or null before any. */
  async hunted (): Promise<HuntedSnapshot | null> {
    const r = (await this.#db.all<{ version: string, input_key: string }>('SELECT version, input_key FROM {retro_hunt_seen} WHERE id = 1', []))[0]
    return r === undefined ? null : { version: r.version, inputKey: r.input_key }
  }

  /** Notes that a pass finished with snapshot `seen` (or that the first start takes it as its baseline). */
  async noteHunted (seen: HuntedSnapshot, now = Date.now()): Promise<void> {
    await this.#db.run('INSERT INTO {retro_hunt_seen} (id, version, input_key, seen_at) VALUES (1, ?, ?, ?) ' +
      'ON CONFLICT (id) DO UPDATE SET version = excluded.version, input_key = excluded.input_key, seen_at = excluded.seen_at',
    [seen.version, seen.inputKey, new Date(now).toISOString()])
  }

  /** A request's date (epoch ms) and key id, or null when it is gone (purged). */
  async request (id: number): Promise<RetroRequest | null> {
    const sql = this.#dialect === 'sqlite'
      ? 'SELECT id, ts, apikey FROM {history_requests} WHERE id = ?'
      : 'SELECT id, (extract(epoch from date) * 1000)::bigint AS ts, apikey FROM {history_requests} WHERE id = ?'
    const r = (await this.#db.all<{ id: number | string, ts: number | string, apikey: string }>(sql, [id]))[0]
    return r === undefined ? null : { id: Number(r.id), ts: Number(r.ts), apikey: r.apikey }
  }
}

/**
 * The owed-pass table both stores create (schema version 12 on SQLite, 13 on PostgreSQL): one row at most, kept while
 * a pass is owed (RetroHunter: a pass cut by a stop or a crash, or one that waited at a stop).
 */
export function retroHuntOwedSchema (table: string): string {
  return `
  CREATE TABLE ${table} (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    since_ms BIGINT NOT NULL,                -- the earliest lookback start (epoch ms) a pass owes
    notes BIGINT NOT NULL,                   -- notes made since the debt began: a pass clears only its own
    noted_at TEXT NOT NULL                   -- ISO 8601 UTC: when the last note was made
  );
  `
}

/**
 * The snapshot the retro-hunt last hunted with (schema version 14 on SQLite, 15 on PostgreSQL): one row at most.
 * At a start (or a new lead) whose snapshot is another, the intel changed while no pass watched, and one pass runs
 * over every listing (RetroHunter.resumeOwed).
 */
export function retroHuntSeenSchema (table: string): string {
  return `
  CREATE TABLE ${table} (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    version TEXT NOT NULL,                   -- the snapshot's header.version
    input_key TEXT NOT NULL,                 -- and its header.inputKey (which names its intel cache file)
    seen_at TEXT NOT NULL                    -- ISO 8601 UTC: when it was noted
  );
  `
}

/**
 * Which hits were handed to the webhooks (schema version 13 on SQLite, 14 on PostgreSQL): a hit is recorded with
 * handed = 0 and set to 1 in the transaction that queues its deliveries (WebhookStore.handOnHits), so a hit recorded
 * just before a crash is handed on after it, once. Hits recorded before this version count as handed on.
 */
export function retroHitsHandedSchema (hits: string, collate: string): string {
  return `
  ALTER TABLE ${hits} ADD COLUMN handed INTEGER NOT NULL DEFAULT 1;
  CREATE INDEX retro_hits_unhanded ON ${hits} (id${collate}) WHERE handed = 0;
  `
}

/** The hits table both stores create (TEXT timestamps, ISO 8601 UTC, which sort as they compare). */
export function retroHuntSchema (hits: string, collate = ''): string {
  return `
  CREATE TABLE ${hits} (
    id TEXT PRIMARY KEY,                     -- rh_ + time-ordered id: newest first is by id
    tenant TEXT NOT NULL,
    found_at TEXT NOT NULL,
    indicator_type TEXT NOT NULL,
    indicator_value TEXT NOT NULL,           -- normalized
    cause_key TEXT NOT NULL,                 -- source, match, listed value, category and confidence of the cause
    score INTEGER NOT NULL,                  -- now.score (min_score filter)
    category TEXT NOT NULL,                  -- now.category (category filter)
    hit TEXT NOT NULL,                       -- the hit's JSON without id and found_at
    UNIQUE (tenant, indicator_type, indicator_value, cause_key)
  );
  CREATE INDEX retro_hits_tenant ON ${hits} (tenant, id${collate});
  `
}
