/**
 * PostgreSQL store (pg Pool): the shared store when several stateless instances run behind a load balancer.
 * Same contract as SqliteStore; every table lives in one schema (option `schema`), created by migrate(), so a
 * database can host several deployments and tests can use a throwaway schema.
 *
 * Keys, allowlist, feedback, usage and accounts are the shared modules over the pool's port (sql-store.ts,
 * postgres-port.ts, which also keeps the connection string out of every error); this class holds what is
 * PostgreSQL's own: migrating the schema, and history (history/postgres-history.ts, postgres-search.ts).
 */
import type { HistoryPart } from '../history/block.ts'
import { rowParts, searchPage } from '../history/blocks.ts'
import { kMoveBatch, PostgresHistory } from '../history/postgres-history.ts'
import { searchHistory, searchStatements } from '../history/postgres-search.ts'
import { decodeCursor, toRows, validateFilters, validateLimit, type HistoryRow } from '../history/rows.ts'
import { StoreError } from '../errors.ts'
import { kPostgresMigrations } from './migrations/postgres/index.ts'
import { PostgresPort } from './postgres-port.ts'
import { RetroHuntStore } from './retro-hunt.ts'
import { WebhookStore } from './webhooks.ts'
import { SqlStore } from './sql-store.ts'
import type { HistoryRecord, JournalMark, SearchFilters, SearchPage, Store } from './types.ts'

/** Options of PostgresStore. */
export interface PostgresStoreOptions {
  /** postgres:// connection string; never logged or put in an error. */
  url: string
  /** Schema holding every table (default `public`); lowercase identifier, created by migrate(). */
  schema?: string
  /** Pool size (default 10). */
  max?: number
  /** How long to wait for a connection before failing, in ms. */
  connectionTimeoutMs?: number
  /** Receives errors of idle pooled connections (already sanitized); without it they are dropped, not thrown. */
  onError?: (err: StoreError) => void
  /** History items per transaction while rows of schema version 7 move into parts (default 50,000). */
  moveBatch?: number
}

const kDefaultSchema = 'public'
const kSchemaPattern = /^[a-z_][a-z0-9_]{0,62}$/
const kDefaultPoolSize = 10
const kDefaultConnectionTimeoutMs = 5000 // 5 s: a health check or request fails fast instead of hanging

/** The pool of valid options (checked before any connection exists). */
function port (options: PostgresStoreOptions): PostgresPort {
  if (options === null || typeof options !== 'object' || typeof options.url !== 'string' || options.url === '') {
    throw new StoreError('INVALID_OPTIONS', 'PostgresStore needs a connection string')
  }
  const schema = options.schema ?? kDefaultSchema
  if (!kSchemaPattern.test(schema)) {
    throw new StoreError('INVALID_OPTIONS', 'schema must be a lowercase identifier (letters, digits, underscore; at most 63)')
  }
  return new PostgresPort({
    url: options.url,
    schema,
    max: options.max ?? kDefaultPoolSize,
    connectionTimeoutMs: options.connectionTimeoutMs ?? kDefaultConnectionTimeoutMs,
    ...(options.onError === undefined ? {} : { onError: options.onError })
  })
}

/** Store on a PostgreSQL database, all tables in one schema. */
export class PostgresStore extends SqlStore implements Store {
  readonly #port: PostgresPort
  readonly #schema: string
  readonly #s: string
  readonly #moveBatch: number
  /** History: parts, blocks, day partitions (history/postgres-history.ts). */
  readonly #history: PostgresHistory
  /** Retro-hunt hits and its reads of history blocks, over this store's port. */
  readonly retroHunt: RetroHuntStore
  /** Retro-hunt webhooks and deliveries, over this store's port. */
  readonly webhooks: WebhookStore

  constructor (options: PostgresStoreOptions) {
    const pool = port(options)
    super(pool)
    this.#port = pool
    this.retroHunt = new RetroHuntStore(pool, 'postgres')
    this.webhooks = new WebhookStore(pool, 'postgres')
    this.#schema = options.schema ?? kDefaultSchema
    this.#s = `"${this.#schema}"`
    this.#moveBatch = options.moveBatch ?? kMoveBatch
    this.#history = new PostgresHistory({
      schema: this.#schema,
      query: async (sql, params) => await pool.query(sql, params),
      transaction: async (fn) => await pool.withTransaction(fn),
      session: async (fn) => await pool.withSession(fn)
    })
  }

  /**
   * Creates the schema and tables, or upgrades them; concurrent callers serialize on an advisory lock. Then moves
   * history rows of schema version 7 into parts (resumable: history/postgres-history.ts moveRows). `version` stops at
   * that schema version, without the move (tests).
   */
  async migrate (version?: number): Promise<void> {
    const s = this.#s
    await this.#port.withTransaction(async (c) => {
      // Transaction-scoped advisory lock: instances starting together apply each migration exactly once,
      // and CREATE SCHEMA IF NOT EXISTS does not race (it can fail with a unique violation when run concurrently).
      await c.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`ioc-verdict:migrate:${this.#schema}`])
      await c.query(`CREATE SCHEMA IF NOT EXISTS ${s}`)
      await c.query(`CREATE TABLE IF NOT EXISTS ${s}.schema_version (version integer NOT NULL)`)
      const { rows } = await c.query<{ v: number | null }>(`SELECT max(version) AS v FROM ${s}.schema_version`)
      const last = Math.min(version ?? kPostgresMigrations.length, kPostgresMigrations.length)
      for (let v = rows[0]?.v ?? 0; v < last; v++) {
        await c.query((kPostgresMigrations[v] as (s: string) => string)(s))
        await c.query(`INSERT INTO ${s}.schema_version (version) VALUES ($1)`, [v + 1])
      }
    })
    if (version === undefined) await this.#history.moveRows(this.#moveBatch)
  }

  /** Validates records, then writes them as writeHistoryRows does. */
  async writeHistory (records: HistoryRecord[]): Promise<void> {
    await this.writeHistoryRows(toRows(records)) // validates everything before the transaction starts
  }

  /** Inserts rows the service built itself, encoded into parts (one per request run), with their usage counters. */
  async writeHistoryRows (rows: readonly HistoryRow[]): Promise<void> {
    this.#port.assertOpen()
    await this.#history.write(rowParts(rows), undefined)
  }

  /**
   * Inserts encoded parts with their usage counters in one transaction (history/postgres-history.ts), saving the
   * journal mark in the same transaction when given.
   */
  async writeHistoryParts (parts: readonly HistoryPart[], mark?: JournalMark, meanwhile?: () => void): Promise<void> {
    this.#port.assertOpen()
    await this.#history.write(parts, mark, meanwhile)
  }

  /** One page of a tenant's history, newest first. */
  async searchHistory (tenant: string, filters: SearchFilters, limit: number, cursor: string | null): Promise<SearchPage> {
    this.#port.assertOpen()
    if (typeof tenant !== 'string' || tenant === '') throw new StoreError('INVALID_REQUEST', 'tenant is required')
    const f = validateFilters(filters)
    const n = validateLimit(limit)
    const c = decodeCursor(cursor)
    // One item more than asked tells whether another page exists.
    return searchPage(await searchHistory(async (sql, params) => await this.#port.query(sql, params), this.#s, tenant, f, c, n + 1), n)
  }

  /**
   * EXPLAIN lines of the statements searchHistory runs first (a page of blocks or requests, then their parts),
   * planned with sequential scans, bitmap scans and sorts disabled: a plan that still contains one of them has no
   * index able to serve the query in order (tests).
   */
  async explainSearch (tenant: string, filters: SearchFilters, cursor: string | null = null): Promise<string[]> {
    this.#port.assertOpen()
    const f = validateFilters(filters)
    const after = decodeCursor(cursor)
    // What a block or a request points to is planned on the newest day that has partitions.
    const day = (await this.#history.partitionDays()).at(-1) ?? new Date().toISOString().slice(0, 10)
    const statements = searchStatements(this.#s, tenant, f, after, day)
    return await this.#port.withTransaction(async (c) => {
      await c.query('SET LOCAL enable_seqscan = off')
      await c.query('SET LOCAL enable_bitmapscan = off')
      await c.query('SET LOCAL enable_sort = off')
      const lines: string[] = []
      for (const st of statements) {
        const { rows } = await c.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${st.sql}`, st.params)
        lines.push(...rows.map((r) => r['QUERY PLAN']))
      }
      return lines
    })
  }

  /**
   * Drops the day partitions of history that ended at or before `before` (history/postgres-history.ts): a day's
   * records go once the whole day is older than the cutoff. Returns the number of records (items) dropped. Usage
   * counters are billing records with their own retention: they are not decremented.
   */
  async purgeHistory (before: Date): Promise<number> {
    this.#port.assertOpen()
    const ms = before instanceof Date ? before.getTime() : Number.NaN
    if (!Number.isFinite(ms)) throw new StoreError('INVALID_REQUEST', 'before must be a valid Date')
    return await this.#history.purge(new Date(ms))
  }

  /** Ends the pool after in-flight queries; idempotent. */
  async close (): Promise<void> {
    await this.#port.close()
  }
}
