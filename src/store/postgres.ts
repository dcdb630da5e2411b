/**
 * PostgreSQL store (pg Pool): the shared store when several stateless instances run behind a load balancer.
 * Same contract as SqliteStore; every table lives in one schema (option `schema`), created by migrate(), so a
 * database can host several deployments and tests can use a throwaway schema.
 *
 * The connection string carries credentials: it is never part of an error message, and errors from pg are
 * wrapped in StoreError with the URL and password stripped (see wrapPgError).
 */
import pg from 'pg'
import { Accounts } from './accounts.ts'
import { expired, generateKey, isKeyId, newKeyRecord, parseKey, secretMatches, validateKeyOptions } from './api-keys.ts'
import type { HistoryPart } from '../history/block.ts'
import { rowParts, searchPage } from '../history/blocks.ts'
import { kMoveBatch, PostgresHistory } from '../history/postgres-history.ts'
import { searchHistory, searchStatements } from '../history/postgres-search.ts'
import { decodeCursor, toRows, validateFilters, validateLimit, type HistoryRow } from '../history/rows.ts'
import { safeCause, scrub, secretsOf } from './redact.ts'
import { StoreError } from '../errors.ts'
import { kPostgresMigrations } from './migrations/postgres/index.ts'
import { assertUtcDay } from '../history/utc-day.ts'
import { kAllowIds } from './allowlist.ts'
import {
  feedbackEntryOf, type FeedbackRow as SharedFeedbackRow, kFeedbackIds, kMaxSummarySignals, validateFeedbackFilters, validateFeedbackLimit,
  validateSummaryFilters
} from './feedback.ts'
import type {
  AllowEntry, AllowPage, ApiKeyRecord, CreatedKey, CreateKeyOptions, FeedbackDeletion, FeedbackEntry, FeedbackFilters, FeedbackPage, FeedbackSummary,
  FeedbackSummaryFilters, HistoryRecord, JournalMark, NewAllowEntry, NewFeedback, SearchFilters, SearchPage, Store, UsageReport
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
  /** History items per transaction while rows of schema version 7 move into parts (default 50,000). */
  moveBatch?: number
}

const kDefaultSchema = 'public'
const kSchemaPattern = /^[a-z_][a-z0-9_]{0,62}$/
const kDefaultPoolSize = 10
const kDefaultConnectionTimeoutMs = 5000 // 5 s: a health check or request fails fast instead of hanging
const kMaxKeyIdAttempts = 3
// SQLSTATE classes meaning the server or the connection is unavailable, not that the query is wrong.
const kUnavailableSqlState = /^(08|53|57P0[1-3])/
const kUnavailableErrno = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'ETIMEDOUT', 'EAI_AGAIN', 'EHOSTUNREACH', 'EPIPE'])

interface AllowRow { id: string, tenant: string, kind: string, value: string, reason: string, created_by: string, created_at: Date, expires_at: Date | null }

function toAllowEntry (r: AllowRow): AllowEntry {
  return {
    id: r.id,
    tenant: r.tenant,
    kind: r.kind,
    value: r.value,
    reason: r.reason,
    createdBy: r.created_by,
    createdAt: r.created_at.toISOString(),
    expiresAt: r.expires_at === null ? null : r.expires_at.toISOString()
  }
}

type FeedbackRow = SharedFeedbackRow<string[], Date>

function toFeedbackEntry (r: FeedbackRow): FeedbackEntry {
  return feedbackEntryOf(r, r.signal_ids, r.created_at.toISOString())
}

interface KeyRow {
  id: string
  tenant: string
  permissions: string[]
  quota: string | number | null
  secret_hash: Buffer
  created_at: Date
  revoked_at: Date | null
  rate_limit: number | null
  expires_at: Date | null
  allowed_cidrs: string[] | null
  last_used_at: Date | null
}

function toKeyRecord (row: KeyRow): ApiKeyRecord {
  return {
    id: row.id,
    tenant: row.tenant,
    permissions: row.permissions,
    quota: row.quota === null ? null : Number(row.quota), // bigint arrives as a string
    createdAt: row.created_at.toISOString(),
    revokedAt: row.revoked_at === null ? null : row.revoked_at.toISOString(),
    rateLimit: row.rate_limit,
    expiresAt: row.expires_at === null ? null : row.expires_at.toISOString(),
    allowedCidrs: row.allowed_cidrs,
    lastUsedAt: row.last_used_at === null ? null : row.last_used_at.toISOString()
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

/** Store on a PostgreSQL database, all tables in one schema. */
export class PostgresStore implements Store {
  readonly #pool: pg.Pool
  readonly #secrets: string[]
  readonly #schema: string
  readonly #s: string
  #closed = false
  #ending: Promise<void> | null = null
  readonly #moveBatch: number
  /** History: parts, blocks, day partitions (history/postgres-history.ts). */
  readonly #history: PostgresHistory
  /** Dashboard users and sessions, over this store's pool. */
  readonly accounts: Accounts

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
    this.#moveBatch = options.moveBatch ?? kMoveBatch
    this.#history = new PostgresHistory({
      schema,
      query: async (sql, params) => await this.#query(sql, params),
      transaction: async (fn) => await this.#transaction(fn),
      session: async (fn) => await this.#session(fn)
    })
    this.accounts = new Accounts({
      run: async (sql, params) => (await this.#query(this.#accountsSql(sql), params)).rowCount ?? 0,
      all: async <T>(sql: string, params: unknown[]) => (await this.#query(this.#accountsSql(sql), params)).rows as T[]
    })
    // An idle pooled connection that dies emits 'error' on the pool; unhandled, it would crash the process.
    const onError = options.onError
    this.#pool.on('error', (err) => { onError?.(wrapPgError(err, this.#secrets)) })
  }

  /** accounts.ts's SQL for PostgreSQL: numbered placeholders and the schema's tables. */
  #accountsSql (sql: string): string {
    let i = 0
    return sql.replace(/\?/g, () => `$${++i}`).replace(/\{(users|sessions|sign_in_failures)\}/g, (_m, t: string) => `${this.#s}.${t}`)
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

  /**
   * A pooled connection, with a listener for its 'error' event while it is checked out (the pool listens only while
   * it is idle): a connection lost mid-query fails that query, and must not also crash the process.
   */
  async #connect (): Promise<pg.PoolClient> {
    this.#check()
    let client: pg.PoolClient
    try {
      client = await this.#pool.connect()
    } catch (err) {
      throw wrapPgError(err, this.#secrets)
    }
    const ignore = (): void => {}
    client.on('error', ignore)
    const release = client.release
    client.release = (err?: Error | boolean) => {
      client.removeListener('error', ignore)
      release.call(client, err)
    }
    return client
  }

  async #transaction<T> (fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.#connect()
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

  /** Runs `fn` on one pooled connection (no transaction of its own); a connection that failed is not reused. */
  async #session<T> (fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.#connect()
    let broken = false
    try {
      return await fn(client)
    } catch (err) {
      broken = true
      throw wrapPgError(err, this.#secrets)
    } finally {
      client.release(broken)
    }
  }

  /**
   * Creates the schema and tables, or upgrades them; concurrent callers serialize on an advisory lock. Then moves
   * history rows of schema version 7 into parts (resumable: history/postgres-history.ts moveRows). `version` stops at
   * that schema version, without the move (tests).
   */
  async migrate (version?: number): Promise<void> {
    const s = this.#s
    await this.#transaction(async (c) => {
      // Transaction-scoped advisory lock: instances starting together apply each migration exactly once,
      // and CREATE SCHEMA IF NOT EXISTS does not race (it can fail with a unique violation when run concurrently).
      await c.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`ioc-verdict:migrate:${this.#schema}`])
      await c.query(`CREATE SCHEMA IF NOT EXISTS ${s}`)
      await c.query(`CREATE TABLE IF NOT EXISTS ${s}.schema_version (version integer NOT NULL)`)
      const { rows } = await c.query<{ v: number | null }>(`SELECT max(version) AS v FROM ${s}.schema_version`)
      const all = kPostgresMigrations.map((m) => m(s))
      for (let v = rows[0]?.v ?? 0; v < Math.min(version ?? all.length, all.length); v++) {
        await c.query(all[v] as string)
        await c.query(`INSERT INTO ${s}.schema_version (version) VALUES ($1)`, [v + 1])
      }
    })
    if (version === undefined) await this.#history.moveRows(this.#moveBatch)
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
          `INSERT INTO ${this.#s}.api_keys (id, tenant, permissions, quota, secret_hash, created_at, rate_limit, expires_at, allowed_cidrs) ` +
          'VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)',
          [id, valid.tenant, valid.permissions, valid.quota, secretHash, createdAt, valid.rateLimit, valid.expiresAt, valid.allowedCidrs])
        return { key, record: newKeyRecord(id, valid, createdAt) }
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

  /** Records a successful use of a key (never moves last_used_at back). */
  async touchKey (id: string, at: string): Promise<void> {
    this.#check()
    await this.#query(`UPDATE ${this.#s}.api_keys SET last_used_at = $1 WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $1)`, [at, id])
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
    if (!ok || row === undefined || row.revoked_at !== null || expired(row.expires_at?.toISOString() ?? null)) return null
    return toKeyRecord(row)
  }

  /** Number of keys ever created, revoked ones included. */
  async countKeys (): Promise<number> {
    const { rows } = await this.#query<{ n: string }>(`SELECT count(*) AS n FROM ${this.#s}.api_keys`)
    return Number(rows[0]?.n ?? 0)
  }

  async addAllowEntry (entry: NewAllowEntry): Promise<AllowEntry> {
    const now = Date.now()
    const { rows } = await this.#query<AllowRow>(
      `INSERT INTO ${this.#s}.allowlist (id, tenant, kind, value, reason, created_by, created_at, expires_at) ` +
      'VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *',
      [kAllowIds.next(now), entry.tenant, entry.kind, entry.value, entry.reason, entry.createdBy, new Date(now), entry.expiresAt === null ? null : new Date(entry.expiresAt)]
    )
    return toAllowEntry(rows[0]!)
  }

  async listAllowEntries (tenant: string, limit: number, cursor: string | null): Promise<AllowPage> {
    const after = cursor === null ? '' : kAllowIds.afterCursor(cursor)
    const { rows } = await this.#query<AllowRow>(
      `SELECT * FROM ${this.#s}.allowlist WHERE tenant = $1 AND id > $2 COLLATE "C" ORDER BY id COLLATE "C" LIMIT $3`, [tenant, after, limit + 1])
    const more = rows.length > limit
    const entries = rows.slice(0, limit).map(toAllowEntry)
    return { entries, nextCursor: more ? kAllowIds.cursorOf(entries[entries.length - 1]!.id) : null }
  }

  async deleteAllowEntry (tenant: string, id: string): Promise<boolean> {
    const { rowCount } = await this.#query(`DELETE FROM ${this.#s}.allowlist WHERE tenant = $1 AND id = $2`, [tenant, id])
    return (rowCount ?? 0) > 0
  }

  async addFeedback (entry: NewFeedback): Promise<FeedbackEntry> {
    const now = Date.now()
    const stored: FeedbackEntry = { ...entry, signalIds: [...new Set(entry.signalIds)], id: kFeedbackIds.next(now), createdAt: new Date(now).toISOString() }
    const s = this.#s
    await this.#transaction(async (c) => {
      await c.query(
        `INSERT INTO ${s}.feedback (id, tenant, verdict, indicator_type, indicator_value, indicator_normalized, note, score, category, ` +
        'signal_ids, engine_version, data_timestamp, created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)',
        [stored.id, stored.tenant, stored.verdict, stored.indicatorType, stored.indicatorValue, stored.indicatorNormalized, stored.note, stored.score,
          stored.category, stored.signalIds, stored.engineVersion, stored.dataTimestamp, stored.createdBy, stored.createdAt])
      if (stored.signalIds.length > 0) {
        await c.query(
          `INSERT INTO ${s}.feedback_signals (tenant, signal_id, feedback_id, verdict, created_at) ` +
          'SELECT $1, u.signal_id, $2, $3, $4::timestamptz FROM unnest($5::text[]) AS u(signal_id)',
          [stored.tenant, stored.id, stored.verdict, stored.createdAt, stored.signalIds])
      }
    })
    return stored
  }

  async listFeedback (tenant: string, filters: FeedbackFilters, limit: number, cursor: string | null): Promise<FeedbackPage> {
    this.#check()
    const f = validateFeedbackFilters(filters)
    const n = validateFeedbackLimit(limit)
    const params: unknown[] = []
    const p = (value: unknown): string => {
      params.push(value)
      return `$${params.length}`
    }
    const where = [`f.tenant = ${p(tenant)}`]
    if (cursor !== null) where.push(`f.id COLLATE "C" < ${p(kFeedbackIds.afterCursor(cursor))}`)
    if (f.verdict !== null) where.push(`f.verdict = ${p(f.verdict)}`)
    if (f.indicator !== null) where.push(`f.indicator_normalized = ${p(f.indicator)}`)
    if (f.createdBy !== null) where.push(`f.created_by = ${p(f.createdBy)}`)
    if (f.since !== null) where.push(`f.created_at >= ${p(f.since)}::timestamptz`)
    if (f.until !== null) where.push(`f.created_at < ${p(f.until)}::timestamptz`)
    if (f.signalId !== null) {
      where.push(`EXISTS (SELECT 1 FROM ${this.#s}.feedback_signals s WHERE s.tenant = f.tenant AND s.signal_id = ${p(f.signalId)} AND s.feedback_id = f.id)`)
    }
    const { rows } = await this.#query<FeedbackRow>(
      `SELECT f.* FROM ${this.#s}.feedback f WHERE ${where.join(' AND ')} ORDER BY f.id COLLATE "C" DESC LIMIT ${p(n + 1)}`, params)
    const more = rows.length > n
    const entries = rows.slice(0, n).map(toFeedbackEntry)
    return { entries, nextCursor: more ? kFeedbackIds.cursorOf(entries[entries.length - 1]!.id) : null }
  }

  async feedbackSummary (tenant: string, filters: FeedbackSummaryFilters): Promise<FeedbackSummary> {
    this.#check()
    const f = validateSummaryFilters(filters)
    const range: string[] = []
    const params: unknown[] = [tenant]
    if (f.since !== null) {
      params.push(f.since)
      range.push(`AND created_at >= $${params.length}::timestamptz`)
    }
    if (f.until !== null) {
      params.push(f.until)
      range.push(`AND created_at < $${params.length}::timestamptz`)
    }
    // One transaction: the totals and the per-signal counts see the same entries.
    return await this.#transaction(async (c) => {
      await c.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ')
      const { rows: totals } = await c.query<{ verdict: string, n: string }>(
        `SELECT verdict, count(*) AS n FROM ${this.#s}.feedback WHERE tenant = $1 ${range.join(' ')} GROUP BY verdict`, params)
      const { rows: signals } = await c.query<{ signal_id: string, fp: string, tp: string }>(
        'SELECT signal_id, count(*) FILTER (WHERE verdict = \'false_positive\') AS fp, count(*) FILTER (WHERE verdict = \'true_positive\') AS tp ' +
        `FROM ${this.#s}.feedback_signals WHERE tenant = $1 ${range.join(' ')} GROUP BY signal_id ORDER BY fp DESC, signal_id COLLATE "C" LIMIT ${kMaxSummarySignals}`,
        params)
      return {
        ...f,
        falsePositive: Number(totals.find((t) => t.verdict === 'false_positive')?.n ?? 0),
        truePositive: Number(totals.find((t) => t.verdict === 'true_positive')?.n ?? 0),
        signals: signals.map((r) => ({ signalId: r.signal_id, falsePositive: Number(r.fp), truePositive: Number(r.tp) }))
      }
    })
  }

  async deleteFeedback (tenant: string, id: string, onlyBy: string | null): Promise<FeedbackDeletion> {
    this.#check()
    if (!kFeedbackIds.valid(id)) return 'missing'
    const s = this.#s
    return await this.#transaction(async (c): Promise<FeedbackDeletion> => {
      const { rows } = await c.query<{ created_by: string }>(`SELECT created_by FROM ${s}.feedback WHERE tenant = $1 AND id = $2 FOR UPDATE`, [tenant, id])
      const row = rows[0]
      if (row === undefined) return 'missing'
      if (onlyBy !== null && row.created_by !== onlyBy) return 'not_owner'
      await c.query(`DELETE FROM ${s}.feedback_signals WHERE feedback_id = $1 AND tenant = $2`, [id, tenant])
      await c.query(`DELETE FROM ${s}.feedback WHERE tenant = $1 AND id = $2`, [tenant, id])
      return 'deleted'
    })
  }

  /** Validates records, then writes them as writeHistoryRows does. */
  async writeHistory (records: HistoryRecord[]): Promise<void> {
    await this.writeHistoryRows(toRows(records)) // validates everything before the transaction starts
  }

  /** Inserts rows the service built itself, encoded into parts (one per request run), with their usage counters. */
  async writeHistoryRows (rows: readonly HistoryRow[]): Promise<void> {
    this.#check()
    await this.#history.write(rowParts(rows), undefined)
  }

  /**
   * Inserts encoded parts with their usage counters in one transaction (history/postgres-history.ts), saving the
   * journal mark in the same transaction when given.
   */
  async writeHistoryParts (parts: readonly HistoryPart[], mark?: JournalMark): Promise<void> {
    this.#check()
    await this.#history.write(parts, mark)
  }

  /** How far a history journal is written into this store. */
  async journalPosition (journal: string): Promise<number> {
    const { rows } = await this.#query<{ position: string }>(`SELECT position FROM ${this.#s}.history_journal WHERE journal = $1`, [journal])
    return rows[0] === undefined ? 0 : Number(rows[0].position)
  }

  /** One page of a tenant's history, newest first. */
  async searchHistory (tenant: string, filters: SearchFilters, limit: number, cursor: string | null): Promise<SearchPage> {
    this.#check()
    if (typeof tenant !== 'string' || tenant === '') throw new StoreError('INVALID_REQUEST', 'tenant is required')
    const f = validateFilters(filters)
    const n = validateLimit(limit)
    const c = decodeCursor(cursor)
    // One item more than asked tells whether another page exists.
    return searchPage(await searchHistory(async (sql, params) => await this.#query(sql, params), this.#s, tenant, f, c, n + 1), n)
  }

  /**
   * EXPLAIN lines of the statements searchHistory runs first (a page of blocks or requests, then their parts),
   * planned with sequential scans, bitmap scans and sorts disabled: a plan that still contains one of them has no
   * index able to serve the query in order (tests).
   */
  async explainSearch (tenant: string, filters: SearchFilters, cursor: string | null = null): Promise<string[]> {
    this.#check()
    const f = validateFilters(filters)
    const after = decodeCursor(cursor)
    // What a block or a request points to is planned on the newest day that has partitions.
    const day = (await this.#history.partitionDays()).at(-1) ?? new Date().toISOString().slice(0, 10)
    const statements = searchStatements(this.#s, tenant, f, after, day)
    return await this.#transaction(async (c) => {
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
   * Drops the day partitions of history that ended at or before `before` (history/postgres-history.ts): a day's
   * records go once the whole day is older than the cutoff. Returns the number of records (items) dropped. Usage
   * counters are billing records with their own retention: they are not decremented.
   */
  async purgeHistory (before: Date): Promise<number> {
    this.#check()
    const ms = before instanceof Date ? before.getTime() : Number.NaN
    if (!Number.isFinite(ms)) throw new StoreError('INVALID_REQUEST', 'before must be a valid Date')
    return await this.#history.purge(new Date(ms))
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
