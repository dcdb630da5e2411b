/**
 * SQLite store (better-sqlite3): the embedded default, one file per deployment.
 *
 * better-sqlite3 is synchronous; the async methods of Store wrap synchronous ones, and writeHistorySync is exported
 * for the history worker thread, which opens its own connection to the same file (WAL lets readers and that one
 * writer proceed without blocking each other; busy_timeout makes two writers wait instead of failing).
 */
import Database from 'better-sqlite3'
import { generateKey, isKeyId, parseKey, secretMatches, validateKeyOptions } from './api-keys.ts'
import {
  columnFilter, decodeCursor, encodeCursor, MAX_INDEXED_CHARS, toRows, usageDeltas, validateFilters, validateLimit, type HistoryRow,
  type Cursor, type ValidFilters
} from './history-rows.ts'
import { StoreError } from './store-error.ts'
import { assertUtcDay } from './utc-day.ts'
import type {
  ApiKeyRecord, CreatedKey, CreateKeyOptions, HistoryRecord, SearchFilters, SearchPage, Store, UsageReport
} from './types.ts'

/** Options of SqliteStore. */
export interface SqliteStoreOptions {
  /** Database file, or ':memory:' (tests; one private database per store). */
  path: string
  /** How long a statement waits for another connection's write lock before failing, in ms. */
  busyTimeoutMs?: number
}

const kDefaultBusyTimeoutMs = 5000 // 5 s: longer than any history batch transaction
const kPurgeBatch = 5000 // rows per DELETE, so the history writer can interleave during a long purge
const kMaxKeyIdAttempts = 3 // 60-bit ids collide with negligible probability; retrying is cheaper than reasoning

// Each entry upgrades the schema by one version; never edit a released entry, append a new one.
const kMigrations: readonly string[] = [
  `
  CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    permissions TEXT NOT NULL,             -- JSON array, canonical order
    quota INTEGER,                         -- indicators per UTC day, NULL = unlimited
    secret_hash BLOB NOT NULL,             -- sha256(secret), 32 bytes
    created_at TEXT NOT NULL,              -- ISO 8601 UTC
    revoked_at TEXT
  ) STRICT;

  CREATE TABLE history (
    id INTEGER PRIMARY KEY AUTOINCREMENT,  -- AUTOINCREMENT: ids never reused after a purge, so (ts, id) stays a total order
    ts INTEGER NOT NULL,                   -- epoch ms UTC of the record's date
    tenant TEXT NOT NULL,
    request_id TEXT NOT NULL,
    bulk_request_id TEXT,
    http_status INTEGER NOT NULL,
    auth_type TEXT NOT NULL,
    apikey TEXT NOT NULL,
    user_id TEXT,
    indicator_type TEXT,
    indicator_value TEXT NOT NULL,         -- as sent
    indicator_normalized TEXT,
    doc TEXT NOT NULL                      -- the whole record as JSON
  ) STRICT;
  -- Every search is tenant-scoped and ordered by (ts, id) descending: each index starts with tenant and ends with
  -- (ts, id), so a filter is an index range read backwards with no sort, and LIMIT stops it early.
  CREATE INDEX history_tenant_date ON history (tenant, ts, id);
  CREATE INDEX history_tenant_apikey ON history (tenant, apikey, ts, id);
  -- Partial: only rows with a user (dashboard sessions) enter it, so key-authenticated ingest does not pay for it.
  CREATE INDEX history_tenant_user ON history (tenant, user_id, ts, id) WHERE user_id IS NOT NULL;
  CREATE INDEX history_tenant_itype ON history (tenant, indicator_type, ts, id);
  -- A prefix expression: one over-long value must not bloat the index (and PostgreSQL refuses entries over ~2.7 kB).
  CREATE INDEX history_tenant_ivalue ON history (tenant, substr(indicator_value, 1, ${MAX_INDEXED_CHARS}), ts, id);
  -- Serves exclude_bulk_requests: a partial index of single-call rows only, so bulk ingest does not pay for it.
  CREATE INDEX history_tenant_bulk ON history (tenant, ts, id) WHERE bulk_request_id IS NULL;
  -- Serves purge, which is not tenant-scoped.
  CREATE INDEX history_date ON history (ts);

  -- Billing counters: one row per (tenant, key, UTC day), kept when history is purged.
  CREATE TABLE usage (
    tenant TEXT NOT NULL,
    day TEXT NOT NULL,                     -- YYYY-MM-DD UTC
    key_id TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (tenant, day, key_id)
  ) STRICT, WITHOUT ROWID;
  CREATE INDEX usage_key_day ON usage (key_id, day);
  `
]

interface KeyRow {
  id: string
  tenant: string
  permissions: string
  quota: number | null
  secret_hash: Buffer
  created_at: string
  revoked_at: string | null
}

interface Statements {
  insertKey: Database.Statement
  listKeys: Database.Statement
  keyById: Database.Statement
  revokeKey: Database.Statement
  countKeys: Database.Statement
  insertHistory: Database.Statement
  upsertUsage: Database.Statement
  usageTenant: Database.Statement
  usageTenantKey: Database.Statement
  usageForKey: Database.Statement
  purge: Database.Statement
}

function toKeyRecord (row: KeyRow): ApiKeyRecord {
  return {
    id: row.id,
    tenant: row.tenant,
    permissions: JSON.parse(row.permissions) as string[],
    quota: row.quota,
    createdAt: row.created_at,
    revokedAt: row.revoked_at
  }
}

function wrap (err: unknown): StoreError {
  if (err instanceof StoreError) return err
  const code = (err as { code?: unknown } | null)?.code
  // BUSY/LOCKED/IOERR/FULL are conditions an operator can fix or that pass: report them as unavailability.
  if (typeof code === 'string' && /^SQLITE_(BUSY|LOCKED|IOERR|FULL|CANTOPEN|READONLY)/.test(code)) {
    return new StoreError('STORE_UNAVAILABLE', `SQLite store unavailable (${code})`, { cause: err })
  }
  return new StoreError('STORE_ERROR', `SQLite store error${typeof code === 'string' ? ` (${code})` : ''}`, { cause: err })
}

/** Chooses the index for a search: the most selective equality filter present (see the class comment). */
function chooseIndex (f: ValidFilters): string {
  if (f.indicatorValue !== null) return 'history_tenant_ivalue'
  if (f.userId !== null) return 'history_tenant_user'
  if (f.apikey !== null) return 'history_tenant_apikey'
  if (f.indicatorType !== null) return 'history_tenant_itype'
  if (f.excludeBulk) return 'history_tenant_bulk'
  return 'history_tenant_date'
}

function buildSearch (tenant: string, f: ValidFilters, cursor: Cursor | null, limit: number): { sql: string, params: unknown[] } {
  const where = ['tenant = ?']
  const params: unknown[] = [tenant]
  if (f.indicatorValue !== null) {
    const { full, prefix } = columnFilter(f.indicatorValue)
    where.push(`substr(indicator_value, 1, ${MAX_INDEXED_CHARS}) = ?`, 'indicator_value = ?')
    params.push(prefix, full)
  }
  if (f.userId !== null) { where.push('user_id = ?'); params.push(f.userId) }
  if (f.apikey !== null) { where.push('apikey = ?'); params.push(f.apikey) }
  if (f.indicatorType !== null) { where.push('indicator_type = ?'); params.push(f.indicatorType) }
  if (f.excludeBulk) where.push('bulk_request_id IS NULL')
  if (f.authType !== null) { where.push('auth_type = ?'); params.push(f.authType) }
  if (f.gteMs !== null) { where.push('ts >= ?'); params.push(f.gteMs) }
  if (f.ltMs !== null) { where.push('ts < ?'); params.push(f.ltMs) }
  if (cursor !== null) { where.push('(ts, id) < (?, ?)'); params.push(cursor.ts, cursor.id) }
  params.push(limit)
  const sql = `SELECT id, ts, doc FROM history INDEXED BY ${chooseIndex(f)} WHERE ${where.join(' AND ')} ` +
    'ORDER BY ts DESC, id DESC LIMIT ?'
  return { sql, params }
}

/**
 * Store on one SQLite file. Searches name their index (INDEXED BY) instead of trusting the planner: without
 * ANALYZE statistics SQLite may prefer the tenant-date range over a far more selective key or value filter, and a
 * deterministic plan is what the EXPLAIN tests check. The priority is indicator_value > user_id > apikey >
 * indicator_type > exclude_bulk_requests > date only; every index ends with (ts, id), so a date range narrows each one.
 */
export class SqliteStore implements Store {
  readonly #db: Database.Database
  #stmts: Statements | null = null
  readonly #searchCache = new Map<string, Database.Statement>()
  #closed = false

  constructor (options: SqliteStoreOptions) {
    if (options === null || typeof options !== 'object' || typeof options.path !== 'string' || options.path === '') {
      throw new StoreError('INVALID_OPTIONS', 'SqliteStore needs a path (a file or :memory:)')
    }
    try {
      this.#db = new Database(options.path)
      if (options.path !== ':memory:') this.#db.pragma('journal_mode = WAL')
      this.#db.pragma(`busy_timeout = ${Math.trunc(options.busyTimeoutMs ?? kDefaultBusyTimeoutMs)}`)
      this.#db.pragma('foreign_keys = ON')
      // WAL + NORMAL: a commit is atomic and never corrupts the file; only a power loss may roll back the last
      // commits (the history spool is fsynced separately). 32 MiB of page cache keeps the indexes' hot pages in memory.
      this.#db.pragma('synchronous = NORMAL')
      this.#db.pragma('cache_size = -32768')
    } catch (err) {
      throw wrap(err)
    }
  }

  #open (): Database.Database {
    if (this.#closed) throw new StoreError('STORE_CLOSED', 'the store is closed')
    return this.#db
  }

  // Prepared on first use: the tables must exist, which migrate() guarantees.
  #statements (): Statements {
    const db = this.#open()
    if (this.#stmts !== null) return this.#stmts
    try {
      this.#stmts = {
        insertKey: db.prepare('INSERT INTO api_keys (id, tenant, permissions, quota, secret_hash, created_at) VALUES (?, ?, ?, ?, ?, ?)'),
        listKeys: db.prepare('SELECT * FROM api_keys ORDER BY created_at, id'),
        keyById: db.prepare('SELECT * FROM api_keys WHERE id = ?'),
        revokeKey: db.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL'),
        countKeys: db.prepare('SELECT count(*) AS n FROM api_keys').pluck(),
        insertHistory: db.prepare(
          'INSERT INTO history (ts, tenant, request_id, bulk_request_id, http_status, auth_type, apikey, user_id, ' +
          'indicator_type, indicator_value, indicator_normalized, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)'),
        upsertUsage: db.prepare(
          'INSERT INTO usage (tenant, day, key_id, count) VALUES (?, ?, ?, ?) ' +
          'ON CONFLICT (tenant, day, key_id) DO UPDATE SET count = count + excluded.count'),
        usageTenant: db.prepare('SELECT key_id, count FROM usage WHERE tenant = ? AND day = ? ORDER BY key_id'),
        usageTenantKey: db.prepare('SELECT key_id, count FROM usage WHERE tenant = ? AND day = ? AND key_id = ?'),
        usageForKey: db.prepare('SELECT coalesce(sum(count), 0) FROM usage WHERE key_id = ? AND day = ?').pluck(),
        purge: db.prepare(`DELETE FROM history WHERE id IN (SELECT id FROM history WHERE ts < ? LIMIT ${kPurgeBatch})`)
      }
    } catch (err) {
      throw wrap(err)
    }
    return this.#stmts
  }

  /** Synchronous migrate, for a worker thread that opens its own connection. */
  migrateSync (): void {
    const db = this.#open()
    try {
      db.exec('CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)')
      // IMMEDIATE takes the write lock before reading the version, so two processes starting together
      // cannot both apply the same migration.
      db.transaction(() => {
        const current = (db.prepare('SELECT max(version) FROM schema_version').pluck().get() as number | null) ?? 0
        for (let v = current; v < kMigrations.length; v++) {
          db.exec(kMigrations[v] as string)
          db.prepare('INSERT INTO schema_version (version) VALUES (?)').run(v + 1)
        }
      }).immediate()
    } catch (err) {
      throw wrap(err)
    }
  }

  /**
   * Synchronous writeHistory, for the history worker thread: one IMMEDIATE transaction inserts every row and adds
   * the same rows to the usage counters, so counters always equal rows written (before any purge).
   */
  writeHistorySync (records: readonly HistoryRecord[]): void {
    this.writeHistoryRowsSync(toRows(records)) // validates everything before the transaction starts
  }

  /** Synchronous writeHistoryRows: one IMMEDIATE transaction for the rows and their usage counters. */
  writeHistoryRowsSync (rows: readonly HistoryRow[]): void {
    const s = this.#statements()
    if (rows.length === 0) return
    const deltas = usageDeltas(rows)
    try {
      this.#db.transaction(() => {
        for (const r of rows) {
          s.insertHistory.run(r.ts, r.tenant, r.requestId, r.bulkRequestId, r.httpStatus, r.authType, r.apikey,
            r.userId, r.indicatorType, r.indicatorValue, r.indicatorNormalized, r.doc)
        }
        for (const d of deltas) s.upsertUsage.run(d.tenant, d.day, d.keyId, d.count)
      }).immediate()
    } catch (err) {
      throw wrap(err)
    }
  }

  /** Creates or upgrades the schema. */
  async migrate (): Promise<void> {
    this.migrateSync()
  }

  /** Creates a key and returns the only copy of its secret. */
  async createKey (options: CreateKeyOptions): Promise<CreatedKey> {
    const valid = validateKeyOptions(options)
    const s = this.#statements()
    const createdAt = new Date().toISOString()
    for (let attempt = 1; ; attempt++) {
      const { id, key, secretHash } = generateKey()
      try {
        s.insertKey.run(id, valid.tenant, JSON.stringify(valid.permissions), valid.quota, secretHash, createdAt)
        return { key, record: { id, tenant: valid.tenant, permissions: valid.permissions, quota: valid.quota, createdAt, revokedAt: null } }
      } catch (err) {
        const code = (err as { code?: unknown }).code
        if (code !== 'SQLITE_CONSTRAINT_PRIMARYKEY' || attempt >= kMaxKeyIdAttempts) throw wrap(err)
      }
    }
  }

  /** Every key, oldest first, without secrets. */
  async listKeys (): Promise<ApiKeyRecord[]> {
    const s = this.#statements()
    try {
      return (s.listKeys.all() as KeyRow[]).map(toKeyRecord)
    } catch (err) {
      throw wrap(err)
    }
  }

  /** Revokes an active key; false for an unknown or already revoked id. */
  async revokeKey (id: string): Promise<boolean> {
    const s = this.#statements()
    if (!isKeyId(id)) return false
    try {
      return s.revokeKey.run(new Date().toISOString(), id).changes === 1
    } catch (err) {
      throw wrap(err)
    }
  }

  /** The active key matching `presented`, or null. */
  async verifyKey (presented: string): Promise<ApiKeyRecord | null> {
    const s = this.#statements()
    const parsed = parseKey(presented)
    // The key format is public, so rejecting a malformed string early reveals nothing about stored keys.
    if (parsed === null) return null
    let row: KeyRow | undefined
    try {
      row = s.keyById.get(parsed.id) as KeyRow | undefined
    } catch (err) {
      throw wrap(err)
    }
    const ok = secretMatches(row?.secret_hash ?? null, parsed.secret)
    if (!ok || row === undefined || row.revoked_at !== null) return null
    return toKeyRecord(row)
  }

  /** Number of keys ever created, revoked ones included. */
  async countKeys (): Promise<number> {
    const s = this.#statements()
    try {
      return s.countKeys.get() as number
    } catch (err) {
      throw wrap(err)
    }
  }

  /** Inserts records and counts them, in one transaction. */
  async writeHistory (records: HistoryRecord[]): Promise<void> {
    this.writeHistorySync(records)
  }

  /** Inserts rows the service built itself, with their usage counters, in one transaction. */
  async writeHistoryRows (rows: readonly HistoryRow[]): Promise<void> {
    this.writeHistoryRowsSync(rows)
  }

  #search (tenant: string, filters: SearchFilters, limit: number, cursor: string | null): { stmt: Database.Statement, params: unknown[] } {
    this.#statements()
    if (typeof tenant !== 'string' || tenant === '') throw new StoreError('INVALID_REQUEST', 'tenant is required')
    const f = validateFilters(filters)
    const n = validateLimit(limit)
    const c = decodeCursor(cursor)
    // One row more than asked tells whether another page exists, so the last page has next_cursor null.
    const { sql, params } = buildSearch(tenant, f, c, n + 1)
    let stmt = this.#searchCache.get(sql)
    if (stmt === undefined) {
      try {
        stmt = this.#db.prepare(sql)
      } catch (err) {
        throw wrap(err)
      }
      this.#searchCache.set(sql, stmt) // bounded: one statement per combination of filters present
    }
    return { stmt, params }
  }

  /** One page of a tenant's history, newest first. */
  async searchHistory (tenant: string, filters: SearchFilters, limit: number, cursor: string | null): Promise<SearchPage> {
    const { stmt, params } = this.#search(tenant, filters, limit, cursor)
    let rows: Array<{ id: number, ts: number, doc: string }>
    try {
      rows = stmt.all(...params) as Array<{ id: number, ts: number, doc: string }>
    } catch (err) {
      throw wrap(err)
    }
    const more = rows.length > limit
    if (more) rows.pop()
    const last = rows[rows.length - 1]
    return {
      results: rows.map((r) => JSON.parse(r.doc) as HistoryRecord),
      next_cursor: more && last !== undefined ? encodeCursor(new Date(last.ts).toISOString(), last.id) : null
    }
  }

  /** EXPLAIN QUERY PLAN lines of the query searchHistory would run (diagnostics and tests). */
  async explainSearch (tenant: string, filters: SearchFilters, cursor: string | null = null): Promise<string[]> {
    const { stmt, params } = this.#search(tenant, filters, 10, cursor)
    try {
      const plan = this.#db.prepare(`EXPLAIN QUERY PLAN ${stmt.source}`).all(...params) as Array<{ detail: string }>
      return plan.map((p) => p.detail)
    } catch (err) {
      throw wrap(err)
    }
  }

  /** Usage counters of a tenant, or of one of its keys, on one UTC day. */
  async usage (tenant: string, keyId: string | null, day: string): Promise<UsageReport> {
    const s = this.#statements()
    assertUtcDay(day)
    let rows: Array<{ key_id: string, count: number }>
    try {
      rows = (keyId === null ? s.usageTenant.all(tenant, day) : s.usageTenantKey.all(tenant, day, keyId)) as Array<{ key_id: string, count: number }>
    } catch (err) {
      throw wrap(err)
    }
    const keys = rows.map((r) => ({ apikey: r.key_id, count: r.count }))
    return { tenant, day, keys, total: keys.reduce((sum, k) => sum + k.count, 0) }
  }

  /** Counter of one key on one UTC day. */
  async usageForKey (keyId: string, day: string): Promise<number> {
    const s = this.#statements()
    assertUtcDay(day)
    try {
      return s.usageForKey.get(keyId, day) as number
    } catch (err) {
      throw wrap(err)
    }
  }

  /**
   * Deletes history older than `before` in batches (each its own transaction, so writers interleave).
   * Usage counters are billing records with their own retention: they are not decremented.
   */
  async purgeHistory (before: Date): Promise<number> {
    const s = this.#statements()
    const ms = before instanceof Date ? before.getTime() : Number.NaN
    if (!Number.isFinite(ms)) throw new StoreError('INVALID_REQUEST', 'before must be a valid Date')
    let total = 0
    try {
      for (;;) {
        const n = s.purge.run(ms).changes
        total += n
        if (n < kPurgeBatch) return total
        await new Promise<void>((resolve) => setImmediate(resolve)) // let queued work run between batches
      }
    } catch (err) {
      throw wrap(err)
    }
  }

  /** Throws when the database cannot answer. */
  async ping (): Promise<void> {
    const db = this.#open()
    try {
      db.prepare('SELECT 1').get()
    } catch (err) {
      throw wrap(err)
    }
  }

  /** Closes the connection; idempotent. */
  async close (): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    this.#searchCache.clear()
    this.#stmts = null
    this.#db.close()
  }
}
