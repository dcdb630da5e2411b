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
  columnFilter, continuationUid, decodeCursor, encodeCursor, MAX_INDEXED_CHARS, recordJson, requestRuns, toRows, usageDeltas,
  validateFilters, validateLimit, type Cursor, type HistoryRow, type ValidFilters
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
const kPurgeBatch = 5000 // items per purge transaction, so the history writer can interleave during a long purge
/**
 * Item ids per segment of the indicator_value index, as a shift: 65,536 items. Small enough that a batch's index
 * inserts share pages (the segment's part of the index stays in the page cache), large enough that a value search
 * reads few ranges: one per 65,536 records kept at most. Part of the schema (migration 2).
 */
const kSegmentShift = 16
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

  -- History is two tables: one row per request (its shared fields, stored once) and one row per indicator.
  -- A request's items are inserted together, so their ids form one contiguous range [first_item, last_item]:
  -- a request finds its items by primary-key range and an item its request by primary key, with no index on either
  -- link. Filters on request fields are served by the request indexes, filters on the indicator by the item indexes.
  CREATE TABLE history_requests (
    id INTEGER PRIMARY KEY,                -- see history.id
    uid TEXT NOT NULL,                     -- the writer's request identifier, unique per request
    ts INTEGER NOT NULL,                   -- epoch ms UTC of the request's date
    tenant TEXT NOT NULL,
    request_id TEXT NOT NULL,
    bulk_request_id TEXT,
    http_status INTEGER NOT NULL,
    auth_type TEXT NOT NULL,
    apikey TEXT NOT NULL,
    user_id TEXT,
    envelope TEXT NOT NULL,                -- JSON object of the request-level members of each record
    first_item INTEGER NOT NULL,           -- history.id range of the request's items (contiguous)
    last_item INTEGER NOT NULL
  ) STRICT;
  CREATE UNIQUE INDEX history_requests_uid ON history_requests (uid);
  -- Every search is tenant-scoped and ordered by (ts, id) descending: each index starts with tenant and ends with
  -- (ts, id), so a filter is an index range read backwards with no sort, and LIMIT stops it early.
  CREATE INDEX history_requests_tenant_date ON history_requests (tenant, ts, id);
  CREATE INDEX history_requests_tenant_apikey ON history_requests (tenant, apikey, ts, id);
  -- Partial: only requests with a user (dashboard sessions) enter it.
  CREATE INDEX history_requests_tenant_user ON history_requests (tenant, user_id, ts, id) WHERE user_id IS NOT NULL;
  -- Serves exclude_bulk_requests: a partial index of single calls only.
  CREATE INDEX history_requests_tenant_bulk ON history_requests (tenant, ts, id) WHERE bulk_request_id IS NULL;
  -- Serves purge, which is not tenant-scoped.
  CREATE INDEX history_requests_date ON history_requests (ts);

  CREATE TABLE history (
    -- Not AUTOINCREMENT (it costs a sqlite_sequence update per insert): a new id is max(id) + 1, so it can only
    -- reuse ids of rows purged from the top of the table, and is still above every row that exists. What ordering
    -- and item ranges need holds: ids increase with insertion among existing rows.
    id INTEGER PRIMARY KEY,
    req INTEGER NOT NULL,                  -- history_requests.id (no foreign key: it would cost a lookup per row)
    ts INTEGER NOT NULL,                   -- the request's, copied for the indexes below
    tenant TEXT NOT NULL,                  -- the request's, copied for the indexes below
    indicator_type TEXT,
    indicator_value TEXT NOT NULL,         -- as sent
    indicator_normalized TEXT,
    item TEXT NOT NULL                     -- JSON members (no braces) of the indicator-level fields; see recordJson
  ) STRICT;
  CREATE INDEX history_tenant_itype ON history (tenant, indicator_type, ts, id);
  -- A prefix expression: one over-long value must not bloat the index (and PostgreSQL refuses entries over ~2.7 kB).
  CREATE INDEX history_tenant_ivalue ON history (tenant, substr(indicator_value, 1, ${MAX_INDEXED_CHARS}), ts, id);

  -- Billing counters: one row per (tenant, key, UTC day), kept when history is purged.
  CREATE TABLE usage (
    tenant TEXT NOT NULL,
    day TEXT NOT NULL,                     -- YYYY-MM-DD UTC
    key_id TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (tenant, day, key_id)
  ) STRICT, WITHOUT ROWID;
  CREATE INDEX usage_key_day ON usage (key_id, day);
  `,
  // 2: the indicator_value index is clustered by segment of item ids (docs/OPERATIONS.md, "Durability of history"). Keyed by
  // value alone, every insert landed on a random leaf page: a batch dirtied about one page per row, and SQLite's WAL
  // writes whole pages, so ingest slowed as the table grew. Keyed by (tenant, segment, value), a batch writes into
  // the newest segment's small, hot part of the index. A value search reads one range per segment (newest first,
  // see searchBySegment) with the segment's date bounds from history_segments.
  `
  DROP INDEX history_tenant_ivalue;
  CREATE INDEX history_tenant_seg_ivalue ON history (tenant, id >> ${kSegmentShift}, substr(indicator_value, 1, ${MAX_INDEXED_CHARS}), ts, id);
  -- Date bounds of each segment's items: ts of every item in the segment lies in [min_ts, max_ts]. Writers widen
  -- them; purge only deletes the rows of segments left empty, so bounds may be wider than the items, never narrower.
  CREATE TABLE history_segments (
    seg INTEGER PRIMARY KEY,               -- history.id >> ${kSegmentShift}
    min_ts INTEGER NOT NULL,
    max_ts INTEGER NOT NULL
  ) STRICT;
  INSERT INTO history_segments (seg, min_ts, max_ts) SELECT id >> ${kSegmentShift}, min(ts), max(ts) FROM history GROUP BY 1;
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
  nextItemId: Database.Statement
  insertNewRequest: Database.Statement
  requestByUid: Database.Statement
  extendRequest: Database.Statement
  insertRequest: Database.Statement
  insertItem: Database.Statement
  upsertUsage: Database.Statement
  widenSegment: Database.Statement
  segmentsFor: Database.Statement
  pruneSegments: Database.Statement
  usageTenant: Database.Statement
  usageTenantKey: Database.Statement
  usageForKey: Database.Statement
  purgeRequests: Database.Statement
  purgeItems: Database.Statement
  purgeRequest: Database.Statement
  shrinkRequest: Database.Statement
}

const kRequestInsert = 'INSERT INTO history_requests (uid, ts, tenant, request_id, bulk_request_id, http_status, auth_type, apikey, ' +
  'user_id, envelope, first_item, last_item) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)'

/** Date bounds of the segments a batch writes into (history_segments). */
class SegmentBounds {
  readonly bounds = new Map<number, { min: number, max: number }>()
  #seg = -1
  #b: { min: number, max: number } | undefined

  widen (id: number, ts: number): void {
    const seg = Math.floor(id / 2 ** kSegmentShift)
    if (seg !== this.#seg) {
      this.#seg = seg
      this.#b = this.bounds.get(seg)
      if (this.#b === undefined) this.bounds.set(seg, this.#b = { min: ts, max: ts })
    }
    const b = this.#b as { min: number, max: number }
    if (ts < b.min) b.min = ts
    if (ts > b.max) b.max = ts
  }
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

/**
 * Plans a search. Indicator filters (indicator_value, or indicator_type when neither user_id nor apikey is given)
 * read an item index and fetch each item's request by primary key for the request-level filters. Everything else
 * reads a request index newest first and expands each request's item range backwards: within one ts, request ids
 * and item ids are both insertion order, so (ts DESC, request id DESC, item id DESC) is (ts DESC, item id DESC),
 * the order of the item path, and the same (ts, item id) cursor serves both.
 * Index priority as before the split: indicator_value > user_id > apikey > indicator_type > exclude_bulk_requests >
 * date only; every index ends with (ts, id), so a date range narrows each one.
 */
function buildSearch (tenant: string, f: ValidFilters, cursor: Cursor | null, limit: number): SearchPlan {
  const where: string[] = []
  const params: unknown[] = []
  let segParam: number | null = null
  const add = (clause: string, ...values: unknown[]): void => { where.push(clause); params.push(...values) }
  const requestFilters = (): void => {
    if (f.userId !== null) add('r.user_id = ?', f.userId)
    if (f.apikey !== null) add('r.apikey = ?', f.apikey)
    if (f.excludeBulk) add('r.bulk_request_id IS NULL')
    if (f.authType !== null) add('r.auth_type = ?', f.authType)
  }
  let sql: string
  if (f.indicatorValue !== null || (f.indicatorType !== null && f.userId === null && f.apikey === null)) {
    const index = f.indicatorValue !== null ? 'history_tenant_seg_ivalue' : 'history_tenant_itype'
    add('h.tenant = ?', tenant)
    if (f.indicatorValue !== null) {
      segParam = params.length
      add(`h.id >> ${kSegmentShift} = ?`, 0) // the segment, set per range read (searchBySegment)
      const { full, prefix } = columnFilter(f.indicatorValue)
      add(`substr(h.indicator_value, 1, ${MAX_INDEXED_CHARS}) = ?`, prefix)
      add('h.indicator_value = ?', full)
    }
    if (f.indicatorType !== null) add('h.indicator_type = ?', f.indicatorType)
    if (f.gteMs !== null) add('h.ts >= ?', f.gteMs)
    if (f.ltMs !== null) add('h.ts < ?', f.ltMs)
    if (cursor !== null) add('(h.ts, h.id) < (?, ?)', cursor.ts, cursor.id)
    add('r.id = h.req')
    requestFilters()
    // CROSS JOIN fixes the loop order: the item index outside, the request by primary key inside.
    sql = `SELECT h.id AS id, h.ts AS ts, r.envelope AS envelope, h.item AS item FROM history AS h INDEXED BY ${index} ` +
      `CROSS JOIN history_requests AS r WHERE ${where.join(' AND ')} ORDER BY h.ts DESC, h.id DESC LIMIT ?`
  } else {
    const index = f.userId !== null
      ? 'history_requests_tenant_user'
      : f.apikey !== null
        ? 'history_requests_tenant_apikey'
        : f.excludeBulk ? 'history_requests_tenant_bulk' : 'history_requests_tenant_date'
    add('r.tenant = ?', tenant)
    requestFilters()
    if (f.gteMs !== null) add('r.ts >= ?', f.gteMs)
    if (f.ltMs !== null) add('r.ts < ?', f.ltMs)
    if (cursor !== null) add('r.ts <= ?', cursor.ts)
    add('h.id >= r.first_item')
    // On the cursor's ts, only items below the cursor: a bound of the range scan, so a page does not re-read the
    // part of a large request that earlier pages returned.
    if (cursor !== null) add('h.id <= (CASE WHEN r.ts < ? THEN r.last_item ELSE min(r.last_item, ?) END)', cursor.ts, cursor.id - 1)
    else add('h.id <= r.last_item')
    add('h.req = r.id')
    if (f.indicatorType !== null) add('h.indicator_type = ?', f.indicatorType)
    sql = `SELECT h.id AS id, r.ts AS ts, r.envelope AS envelope, h.item AS item FROM history_requests AS r INDEXED BY ${index} ` +
      `CROSS JOIN history AS h WHERE ${where.join(' AND ')} ORDER BY r.ts DESC, r.id DESC, h.id DESC LIMIT ?`
  }
  params.push(limit)
  return { sql, params, segParam }
}

/** A search statement's SQL and parameters; segParam is where the segment goes in a value search, else null. */
interface SearchPlan {
  sql: string
  params: unknown[]
  segParam: number | null
}

interface FoundRow { id: number, ts: number, envelope: string, item: string }

/** A search ready to run: its statement and parameters, with what a value search needs to read segment by segment. */
interface PreparedSearch {
  stmt: Database.Statement
  params: unknown[]
  segParam: number | null
  filters: ValidFilters
  cursor: Cursor | null
  /** Rows to read: one more than the page, to know whether another page exists. */
  limit: number
}

/** (ts, id) descending, the order of every search. */
function newestFirst (a: FoundRow, b: FoundRow): number {
  return b.ts - a.ts || b.id - a.id
}

/**
 * Store on one SQLite file. Searches name their index (INDEXED BY) and loop order (CROSS JOIN) instead of trusting
 * the planner: without ANALYZE statistics SQLite may prefer the tenant-date range over a far more selective key or
 * value filter, and a deterministic plan is what the EXPLAIN tests check (see buildSearch).
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
      // Only takes effect on a new, empty file (before WAL is set): 16 history items per page instead of 8, and
      // index pages that hold twice the entries. Measured ~7% cheaper history ingest than 4 KiB pages.
      this.#db.pragma('page_size = 8192')
      if (options.path !== ':memory:') this.#db.pragma('journal_mode = WAL')
      this.#db.pragma(`busy_timeout = ${Math.trunc(options.busyTimeoutMs ?? kDefaultBusyTimeoutMs)}`)
      this.#db.pragma('foreign_keys = ON')
      // WAL + NORMAL: a commit is atomic and never corrupts the file; only a power loss may roll back the last
      // commits (the history spool is fsynced separately). 32 MiB of page cache keeps the indexes' hot pages in memory.
      this.#db.pragma('synchronous = NORMAL')
      this.#db.pragma('cache_size = -32768')
      // A history batch writes several MiB: with the default 1000-page threshold every batch commit ran a
      // checkpoint (two fsyncs, and the batch's pages written a second time). ~40 MiB of WAL between checkpoints
      // writes a hot index page back once for several batches; the file is cut back to 64 MiB after a checkpoint.
      this.#db.pragma('wal_autocheckpoint = 5000')
      this.#db.pragma('journal_size_limit = 67108864')
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
        // The id SQLite gives the next item (max + 1, see the schema): the request row is written first, with the
        // range its items will get, and the insert of a run's last item checks it.
        nextItemId: db.prepare('SELECT coalesce(max(id), 0) + 1 FROM history').pluck(),
        // Inserts nothing when the uid exists (the run continues a request of an earlier batch, or is a replay).
        // Not an UPSERT ... RETURNING: measured several µs slower per request, which single calls pay per indicator.
        insertNewRequest: db.prepare(`${kRequestInsert} ON CONFLICT (uid) DO NOTHING`),
        requestByUid: db.prepare('SELECT id, last_item FROM history_requests WHERE uid = ?'),
        extendRequest: db.prepare('UPDATE history_requests SET last_item = ? WHERE id = ?'),
        insertRequest: db.prepare(kRequestInsert),
        // One row per statement: measured faster here than multi-row VALUES, which SQLite runs as a co-routine.
        insertItem: db.prepare('INSERT INTO history (req, ts, tenant, indicator_type, indicator_value, indicator_normalized, item) ' +
          'VALUES (?, ?, ?, ?, ?, ?, ?)'),
        upsertUsage: db.prepare(
          'INSERT INTO usage (tenant, day, key_id, count) VALUES (?, ?, ?, ?) ' +
          'ON CONFLICT (tenant, day, key_id) DO UPDATE SET count = count + excluded.count'),
        widenSegment: db.prepare(
          'INSERT INTO history_segments (seg, min_ts, max_ts) VALUES (?, ?, ?) ' +
          'ON CONFLICT (seg) DO UPDATE SET min_ts = min(min_ts, excluded.min_ts), max_ts = max(max_ts, excluded.max_ts)'),
        // Segments that may hold items in [gte, lt) below the cursor's ts, newest first (searchBySegment).
        segmentsFor: db.prepare('SELECT seg, max_ts FROM history_segments WHERE max_ts >= ? AND min_ts < ? AND min_ts <= ? ' +
          'ORDER BY max_ts DESC, seg DESC'),
        // One rowid range probe per segment: the segments table holds a few thousand rows at most.
        pruneSegments: db.prepare(`DELETE FROM history_segments WHERE NOT EXISTS (SELECT 1 FROM history WHERE id >= (seg << ${kSegmentShift}) ` +
          `AND id < ((seg + 1) << ${kSegmentShift}))`),
        usageTenant: db.prepare('SELECT key_id, count FROM usage WHERE tenant = ? AND day = ? ORDER BY key_id'),
        usageTenantKey: db.prepare('SELECT key_id, count FROM usage WHERE tenant = ? AND day = ? AND key_id = ?'),
        usageForKey: db.prepare('SELECT coalesce(sum(count), 0) FROM usage WHERE key_id = ? AND day = ?').pluck(),
        purgeRequests: db.prepare('SELECT id, first_item, last_item FROM history_requests INDEXED BY history_requests_date ' +
          `WHERE ts < ? LIMIT ${kPurgeBatch}`),
        purgeItems: db.prepare('DELETE FROM history WHERE id >= ? AND id <= ? AND req = ?'),
        purgeRequest: db.prepare('DELETE FROM history_requests WHERE id = ?'),
        shrinkRequest: db.prepare('UPDATE history_requests SET first_item = ? WHERE id = ?')
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

  /**
   * Synchronous writeHistoryRows: one IMMEDIATE transaction for the rows and their usage counters. Each run of
   * rows with one uid becomes (or extends) one request row, then its items are inserted with consecutive ids.
   */
  writeHistoryRowsSync (rows: readonly HistoryRow[]): void {
    const s = this.#statements()
    if (rows.length === 0) return
    const deltas = usageDeltas(rows)
    const runs = requestRuns(rows)
    const segments = new SegmentBounds()
    try {
      this.#db.transaction(() => {
        // The write lock is held: no other connection can take ids until the commit.
        let next = s.nextItemId.get() as number
        for (const run of runs) {
          const r0 = rows[run.start] as HistoryRow
          const first = next
          const last = next + run.end - run.start - 1
          const cols = [r0.ts, r0.tenant, r0.requestId, r0.bulkRequestId, r0.httpStatus, r0.authType, r0.apikey, r0.userId, r0.envelope, first, last]
          let req: number | undefined
          if (run.uid !== null) {
            const inserted = s.insertNewRequest.run(run.uid, ...cols)
            if (inserted.changes === 1) {
              req = Number(inserted.lastInsertRowid)
            } else {
              // The uid exists: its range is extended when this run's items follow on directly (the writer cut the
              // request across two batches), else the run gets a request row of its own (continuationUid).
              const prior = s.requestByUid.get(run.uid) as { id: number, last_item: number } | undefined
              if (prior !== undefined && prior.last_item === first - 1) {
                s.extendRequest.run(last, prior.id)
                req = prior.id
              }
            }
          }
          req ??= Number(s.insertRequest.run(continuationUid(r0.uid, first), ...cols).lastInsertRowid)
          let id: number | bigint = 0
          for (let i = run.start; i < run.end; i++) {
            const r = rows[i] as HistoryRow
            id = s.insertItem.run(req, r.ts, r.tenant, r.indicatorType, r.indicatorValue, r.indicatorNormalized, r.item).lastInsertRowid
            segments.widen(first + i - run.start, r.ts)
          }
          // Cannot differ while this transaction holds the write lock; if it ever did, roll back rather than
          // store a wrong range.
          if (Number(id) !== last) throw new StoreError('STORE_ERROR', 'history item ids are not the range recorded for their request')
          next = last + 1
        }
        for (const d of deltas) s.upsertUsage.run(d.tenant, d.day, d.keyId, d.count)
        for (const [seg, b] of segments.bounds) s.widenSegment.run(seg, b.min, b.max)
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

  #search (tenant: string, filters: SearchFilters, limit: number, cursor: string | null): PreparedSearch {
    this.#statements()
    if (typeof tenant !== 'string' || tenant === '') throw new StoreError('INVALID_REQUEST', 'tenant is required')
    const f = validateFilters(filters)
    const n = validateLimit(limit)
    const c = decodeCursor(cursor)
    // One row more than asked tells whether another page exists, so the last page has next_cursor null.
    const { sql, params, segParam } = buildSearch(tenant, f, c, n + 1)
    let stmt = this.#searchCache.get(sql)
    if (stmt === undefined) {
      try {
        stmt = this.#db.prepare(sql)
      } catch (err) {
        throw wrap(err)
      }
      this.#searchCache.set(sql, stmt) // bounded: one statement per combination of filters present
    }
    return { stmt, params, segParam, filters: f, cursor: c, limit: n + 1 }
  }

  /**
   * A value search: one index range per segment of item ids, read newest segment first (by its latest date), each
   * ordered by (ts, id) and limited. Segments' dates overlap only where writes came out of date order, so reading
   * stops at the first segment whose latest date is older than the last row a full page would keep.
   */
  #searchBySegment ({ stmt, params, segParam, filters: f, cursor, limit }: PreparedSearch & { segParam: number }): FoundRow[] {
    const s = this.#statements()
    const segments = s.segmentsFor.all(
      f.gteMs ?? Number.MIN_SAFE_INTEGER, f.ltMs ?? Number.MAX_SAFE_INTEGER, cursor?.ts ?? Number.MAX_SAFE_INTEGER
    ) as Array<{ seg: number, max_ts: number }>
    let found: FoundRow[] = []
    for (const { seg, max_ts: maxTs } of segments) {
      if (found.length >= limit && maxTs < (found[limit - 1] as FoundRow).ts) break
      params[segParam] = seg
      const rows = stmt.all(...params) as FoundRow[]
      if (rows.length === 0) continue
      found = found.length === 0 ? rows : found.concat(rows).sort(newestFirst).slice(0, limit)
    }
    return found
  }

  /** One page of a tenant's history, newest first. */
  async searchHistory (tenant: string, filters: SearchFilters, limit: number, cursor: string | null): Promise<SearchPage> {
    const q = this.#search(tenant, filters, limit, cursor)
    let rows: FoundRow[]
    try {
      rows = q.segParam === null ? q.stmt.all(...q.params) as FoundRow[] : this.#searchBySegment({ ...q, segParam: q.segParam })
    } catch (err) {
      throw wrap(err)
    }
    const more = rows.length > limit
    if (more) rows.pop()
    const last = rows[rows.length - 1]
    return {
      results: rows.map((r) => JSON.parse(recordJson(r.envelope, r.item)) as HistoryRecord),
      next_cursor: more && last !== undefined ? encodeCursor(new Date(last.ts).toISOString(), last.id) : null
    }
  }

  /**
   * EXPLAIN QUERY PLAN lines of the query searchHistory would run (diagnostics and tests); for a value search, the
   * range read it runs once per segment.
   */
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
   * Deletes history older than `before`: requests dated before it and their item ranges, about kPurgeBatch items
   * per transaction (a larger request is cut from its first item on), so writers interleave. Returns the number of
   * items (records) deleted. Usage counters are billing records with their own retention: they are not decremented.
   */
  async purgeHistory (before: Date): Promise<number> {
    const s = this.#statements()
    const ms = before instanceof Date ? before.getTime() : Number.NaN
    if (!Number.isFinite(ms)) throw new StoreError('INVALID_REQUEST', 'before must be a valid Date')
    let total = 0
    // Selected inside the transaction: a writer extending one of these requests cannot slip in between.
    const purgeSome = this.#db.transaction((): boolean => {
      const requests = s.purgeRequests.all(ms) as Array<{ id: number, first_item: number, last_item: number }>
      let budget = kPurgeBatch
      for (const q of requests) {
        if (budget <= 0) break
        const upto = Math.min(q.last_item, q.first_item + budget - 1)
        const n = s.purgeItems.run(q.first_item, upto, q.id).changes
        total += n
        budget -= Math.max(n, 1)
        if (upto === q.last_item) s.purgeRequest.run(q.id)
        else s.shrinkRequest.run(upto + 1, q.id)
      }
      return requests.length > 0
    })
    try {
      while (purgeSome.immediate()) {
        await new Promise<void>((resolve) => setImmediate(resolve)) // let queued work run between batches
      }
      s.pruneSegments.run()
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

  /** Closes the connection; idempotent. */
  async close (): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    this.#searchCache.clear()
    this.#stmts = null
    this.#db.close()
  }
}
