/**
 * PostgreSQL store (pg Pool): the shared store when several stateless instances run behind a load balancer.
 * Same contract as SqliteStore; every table lives in one schema (option `schema`), created by migrate(), so a
 * database can host several deployments and tests can use a throwaway schema.
 *
 * The connection string carries credentials: it is never part of an error message, and errors from pg are
 * wrapped in StoreError with the URL and password stripped (see wrapPgError).
 */
import pg from 'pg'
import { generateKey, isKeyId, parseKey, secretMatches, validateKeyOptions } from './api-keys.ts'
import {
  columnFilter, decodeCursor, encodeCursor, MAX_INDEXED_CHARS, toRows, usageDeltas, validateFilters, validateLimit, type HistoryRow,
  type Cursor, type ValidFilters
} from './history-rows.ts'
import { safeCause, scrub, secretsOf } from './redact.ts'
import { StoreError } from './store-error.ts'
import { assertUtcDay } from './utc-day.ts'
import type {
  ApiKeyRecord, CreatedKey, CreateKeyOptions, HistoryRecord, SearchFilters, SearchPage, Store, UsageReport
} from './types.ts'

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
}

const kDefaultSchema = 'public'
const kSchemaPattern = /^[a-z_][a-z0-9_]{0,62}$/
const kDefaultPoolSize = 10
const kDefaultConnectionTimeoutMs = 5000 // 5 s: a health check or request fails fast instead of hanging
const kPurgeBatch = 5000 // rows per DELETE, each its own transaction, so writers are not blocked by a long purge
const kMaxKeyIdAttempts = 3
// SQLSTATE classes meaning the server or the connection is unavailable, not that the query is wrong.
const kUnavailableSqlState = /^(08|53|57P0[1-3])/
const kUnavailableErrno = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'ETIMEDOUT', 'EAI_AGAIN', 'EHOSTUNREACH', 'EPIPE'])

function migrations (s: string): string[] {
  // Each entry upgrades the schema by one version; never edit a released entry, append a new one.
  return [
    `
    CREATE TABLE ${s}.api_keys (
      id text PRIMARY KEY,
      tenant text NOT NULL,
      permissions text[] NOT NULL,          -- canonical order
      quota bigint,                         -- indicators per UTC day, NULL = unlimited
      secret_hash bytea NOT NULL,           -- sha256(secret), 32 bytes
      created_at timestamptz NOT NULL,
      revoked_at timestamptz
    );

    CREATE TABLE ${s}.history (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      date timestamptz NOT NULL,
      tenant text NOT NULL,
      request_id text NOT NULL,
      bulk_request_id text,
      http_status integer NOT NULL,
      auth_type text NOT NULL,
      apikey text NOT NULL,
      user_id text,
      indicator_type text,
      indicator_value text NOT NULL,        -- as sent
      indicator_normalized text,
      doc json NOT NULL                     -- the whole record; json (not jsonb) keeps its key order and text
    );
    -- Every search is tenant-scoped and ordered by (date, id) descending: each index starts with tenant and ends
    -- with (date, id), so a filter is an index range scanned backwards with no sort, and LIMIT stops it early.
    CREATE INDEX history_tenant_date ON ${s}.history (tenant, date, id);
    CREATE INDEX history_tenant_apikey ON ${s}.history (tenant, apikey, date, id);
    CREATE INDEX history_tenant_user ON ${s}.history (tenant, user_id, date, id) WHERE user_id IS NOT NULL;
    CREATE INDEX history_tenant_itype ON ${s}.history (tenant, indicator_type, date, id);
    -- A prefix expression: btree entries over ~2.7 kB are refused, and one long value must not fail a whole batch.
    CREATE INDEX history_tenant_ivalue ON ${s}.history (tenant, left(indicator_value, ${MAX_INDEXED_CHARS}), date, id);
    -- Serves exclude_bulk_requests (IS NULL is indexable in a btree).
    CREATE INDEX history_tenant_bulk ON ${s}.history (tenant, date, id) WHERE bulk_request_id IS NULL;
    -- Serves purge, which is not tenant-scoped.
    CREATE INDEX history_date ON ${s}.history (date);

    -- Billing counters: one row per (tenant, key, UTC day), kept when history is purged.
    CREATE TABLE ${s}.usage (
      tenant text NOT NULL,
      day date NOT NULL,
      key_id text NOT NULL,
      count bigint NOT NULL,
      PRIMARY KEY (tenant, day, key_id)
    );
    CREATE INDEX usage_key_day ON ${s}.usage (key_id, day);
    `
  ]
}

interface KeyRow {
  id: string
  tenant: string
  permissions: string[]
  quota: string | number | null
  secret_hash: Buffer
  created_at: Date
  revoked_at: Date | null
}

function toKeyRecord (row: KeyRow): ApiKeyRecord {
  return {
    id: row.id,
    tenant: row.tenant,
    permissions: row.permissions,
    quota: row.quota === null ? null : Number(row.quota), // bigint arrives as a string
    createdAt: row.created_at.toISOString(),
    revokedAt: row.revoked_at === null ? null : row.revoked_at.toISOString()
  }
}

/**
 * Wraps a pg error: message scrubbed, SQLSTATE kept, and the original as `cause` unless it mentions the URL or
 * password (Node's ERR_INVALID_URL carries the whole string in `input`), in which case a scrubbed copy stands in.
 */
function wrapPgError (err: unknown, secrets: readonly string[]): StoreError {
  if (err instanceof StoreError) return err
  const e = (err !== null && typeof err === 'object' ? err : { message: String(err) }) as { code?: unknown, message?: unknown }
  const code = typeof e.code === 'string' ? e.code : undefined
  const message = scrub(typeof e.message === 'string' ? e.message : 'unknown error', secrets)
  const unavailable = code !== undefined && (kUnavailableSqlState.test(code) || kUnavailableErrno.has(code))
  // pg's own pool and connection failures carry no code ("timeout exceeded when trying to connect",
  // "Connection terminated unexpectedly").
  const looksLikeTimeout = code === undefined && /timeout|terminated|connection/i.test(message)
  const cause = safeCause(err, secrets)
  if (code === 'ERR_INVALID_URL') return new StoreError('INVALID_OPTIONS', 'the PostgreSQL connection string is not a valid URL', { cause })
  const wrapped = unavailable || looksLikeTimeout
    ? new StoreError('STORE_UNAVAILABLE', `PostgreSQL unavailable: ${message}`, { cause })
    : new StoreError('STORE_ERROR', `PostgreSQL error${code !== undefined ? ` ${code}` : ''}: ${message}`, { cause })
  if (code !== undefined && /^[0-9A-Z]{5}$/.test(code)) (wrapped as StoreError & { sqlState?: string }).sqlState = code
  return wrapped
}

function buildSearch (table: string, tenant: string, f: ValidFilters, cursor: Cursor | null, limit: number): { sql: string, params: unknown[] } {
  const params: unknown[] = [tenant]
  const where = ['tenant = $1']
  const add = (clause: (n: string) => string, value: unknown): void => {
    params.push(value)
    where.push(clause(`$${params.length}`))
  }
  if (f.indicatorValue !== null) {
    const { full, prefix } = columnFilter(f.indicatorValue)
    add((n) => `left(indicator_value, ${MAX_INDEXED_CHARS}) = ${n}`, prefix)
    add((n) => `indicator_value = ${n}`, full)
  }
  if (f.userId !== null) add((n) => `user_id = ${n}`, f.userId)
  if (f.apikey !== null) add((n) => `apikey = ${n}`, f.apikey)
  if (f.indicatorType !== null) add((n) => `indicator_type = ${n}`, f.indicatorType)
  if (f.excludeBulk) where.push('bulk_request_id IS NULL')
  if (f.authType !== null) add((n) => `auth_type = ${n}`, f.authType)
  if (f.gteMs !== null) add((n) => `date >= ${n}::timestamptz`, new Date(f.gteMs).toISOString())
  if (f.ltMs !== null) add((n) => `date < ${n}::timestamptz`, new Date(f.ltMs).toISOString())
  if (cursor !== null) {
    params.push(cursor.date, cursor.id)
    // A row comparison is one btree range condition on (date, id), so the cursor seeks instead of filtering.
    where.push(`(date, id) < ($${params.length - 1}::timestamptz, $${params.length}::bigint)`)
  }
  params.push(limit)
  const sql = `SELECT id, date, doc FROM ${table} WHERE ${where.join(' AND ')} ORDER BY date DESC, id DESC LIMIT $${params.length}`
  return { sql, params }
}

/** Store on a PostgreSQL database, all tables in one schema. */
export class PostgresStore implements Store {
  readonly #pool: pg.Pool
  readonly #secrets: string[]
  readonly #schema: string
  readonly #s: string
  #closed = false
  #ending: Promise<void> | null = null

  constructor (options: PostgresStoreOptions) {
    if (options === null || typeof options !== 'object' || typeof options.url !== 'string' || options.url === '') {
      throw new StoreError('INVALID_OPTIONS', 'PostgresStore needs a connection string')
    }
    const schema = options.schema ?? kDefaultSchema
    if (!kSchemaPattern.test(schema)) {
      throw new StoreError('INVALID_OPTIONS', 'schema must be a lowercase identifier (letters, digits, underscore; at most 63)')
    }
    this.#schema = schema
    this.#s = `"${schema}"`
    this.#secrets = secretsOf(options.url)
    this.#pool = new pg.Pool({
      connectionString: options.url,
      max: options.max ?? kDefaultPoolSize,
      connectionTimeoutMillis: options.connectionTimeoutMs ?? kDefaultConnectionTimeoutMs,
      application_name: 'ioc-verdict'
    })
    // An idle pooled connection that dies emits 'error' on the pool; unhandled, it would crash the process.
    const onError = options.onError
    this.#pool.on('error', (err) => { onError?.(wrapPgError(err, this.#secrets)) })
  }

  #check (): void {
    if (this.#closed) throw new StoreError('STORE_CLOSED', 'the store is closed')
  }

  async #query<R extends pg.QueryResultRow> (sql: string, params: unknown[] = []): Promise<pg.QueryResult<R>> {
    this.#check()
    try {
      return await this.#pool.query<R>(sql, params)
    } catch (err) {
      throw wrapPgError(err, this.#secrets)
    }
  }

  async #transaction<T> (fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    this.#check()
    let client: pg.PoolClient
    try {
      client = await this.#pool.connect()
    } catch (err) {
      throw wrapPgError(err, this.#secrets)
    }
    let broken = false
    try {
      await client.query('BEGIN')
      const result = await fn(client)
      await client.query('COMMIT')
      return result
    } catch (err) {
      try {
        await client.query('ROLLBACK')
      } catch {
        broken = true // the connection is unusable: destroy it rather than return it to the pool
      }
      throw wrapPgError(err, this.#secrets)
    } finally {
      client.release(broken)
    }
  }

  /** Creates the schema and tables, or upgrades them; concurrent callers serialize on an advisory lock. */
  async migrate (): Promise<void> {
    const s = this.#s
    await this.#transaction(async (c) => {
      // Transaction-scoped advisory lock: instances starting together apply each migration exactly once,
      // and CREATE SCHEMA IF NOT EXISTS does not race (it can fail with a unique violation when run concurrently).
      await c.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`ioc-verdict:migrate:${this.#schema}`])
      await c.query(`CREATE SCHEMA IF NOT EXISTS ${s}`)
      await c.query(`CREATE TABLE IF NOT EXISTS ${s}.schema_version (version integer NOT NULL)`)
      const { rows } = await c.query<{ v: number | null }>(`SELECT max(version) AS v FROM ${s}.schema_version`)
      const all = migrations(s)
      for (let v = rows[0]?.v ?? 0; v < all.length; v++) {
        await c.query(all[v] as string)
        await c.query(`INSERT INTO ${s}.schema_version (version) VALUES ($1)`, [v + 1])
      }
    })
  }

  /** Creates a key and returns the only copy of its secret. */
  async createKey (options: CreateKeyOptions): Promise<CreatedKey> {
    const valid = validateKeyOptions(options)
    this.#check()
    const createdAt = new Date().toISOString()
    for (let attempt = 1; ; attempt++) {
      const { id, key, secretHash } = generateKey()
      try {
        await this.#query(
          `INSERT INTO ${this.#s}.api_keys (id, tenant, permissions, quota, secret_hash, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
          [id, valid.tenant, valid.permissions, valid.quota, secretHash, createdAt])
        return { key, record: { id, tenant: valid.tenant, permissions: valid.permissions, quota: valid.quota, createdAt, revokedAt: null } }
      } catch (err) {
        if ((err as { sqlState?: string }).sqlState !== '23505' || attempt >= kMaxKeyIdAttempts) throw err
      }
    }
  }

  /** Every key, oldest first, without secrets. */
  async listKeys (): Promise<ApiKeyRecord[]> {
    const { rows } = await this.#query<KeyRow>(`SELECT * FROM ${this.#s}.api_keys ORDER BY created_at, id`)
    return rows.map(toKeyRecord)
  }

  /** Revokes an active key; false for an unknown or already revoked id. */
  async revokeKey (id: string): Promise<boolean> {
    this.#check()
    if (!isKeyId(id)) return false
    const { rowCount } = await this.#query(
      `UPDATE ${this.#s}.api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL`, [new Date().toISOString(), id])
    return rowCount === 1
  }

  /** The active key matching `presented`, or null. */
  async verifyKey (presented: string): Promise<ApiKeyRecord | null> {
    this.#check()
    const parsed = parseKey(presented)
    // The key format is public, so rejecting a malformed string early reveals nothing about stored keys.
    if (parsed === null) return null
    const { rows } = await this.#query<KeyRow>(`SELECT * FROM ${this.#s}.api_keys WHERE id = $1`, [parsed.id])
    const row = rows[0]
    const ok = secretMatches(row?.secret_hash ?? null, parsed.secret)
    if (!ok || row === undefined || row.revoked_at !== null) return null
    return toKeyRecord(row)
  }

  /** Number of keys ever created, revoked ones included. */
  async countKeys (): Promise<number> {
    const { rows } = await this.#query<{ n: string }>(`SELECT count(*) AS n FROM ${this.#s}.api_keys`)
    return Number(rows[0]?.n ?? 0)
  }

  /**
   * Inserts every row with one INSERT ... SELECT FROM unnest(arrays) (12 parameters whatever the batch size,
   * where a multi-row VALUES would hit the 65,535-parameter limit at ~5,000 rows) and upserts the usage counters,
   * in one transaction: counters always equal rows written.
   */
  async writeHistory (records: HistoryRecord[]): Promise<void> {
    await this.writeHistoryRows(toRows(records)) // validates everything before the transaction starts
  }

  /** Inserts rows the service built itself, with their usage counters, in one transaction. */
  async writeHistoryRows (rows: readonly HistoryRow[]): Promise<void> {
    this.#check()
    if (rows.length === 0) return
    const deltas = usageDeltas(rows)
    const s = this.#s
    await this.#transaction(async (c) => {
      await c.query(
        `INSERT INTO ${s}.history (date, tenant, request_id, bulk_request_id, http_status, auth_type, apikey, user_id, ` +
        'indicator_type, indicator_value, indicator_normalized, doc) ' +
        'SELECT * FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::integer[], $6::text[], ' +
        '$7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::json[])',
        [
          rows.map((r) => r.date), rows.map((r) => r.tenant), rows.map((r) => r.requestId), rows.map((r) => r.bulkRequestId),
          rows.map((r) => r.httpStatus), rows.map((r) => r.authType), rows.map((r) => r.apikey), rows.map((r) => r.userId),
          rows.map((r) => r.indicatorType), rows.map((r) => r.indicatorValue), rows.map((r) => r.indicatorNormalized),
          rows.map((r) => r.doc)
        ])
      // Deltas are sorted, so concurrent batches lock counter rows in the same order and cannot deadlock.
      await c.query(
        `INSERT INTO ${s}.usage AS u (tenant, day, key_id, count) ` +
        'SELECT * FROM unnest($1::text[], $2::date[], $3::text[], $4::bigint[]) ' +
        'ON CONFLICT (tenant, day, key_id) DO UPDATE SET count = u.count + excluded.count',
        [deltas.map((d) => d.tenant), deltas.map((d) => d.day), deltas.map((d) => d.keyId), deltas.map((d) => d.count)])
    })
  }

  #search (tenant: string, filters: SearchFilters, limit: number, cursor: string | null): { sql: string, params: unknown[] } {
    this.#check()
    if (typeof tenant !== 'string' || tenant === '') throw new StoreError('INVALID_REQUEST', 'tenant is required')
    const f = validateFilters(filters)
    const n = validateLimit(limit)
    const c = decodeCursor(cursor)
    // One row more than asked tells whether another page exists, so the last page has next_cursor null.
    return buildSearch(`${this.#s}.history`, tenant, f, c, n + 1)
  }

  /** One page of a tenant's history, newest first. */
  async searchHistory (tenant: string, filters: SearchFilters, limit: number, cursor: string | null): Promise<SearchPage> {
    const { sql, params } = this.#search(tenant, filters, limit, cursor)
    const { rows } = await this.#query<{ id: string, date: Date, doc: HistoryRecord }>(sql, params)
    const more = rows.length > limit
    if (more) rows.pop()
    const last = rows[rows.length - 1]
    return {
      results: rows.map((r) => r.doc),
      next_cursor: more && last !== undefined ? encodeCursor(last.date.toISOString(), Number(last.id)) : null
    }
  }

  /**
   * EXPLAIN lines of the query searchHistory would run, planned with sequential scans, bitmap scans and sorts
   * disabled: a plan that still contains one of them has no index able to serve the query in order (tests).
   */
  async explainSearch (tenant: string, filters: SearchFilters, cursor: string | null = null): Promise<string[]> {
    const { sql, params } = this.#search(tenant, filters, 10, cursor)
    return await this.#transaction(async (c) => {
      await c.query('SET LOCAL enable_seqscan = off')
      await c.query('SET LOCAL enable_bitmapscan = off')
      await c.query('SET LOCAL enable_sort = off')
      const { rows } = await c.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`, params)
      return rows.map((r) => r['QUERY PLAN'])
    })
  }

  /** Usage counters of a tenant, or of one of its keys, on one UTC day. */
  async usage (tenant: string, keyId: string | null, day: string): Promise<UsageReport> {
    this.#check()
    assertUtcDay(day)
    const base = `SELECT key_id, count FROM ${this.#s}.usage WHERE tenant = $1 AND day = $2::date`
    const { rows } = keyId === null
      ? await this.#query<{ key_id: string, count: string }>(`${base} ORDER BY key_id`, [tenant, day])
      : await this.#query<{ key_id: string, count: string }>(`${base} AND key_id = $3`, [tenant, day, keyId])
    const keys = rows.map((r) => ({ apikey: r.key_id, count: Number(r.count) }))
    return { tenant, day, keys, total: keys.reduce((sum, k) => sum + k.count, 0) }
  }

  /** Counter of one key on one UTC day. */
  async usageForKey (keyId: string, day: string): Promise<number> {
    this.#check()
    assertUtcDay(day)
    const { rows } = await this.#query<{ n: string }>(
      `SELECT coalesce(sum(count), 0) AS n FROM ${this.#s}.usage WHERE key_id = $1 AND day = $2::date`, [keyId, day])
    return Number(rows[0]?.n ?? 0)
  }

  /**
   * Deletes history older than `before` in batches, each its own transaction.
   * Usage counters are billing records with their own retention: they are not decremented.
   */
  async purgeHistory (before: Date): Promise<number> {
    this.#check()
    const ms = before instanceof Date ? before.getTime() : Number.NaN
    if (!Number.isFinite(ms)) throw new StoreError('INVALID_REQUEST', 'before must be a valid Date')
    const iso = new Date(ms).toISOString()
    const t = `${this.#s}.history`
    let total = 0
    for (;;) {
      const { rowCount } = await this.#query(
        `DELETE FROM ${t} WHERE id IN (SELECT id FROM ${t} WHERE date < $1::timestamptz LIMIT ${kPurgeBatch})`, [iso])
      total += rowCount ?? 0
      if ((rowCount ?? 0) < kPurgeBatch) return total
    }
  }

  /** Throws when the database cannot answer. */
  async ping (): Promise<void> {
    await this.#query('SELECT 1')
  }

  /** Ends the pool after in-flight queries; idempotent. */
  async close (): Promise<void> {
    this.#closed = true
    this.#ending ??= this.#pool.end().catch(() => {})
    await this.#ending
  }
}
