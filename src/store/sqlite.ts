/**
 * SQLite store (better-sqlite3): the embedded default, one file per deployment.
 *
 * better-sqlite3 is synchronous; the async methods of Store wrap synchronous ones, and writeHistorySync is exported
 * for the history worker thread, which opens its own connection to the same file (WAL lets readers and that one
 * writer proceed without blocking each other; busy_timeout makes two writers wait instead of failing).
 */
import Database from 'better-sqlite3'
import { Accounts } from './accounts.ts'
import { expired, generateKey, isKeyId, newKeyRecord, parseKey, secretMatches, validateKeyOptions } from './api-keys.ts'
import type { HistoryPart } from '../history/block.ts'
import { readsBlocks, rowParts, searchPage, type FoundItem } from '../history/blocks.ts'
import {
  continuationUid, decodeCursor, toRows, usageDeltas, validateFilters, validateLimit, type HistoryRow
} from '../history/rows.ts'
import {
  BlockWriter, blockScanSql, kBlockStatementSql, prepareBlockWriter, requestWalkSql, scanBlocks, walkRequests,
  type BlockStatements, type BlockWriterStatements
} from '../history/sqlite-search.ts'
import { StoreError } from '../errors.ts'
import { kSqliteMigrations, type SqliteMigration } from './migrations/sqlite/index.ts'
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

/** Options of SqliteStore. */
export interface SqliteStoreOptions {
  /** Database file, or ':memory:' (tests; one private database per store). */
  path: string
  /** How long a statement waits for another connection's write lock before failing, in ms. */
  busyTimeoutMs?: number
}

const kDefaultBusyTimeoutMs = 5000 // 5 s: longer than any history batch transaction
const kPurgeBatch = 1000 // requests (and blocks) per purge transaction, so the history writer can interleave during a long purge
const kMaxKeyIdAttempts = 3 // 60-bit ids collide with negligible probability; retrying is cheaper than reasoning

interface AllowRow { id: string, tenant: string, kind: string, value: string, reason: string, created_by: string, created_at: string, expires_at: string | null }

function toAllowEntry (r: AllowRow): AllowEntry {
  return { id: r.id, tenant: r.tenant, kind: r.kind, value: r.value, reason: r.reason, createdBy: r.created_by, createdAt: r.created_at, expiresAt: r.expires_at }
}

type FeedbackRow = SharedFeedbackRow<string, string>

function toFeedbackEntry (r: FeedbackRow): FeedbackEntry {
  return feedbackEntryOf(r, JSON.parse(r.signal_ids) as string[], r.created_at)
}

interface KeyRow {
  id: string
  tenant: string
  permissions: string
  quota: number | null
  secret_hash: Buffer
  created_at: string
  revoked_at: string | null
  rate_limit: number | null
  expires_at: string | null
  allowed_cidrs: string | null
  last_used_at: string | null
}

interface Statements extends BlockStatements, BlockWriterStatements {
  insertKey: Database.Statement
  listKeys: Database.Statement
  keyById: Database.Statement
  revokeKey: Database.Statement
  touchKey: Database.Statement
  countKeys: Database.Statement
  nextItemId: Database.Statement
  insertNewRequest: Database.Statement
  requestByUid: Database.Statement
  extendRequest: Database.Statement
  insertRequest: Database.Statement
  upsertUsage: Database.Statement
  setJournal: Database.Statement
  journalPosition: Database.Statement
  usageTenant: Database.Statement
  usageTenantKey: Database.Statement
  usageForKey: Database.Statement
  purgeRequests: Database.Statement
  purgeRequest: Database.Statement
  purgeParts: Database.Statement
  purgeBlocks: Database.Statement
}

const kRequestInsert = 'INSERT INTO history_requests (uid, ts, tenant, request_id, bulk_request_id, http_status, auth_type, apikey, ' +
  'user_id, envelope, first_item, last_item) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)'

function toKeyRecord (row: KeyRow): ApiKeyRecord {
  return {
    id: row.id,
    tenant: row.tenant,
    permissions: JSON.parse(row.permissions) as string[],
    quota: row.quota,
    createdAt: row.created_at,
    revokedAt: row.revoked_at,
    rateLimit: row.rate_limit,
    expiresAt: row.expires_at,
    allowedCidrs: row.allowed_cidrs === null ? null : JSON.parse(row.allowed_cidrs) as string[],
    lastUsedAt: row.last_used_at
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

/**
 * Store on one SQLite file. Searches name their index (INDEXED BY) instead of trusting the planner: without ANALYZE
 * statistics SQLite may prefer the tenant-date range over a far more selective key filter, and a deterministic plan
 * is what the EXPLAIN tests check (see src/history/sqlite-search.ts: scanBlocks, walkRequests).
 */
export class SqliteStore implements Store {
  readonly #db: Database.Database
  #stmts: Statements | null = null
  readonly #searchCache = new Map<string, Database.Statement>()
  #closed = false
  /** Dashboard users and sessions, over this store's connection. */
  readonly accounts: Accounts = new Accounts({
    run: async (sql, params) => this.#accountsStatement(sql).run(...params).changes,
    all: async <T>(sql: string, params: unknown[]) => this.#accountsStatement(sql).all(...params) as T[]
  })

  readonly #accountsStatements = new Map<string, Database.Statement>()

  /** A prepared statement of accounts.ts's SQL (a handful, prepared once each). */
  #accountsStatement (sql: string): Database.Statement {
    let st = this.#accountsStatements.get(sql)
    if (st === undefined) {
      st = this.#open().prepare(sql.replace(/\{(users|sessions|sign_in_failures)\}/g, '$1'))
      this.#accountsStatements.set(sql, st)
    }
    return st
  }

  constructor (options: SqliteStoreOptions) {
    if (options === null || typeof options !== 'object' || typeof options.path !== 'string' || options.path === '') {
      throw new StoreError('INVALID_OPTIONS', 'SqliteStore needs a path (a file or :memory:)')
    }
    let db: Database.Database | null = null
    try {
      db = new Database(options.path)
      this.#db = db
      // Only takes effect on a new, empty file (before WAL is set): 16 history items per page instead of 8, and
      // index pages that hold twice the entries. Measured ~7% cheaper history ingest than 4 KiB pages.
      this.#db.pragma('page_size = 8192')
      if (options.path !== ':memory:') this.#db.pragma('journal_mode = WAL')
      this.#db.pragma(`busy_timeout = ${Math.trunc(options.busyTimeoutMs ?? kDefaultBusyTimeoutMs)}`)
      this.#db.pragma('foreign_keys = ON')
      // WAL + NORMAL: a commit is atomic and never corrupts the file; only a power loss may roll back the last
      // commits (the history journal is fsynced separately). 32 MiB of page cache keeps the indexes' hot pages in memory.
      this.#db.pragma('synchronous = NORMAL')
      this.#db.pragma('cache_size = -32768')
      // A history batch writes several MiB: with the default 1000-page threshold every batch commit ran a
      // checkpoint (two fsyncs, and the batch's pages written a second time). ~40 MiB of WAL between checkpoints
      // writes a hot index page back once for several batches; the file is cut back to 64 MiB after a checkpoint.
      this.#db.pragma('wal_autocheckpoint = 5000')
      this.#db.pragma('journal_size_limit = 67108864')
    } catch (err) {
      // A file that is not a database opens and fails at the first pragma: the handle is closed here, not left to
      // better-sqlite3's cleanup when the thread ends.
      db?.close()
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
        insertKey: db.prepare('INSERT INTO api_keys (id, tenant, permissions, quota, secret_hash, created_at, rate_limit, expires_at, allowed_cidrs) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)'),
        listKeys: db.prepare('SELECT * FROM api_keys ORDER BY created_at, id'),
        keyById: db.prepare('SELECT * FROM api_keys WHERE id = ?'),
        revokeKey: db.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL'),
        touchKey: db.prepare('UPDATE api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)'),
        countKeys: db.prepare('SELECT count(*) AS n FROM api_keys').pluck(),
        // The next item id: one above the highest part's last item. It can only reuse ids of parts purged from the
        // top, with their requests; ids still increase with insertion among what exists.
        nextItemId: db.prepare('SELECT coalesce((SELECT id + n FROM history_parts ORDER BY id DESC LIMIT 1), 1)').pluck(),
        // Inserts nothing when the uid exists (the run continues a request of an earlier batch, or is a replay).
        // Not an UPSERT ... RETURNING: measured several µs slower per request, which single calls pay per indicator.
        insertNewRequest: db.prepare(`${kRequestInsert} ON CONFLICT (uid) DO NOTHING`),
        requestByUid: db.prepare('SELECT id, last_item FROM history_requests WHERE uid = ?'),
        extendRequest: db.prepare('UPDATE history_requests SET last_item = ? WHERE id = ?'),
        insertRequest: db.prepare(kRequestInsert),
        ...prepareBlockWriter(db),
        upsertUsage: db.prepare(
          'INSERT INTO usage (tenant, day, key_id, count) VALUES (?, ?, ?, ?) ' +
          'ON CONFLICT (tenant, day, key_id) DO UPDATE SET count = count + excluded.count'),
        requestById: db.prepare(kBlockStatementSql.requestById),
        blockParts: db.prepare(kBlockStatementSql.blockParts),
        partAt: db.prepare(kBlockStatementSql.partAt),
        setJournal: db.prepare('INSERT INTO history_journal (journal, position) VALUES (?, ?) ' +
          'ON CONFLICT (journal) DO UPDATE SET position = excluded.position'),
        journalPosition: db.prepare('SELECT position FROM history_journal WHERE journal = ?').pluck(),
        usageTenant: db.prepare('SELECT key_id, count FROM usage WHERE tenant = ? AND day = ? ORDER BY key_id'),
        usageTenantKey: db.prepare('SELECT key_id, count FROM usage WHERE tenant = ? AND day = ? AND key_id = ?'),
        usageForKey: db.prepare('SELECT coalesce(sum(count), 0) FROM usage WHERE key_id = ? AND day = ?').pluck(),
        purgeRequests: db.prepare('SELECT id, first_item, last_item FROM history_requests INDEXED BY history_requests_date ' +
          `WHERE ts < ? LIMIT ${kPurgeBatch}`),
        purgeRequest: db.prepare('DELETE FROM history_requests WHERE id = ?'),
        purgeParts: db.prepare('DELETE FROM history_parts WHERE id >= ? AND id <= ?'),
        purgeBlocks: db.prepare('DELETE FROM history_blocks WHERE id IN (SELECT id FROM history_blocks INDEXED BY history_blocks_date ' +
          `WHERE max_ts < ? LIMIT ${kPurgeBatch})`)
      }
    } catch (err) {
      throw wrap(err)
    }
    return this.#stmts
  }

  /** Synchronous migrate, for a worker thread that opens its own connection; `version` stops earlier (tests). */
  migrateSync (version = kSqliteMigrations.length): void {
    const db = this.#open()
    try {
      db.exec('CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)')
      // IMMEDIATE takes the write lock before reading the version, so two processes starting together
      // cannot both apply the same migration.
      db.transaction(() => {
        const current = (db.prepare('SELECT max(version) FROM schema_version').pluck().get() as number | null) ?? 0
        for (let v = current; v < Math.min(version, kSqliteMigrations.length); v++) {
          const step = kSqliteMigrations[v] as SqliteMigration
          if (typeof step === 'string') db.exec(step)
          else step(db)
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

  /** Synchronous writeHistoryRows: the rows are encoded into parts (one per request run) and written as such. */
  writeHistoryRowsSync (rows: readonly HistoryRow[]): void {
    if (rows.length === 0) return
    this.writeHistoryPartsSync(rowParts(rows))
  }

  /**
   * Synchronous writeHistoryParts: one IMMEDIATE transaction for the parts and their usage counters. Parts get
   * consecutive item ids in order and join their tenant's open block; each run of parts with one uid becomes (or
   * extends) one request row.
   */
  writeHistoryPartsSync (parts: readonly HistoryPart[], mark?: JournalMark): void {
    const s = this.#statements()
    const todo = parts.filter((p) => p.count > 0)
    if (todo.length === 0 && mark === undefined) return
    const deltas = usageDeltas(todo)
    try {
      this.#db.transaction(() => {
        if (mark !== undefined) s.setJournal.run(mark.journal, mark.position)
        if (todo.length === 0) return
        // The write lock is held: no other connection can take ids until the commit.
        let next = s.nextItemId.get() as number
        const blocks = new BlockWriter(s)
        /** uids whose run ended earlier in this batch: meeting one again files the run as a request of its own. */
        const ended = new Set<string>()
        let run: { uid: string, req: number, last: number, stored: number } | null = null
        const endRun = (): void => {
          if (run === null) return
          if (run.last !== run.stored) s.extendRequest.run(run.last, run.req)
          ended.add(run.uid)
          run = null
        }
        for (const p of todo) {
          const first = next
          const last = next + p.count - 1
          if (run !== null && run.uid === p.uid) {
            run.last = last
          } else {
            endRun()
            run = this.#startRun(s, p, first, last, ended.has(p.uid))
          }
          blocks.add(p.tenant, first, p.count, run.req, p.ts, p.part)
          next = last + 1
        }
        endRun()
        blocks.finish()
        for (const d of deltas) s.upsertUsage.run(d.tenant, d.day, d.keyId, d.count)
      }).immediate()
    } catch (err) {
      throw wrap(err)
    }
  }

  /**
   * The request row of a run of items [first, last]: a new row, or the row of its uid when the run follows that
   * row's items directly (the writer cut the request across two batches); any other continuation, or a uid met
   * again in the same batch, gets a row of its own (continuationUid).
   */
  #startRun (s: Statements, p: HistoryPart, first: number, last: number, seen: boolean): { uid: string, req: number, last: number, stored: number } {
    const cols = [p.ts, p.tenant, p.requestId, p.bulkRequestId, p.httpStatus, p.authType, p.apikey, p.userId, p.envelope, first, last]
    if (!seen) {
      const inserted = s.insertNewRequest.run(p.uid, ...cols)
      if (inserted.changes === 1) return { uid: p.uid, req: Number(inserted.lastInsertRowid), last, stored: last }
      const prior = s.requestByUid.get(p.uid) as { id: number, last_item: number } | undefined
      if (prior !== undefined && prior.last_item === first - 1) return { uid: p.uid, req: prior.id, last, stored: first - 1 }
    }
    const req = Number(s.insertRequest.run(continuationUid(p.uid, first), ...cols).lastInsertRowid)
    return { uid: p.uid, req, last, stored: last }
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
        s.insertKey.run(id, valid.tenant, JSON.stringify(valid.permissions), valid.quota, secretHash, createdAt, valid.rateLimit, valid.expiresAt,
          valid.allowedCidrs === null ? null : JSON.stringify(valid.allowedCidrs))
        return { key, record: newKeyRecord(id, valid, createdAt) }
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

  /** Records a successful use of a key (never moves last_used_at back). */
  async touchKey (id: string, at: string): Promise<void> {
    const s = this.#statements()
    try {
      s.touchKey.run(at, id, at)
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
    if (!ok || row === undefined || row.revoked_at !== null || expired(row.expires_at)) return null
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

  async addAllowEntry (entry: NewAllowEntry): Promise<AllowEntry> {
    const db = this.#open()
    const now = Date.now()
    const row: AllowRow = {
      id: kAllowIds.next(now),
      tenant: entry.tenant,
      kind: entry.kind,
      value: entry.value,
      reason: entry.reason,
      created_by: entry.createdBy,
      created_at: new Date(now).toISOString(),
      expires_at: entry.expiresAt
    }
    try {
      db.prepare('INSERT INTO allowlist (id, tenant, kind, value, reason, created_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)')
        .run(row.id, row.tenant, row.kind, row.value, row.reason, row.created_by, row.created_at, row.expires_at)
    } catch (err) {
      throw wrap(err)
    }
    return toAllowEntry(row)
  }

  async listAllowEntries (tenant: string, limit: number, cursor: string | null): Promise<AllowPage> {
    const db = this.#open()
    const after = cursor === null ? '' : kAllowIds.afterCursor(cursor)
    let rows: AllowRow[]
    try {
      rows = db.prepare('SELECT * FROM allowlist WHERE tenant = ? AND id > ? ORDER BY id LIMIT ?').all(tenant, after, limit + 1) as AllowRow[]
    } catch (err) {
      throw wrap(err)
    }
    const more = rows.length > limit
    const entries = rows.slice(0, limit).map(toAllowEntry)
    return { entries, nextCursor: more ? kAllowIds.cursorOf(entries[entries.length - 1]!.id) : null }
  }

  async deleteAllowEntry (tenant: string, id: string): Promise<boolean> {
    const db = this.#open()
    try {
      return db.prepare('DELETE FROM allowlist WHERE tenant = ? AND id = ?').run(tenant, id).changes > 0
    } catch (err) {
      throw wrap(err)
    }
  }

  async addFeedback (entry: NewFeedback): Promise<FeedbackEntry> {
    const db = this.#open()
    const now = Date.now()
    const stored: FeedbackEntry = { ...entry, signalIds: [...new Set(entry.signalIds)], id: kFeedbackIds.next(now), createdAt: new Date(now).toISOString() }
    try {
      db.transaction(() => {
        db.prepare('INSERT INTO feedback (id, tenant, verdict, indicator_type, indicator_value, indicator_normalized, note, score, category, ' +
          'signal_ids, engine_version, data_timestamp, created_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)')
          .run(stored.id, stored.tenant, stored.verdict, stored.indicatorType, stored.indicatorValue, stored.indicatorNormalized, stored.note,
            stored.score, stored.category, JSON.stringify(stored.signalIds), stored.engineVersion, stored.dataTimestamp, stored.createdBy, stored.createdAt)
        const signal = db.prepare('INSERT INTO feedback_signals (tenant, signal_id, feedback_id, verdict, created_at) VALUES (?, ?, ?, ?, ?)')
        for (const id of stored.signalIds) signal.run(stored.tenant, id, stored.id, stored.verdict, stored.createdAt)
      }).immediate()
    } catch (err) {
      throw wrap(err)
    }
    return stored
  }

  async listFeedback (tenant: string, filters: FeedbackFilters, limit: number, cursor: string | null): Promise<FeedbackPage> {
    const db = this.#open()
    const f = validateFeedbackFilters(filters)
    const n = validateFeedbackLimit(limit)
    const where = ['f.tenant = ?']
    const params: unknown[] = [tenant]
    if (cursor !== null) {
      where.push('f.id < ?')
      params.push(kFeedbackIds.afterCursor(cursor))
    }
    if (f.verdict !== null) { where.push('f.verdict = ?'); params.push(f.verdict) }
    if (f.indicator !== null) { where.push('f.indicator_normalized = ?'); params.push(f.indicator) }
    if (f.createdBy !== null) { where.push('f.created_by = ?'); params.push(f.createdBy) }
    if (f.since !== null) { where.push('f.created_at >= ?'); params.push(f.since) }
    if (f.until !== null) { where.push('f.created_at < ?'); params.push(f.until) }
    if (f.signalId !== null) {
      where.push('EXISTS (SELECT 1 FROM feedback_signals s WHERE s.tenant = f.tenant AND s.signal_id = ? AND s.feedback_id = f.id)')
      params.push(f.signalId)
    }
    let rows: FeedbackRow[]
    try {
      rows = db.prepare(`SELECT f.* FROM feedback f WHERE ${where.join(' AND ')} ORDER BY f.id DESC LIMIT ?`).all(...params, n + 1) as FeedbackRow[]
    } catch (err) {
      throw wrap(err)
    }
    const more = rows.length > n
    const entries = rows.slice(0, n).map(toFeedbackEntry)
    return { entries, nextCursor: more ? kFeedbackIds.cursorOf(entries[entries.length - 1]!.id) : null }
  }

  async feedbackSummary (tenant: string, filters: FeedbackSummaryFilters): Promise<FeedbackSummary> {
    const db = this.#open()
    const f = validateSummaryFilters(filters)
    const range: string[] = []
    const params: unknown[] = [tenant]
    if (f.since !== null) { range.push('AND created_at >= ?'); params.push(f.since) }
    if (f.until !== null) { range.push('AND created_at < ?'); params.push(f.until) }
    try {
      return db.transaction(() => {
        const totals = db.prepare(`SELECT verdict, count(*) AS n FROM feedback WHERE tenant = ? ${range.join(' ')} GROUP BY verdict`)
          .all(...params) as Array<{ verdict: string, n: number }>
        const signals = db.prepare('SELECT signal_id, sum(verdict = \'false_positive\') AS fp, sum(verdict = \'true_positive\') AS tp ' +
          `FROM feedback_signals WHERE tenant = ? ${range.join(' ')} GROUP BY signal_id ORDER BY fp DESC, signal_id LIMIT ${kMaxSummarySignals}`)
          .all(...params) as Array<{ signal_id: string, fp: number, tp: number }>
        return {
          ...f,
          falsePositive: totals.find((t) => t.verdict === 'false_positive')?.n ?? 0,
          truePositive: totals.find((t) => t.verdict === 'true_positive')?.n ?? 0,
          signals: signals.map((r) => ({ signalId: r.signal_id, falsePositive: r.fp, truePositive: r.tp }))
        }
      })()
    } catch (err) {
      throw wrap(err)
    }
  }

  async deleteFeedback (tenant: string, id: string, onlyBy: string | null): Promise<FeedbackDeletion> {
    const db = this.#open()
    if (!kFeedbackIds.valid(id)) return 'missing'
    try {
      return db.transaction((): FeedbackDeletion => {
        const row = db.prepare('SELECT created_by FROM feedback WHERE tenant = ? AND id = ?').get(tenant, id) as { created_by: string } | undefined
        if (row === undefined) return 'missing'
        if (onlyBy !== null && row.created_by !== onlyBy) return 'not_owner'
        db.prepare('DELETE FROM feedback_signals WHERE feedback_id = ? AND tenant = ?').run(id, tenant)
        db.prepare('DELETE FROM feedback WHERE tenant = ? AND id = ?').run(tenant, id)
        return 'deleted'
      }).immediate()
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

  /** Inserts encoded parts with their usage counters, in one transaction. */
  async writeHistoryParts (parts: readonly HistoryPart[], mark?: JournalMark): Promise<void> {
    this.writeHistoryPartsSync(parts, mark)
  }

  /** How far a history journal is written into this store. */
  async journalPosition (journal: string): Promise<number> {
    try {
      return (this.#statements().journalPosition.get(journal) as number | undefined) ?? 0
    } catch (err) {
      throw wrap(err)
    }
  }

  #prepared (sql: string): Database.Statement {
    let stmt = this.#searchCache.get(sql)
    if (stmt === undefined) {
      try {
        stmt = this.#db.prepare(sql)
      } catch (err) {
        throw wrap(err)
      }
      this.#searchCache.set(sql, stmt) // bounded: one statement per combination of filters present
    }
    return stmt
  }

  /** One page of a tenant's history, newest first. */
  async searchHistory (tenant: string, filters: SearchFilters, limit: number, cursor: string | null): Promise<SearchPage> {
    const s = this.#statements()
    if (typeof tenant !== 'string' || tenant === '') throw new StoreError('INVALID_REQUEST', 'tenant is required')
    const f = validateFilters(filters)
    const n = validateLimit(limit)
    const c = decodeCursor(cursor)
    let rows: FoundItem[]
    try {
      // One row more than asked tells whether another page exists, so the last page has next_cursor null. One read
      // transaction: the search runs several statements, and they all see the same snapshot (the writer's connection
      // may append to an open block in between).
      rows = this.#db.transaction(() => readsBlocks(f)
        ? scanBlocks(this.#prepared(blockScanSql(f.indicatorType !== null)), s, tenant, f, c, n + 1)
        : walkRequests(this.#prepared(requestWalkSql(f)), s, tenant, f, c, n + 1))()
    } catch (err) {
      throw wrap(err)
    }
    return searchPage(rows, n)
  }

  /**
   * EXPLAIN QUERY PLAN lines of the statements searchHistory would run (diagnostics and tests): the tenant's blocks
   * or requests newest first, then what each of them reads by primary key.
   */
  async explainSearch (tenant: string, filters: SearchFilters, cursor: string | null = null): Promise<string[]> {
    this.#statements()
    const f = validateFilters(filters)
    decodeCursor(cursor)
    const statements = readsBlocks(f)
      ? [blockScanSql(f.indicatorType !== null), kBlockStatementSql.blockParts, kBlockStatementSql.requestById]
      : [requestWalkSql(f), kBlockStatementSql.partAt]
    // Plans do not depend on parameter values here: bind placeholders of the right count.
    const plan = (sql: string): string[] => {
      const params = new Array((sql.match(/\?/g) ?? []).length).fill(0)
      params[0] = tenant
      return (this.#db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as Array<{ detail: string }>).map((p) => p.detail)
    }
    try {
      return statements.flatMap(plan)
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
   * Deletes history older than `before`: requests dated before it with their parts, kPurgeBatch requests per
   * transaction so writers interleave, then the blocks whose newest item is older. Returns the number of items
   * (records) deleted. A block that keeps newer parts keeps its filter bits for the deleted ones: a search only reads
   * the block's parts in vain. Usage counters are billing records with their own retention: they are not decremented.
   */
  async purgeHistory (before: Date): Promise<number> {
    const s = this.#statements()
    const ms = before instanceof Date ? before.getTime() : Number.NaN
    if (!Number.isFinite(ms)) throw new StoreError('INVALID_REQUEST', 'before must be a valid Date')
    let total = 0
    // Selected inside the transaction: a writer extending one of these requests cannot slip in between.
    const purgeSome = this.#db.transaction((): boolean => {
      const requests = s.purgeRequests.all(ms) as Array<{ id: number, first_item: number, last_item: number }>
      for (const q of requests) {
        s.purgeParts.run(q.first_item, q.last_item)
        s.purgeRequest.run(q.id)
        total += q.last_item - q.first_item + 1
      }
      // Only once no request before the cut is left: until then a block may still hold one's parts.
      return requests.length > 0 || s.purgeBlocks.run(ms).changes > 0
    })
    try {
      while (purgeSome.immediate()) {
        await new Promise<void>((resolve) => setImmediate(resolve)) // let queued work run between batches
      }
      return total
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

  /** Closes the connection (every statement prepared on it is finalized with it); idempotent. */
  async close (): Promise<void> {
    this.closeSync()
  }

  /** close(), synchronously: for a thread's 'exit' handler, where no promise settles any more. */
  closeSync (): void {
    if (this.#closed) return
    this.#closed = true
    this.#searchCache.clear()
    this.#accountsStatements.clear()
    this.#stmts = null
    this.#db.close()
  }
}
