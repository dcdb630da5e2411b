/**
 * SQLite store (better-sqlite3): the embedded default, one file per deployment.
 *
 * Keys, allowlist, feedback, usage and accounts are the shared modules over this connection's port (sql-store.ts,
 * sqlite-port.ts); this class holds what is SQLite's own: opening and migrating the file, history ingest into parts
 * and blocks, search and purge. better-sqlite3 is synchronous: the async methods run synchronous ones on the port's
 * connection (exclusive()), and the Sync methods serve a worker thread that opens its own connection to the same file
 * (WAL lets readers and that one writer proceed without blocking each other; busy_timeout makes two writers wait
 * instead of failing).
 */
import Database from 'better-sqlite3'
import { withMembersAppended, type HistoryPart } from '../history/block.ts'
import { memberNames, ownEnvelopeMembers } from '../history/record.ts'
import { readsBlocks, rowParts, searchPage } from '../history/blocks.ts'
import { continuationUid, decodeCursor, toRows, usageDeltas, validateFilters, validateLimit, type HistoryRow } from '../history/rows.ts'
import {
  BlockWriter, blockScanSql, kBlockStatementSql, kSearchBudget, prepareBlockWriter, requestWalkSql, scanBlocks, walkRequests,
  type BlockStatements, type BlockWriterStatements
} from '../history/sqlite-search.ts'
import { StoreError } from '../errors.ts'
import { kSqliteMigrations, type SqliteMigration } from './migrations/sqlite/index.ts'
import { SqlitePort, sqliteError } from './sqlite-port.ts'
import { RetroHuntStore } from './retro-hunt.ts'
import { WebhookStore } from './webhooks.ts'
import { SqlStore } from './sql-store.ts'
import type { HistoryRecord, JournalMark, SearchFilters, SearchPage, Store } from './types.ts'

/** Options of SqliteStore. */
export interface SqliteStoreOptions {
  /** Database file, or ':memory:' (tests; one private database per store). */
  path: string
  /** How long a statement waits for another connection's write lock before failing, in ms. */
  busyTimeoutMs?: number
  /** Most items a history search reads before it answers a page that ends early (kSearchBudget; tests set fewer). */
  searchBudget?: number
}

const kDefaultBusyTimeoutMs = 5000 // 5 s: longer than any history batch transaction
const kPurgeBatch = 1000 // requests (and blocks) per purge transaction, so the history writer can interleave during a long purge

/** A run of parts that one request row files: its uid's, and single calls that share it (SharedRun). */
interface Run {
  uid: string
  req: number
  last: number
  stored: number
  /** Set when the run began with a single call: what another single call must match to join it. */
  shared: SharedRun | null
}

/**
 * What single calls filed under one request row share: its filter columns and its millisecond (so that searches,
 * which read a request's items under its date, see each call under its own), and the envelope's member names.
 */
interface SharedRun {
  part: HistoryPart
  names: string
}

/** Whether part p is a single call's (one item, no bulk request). */
function isSingleCall (p: HistoryPart): boolean {
  return p.count === 1 && p.bulkRequestId === null
}

/**
 * Single call p's part as filed under the run's request row (SharedRun), carrying its own envelope's members; null
 * when p may not join the run.
 */
function joined (run: Run | null, p: HistoryPart): Uint8Array | null {
  const shared = run?.shared
  if (shared == null) return null
  const r = shared.part
  const joins = isSingleCall(p) && p.ts === r.ts && p.tenant === r.tenant && p.apikey === r.apikey && p.userId === r.userId &&
    p.authType === r.authType && p.httpStatus === r.httpStatus && memberNames(p.envelope) === shared.names
  return joins ? withMembersAppended(p.part, ownEnvelopeMembers(p.envelope)) : null
}

/** The history statements, prepared once the tables exist. */
interface Statements extends BlockStatements, BlockWriterStatements {
  nextItemId: Database.Statement
  insertNewRequest: Database.Statement
  requestByUid: Database.Statement
  extendRequest: Database.Statement
  insertRequest: Database.Statement
  upsertUsage: Database.Statement
  setJournal: Database.Statement
  purgeRequests: Database.Statement
  purgeRequest: Database.Statement
  purgeParts: Database.Statement
  purgeBlocks: Database.Statement
}

const kRequestInsert = 'INSERT INTO history_requests (uid, ts, tenant, request_id, bulk_request_id, http_status, auth_type, apikey, ' +
  'user_id, envelope, first_item, last_item) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)'

/** The file's connection, configured; a file that is not a database fails here, its handle closed. */
function open (options: SqliteStoreOptions): Database.Database {
  if (options === null || typeof options !== 'object' || typeof options.path !== 'string' || options.path === '') {
    throw new StoreError('INVALID_OPTIONS', 'SqliteStore needs a path (a file or :memory:)')
  }
  let db: Database.Database | null = null
  try {
    db = new Database(options.path)
    // Only takes effect on a new, empty file (before WAL is set): 16 history items per page instead of 8, and
    // index pages that hold twice the entries. Measured ~7% cheaper history ingest than 4 KiB pages.
    db.pragma('page_size = 8192')
    if (options.path !== ':memory:') db.pragma('journal_mode = WAL')
    db.pragma(`busy_timeout = ${Math.trunc(options.busyTimeoutMs ?? kDefaultBusyTimeoutMs)}`)
    db.pragma('foreign_keys = ON')
    // WAL + NORMAL: a commit is atomic and never corrupts the file; only a power loss may roll back the last
    // commits (the history journal is fsynced separately). 32 MiB of page cache keeps the indexes' hot pages in memory.
    db.pragma('synchronous = NORMAL')
    db.pragma('cache_size = -32768')
    // A history batch writes several MiB: with the default 1000-page threshold every batch commit ran a
    // checkpoint (two fsyncs, and the batch's pages written a second time). ~40 MiB of WAL between checkpoints
    // writes a hot index page back once for several batches; the file is cut back to 64 MiB after a checkpoint.
    db.pragma('wal_autocheckpoint = 5000')
    db.pragma('journal_size_limit = 67108864')
    return db
  } catch (err) {
    // A file that is not a database opens and fails at the first pragma: the handle is closed here, not left to
    // better-sqlite3's cleanup when the thread ends.
    db?.close()
    throw sqliteError(err)
  }
}

/**
 * Store on one SQLite file. Searches name their index (INDEXED BY) instead of trusting the planner: without ANALYZE
 * statistics SQLite may prefer the tenant-date range over a far more selective key filter, and a deterministic plan
 * is what the EXPLAIN tests check (see src/history/sqlite-search.ts: scanBlocks, walkRequests).
 */
export class SqliteStore extends SqlStore implements Store {
  readonly #port: SqlitePort
  readonly #db: Database.Database
  #stmts: Statements | null = null
  readonly #searchCache = new Map<string, Database.Statement>()
  readonly #searchBudget: number
  #closed = false
  /** Retro-hunt hits and its reads of history blocks, over this store's port. */
  readonly retroHunt: RetroHuntStore
  /** Retro-hunt webhooks and deliveries, over this store's port. */
  readonly webhooks: WebhookStore

  constructor (options: SqliteStoreOptions) {
    const db = open(options)
    const port = new SqlitePort(db)
    super(port)
    this.#port = port
    this.#db = db
    this.#searchBudget = options.searchBudget ?? kSearchBudget
    this.retroHunt = new RetroHuntStore(port, 'sqlite')
    this.webhooks = new WebhookStore(port, 'sqlite')
  }

  // Prepared on first use: the tables must exist, which migrate() guarantees.
  #statements (db: Database.Database): Statements {
    this.#stmts ??= {
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
      purgeRequests: db.prepare('SELECT id, first_item, last_item FROM history_requests INDEXED BY history_requests_date ' +
        `WHERE ts < ? LIMIT ${kPurgeBatch}`),
      purgeRequest: db.prepare('DELETE FROM history_requests WHERE id = ?'),
      purgeParts: db.prepare('DELETE FROM history_parts WHERE id >= ? AND id <= ?'),
      purgeBlocks: db.prepare('DELETE FROM history_blocks WHERE id IN (SELECT id FROM history_blocks INDEXED BY history_blocks_date ' +
        `WHERE max_ts < ? LIMIT ${kPurgeBatch})`)
    }
    return this.#stmts
  }

  /** Synchronous migrate, for a worker thread that opens its own connection; `version` stops earlier (tests). */
  migrateSync (version = kSqliteMigrations.length): void {
    this.#port.sync((db) => {
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
    })
  }

  /** Creates or upgrades the schema. */
  async migrate (): Promise<void> {
    await this.#port.exclusive(() => { this.migrateSync() })
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
    const todo = parts.filter((p) => p.count > 0)
    if (todo.length === 0 && mark === undefined) {
      this.#port.assertOpen()
      return
    }
    const deltas = usageDeltas(todo)
    this.#port.sync((db) => {
      const s = this.#statements(db)
      db.transaction(() => {
        if (mark !== undefined) s.setJournal.run(mark.journal, mark.position)
        if (todo.length === 0) return
        // The write lock is held: no other connection can take ids until the commit.
        let next = s.nextItemId.get() as number
        const blocks = new BlockWriter(s)
        /** uids whose run ended earlier in this batch: meeting one again files the run as a request of its own. */
        const ended = new Set<string>()
        let run: Run | null = null
        const endRun = (): void => {
          if (run === null) return
          if (run.last !== run.stored) s.extendRequest.run(run.last, run.req)
          ended.add(run.uid)
          run = null
        }
        for (const p of todo) {
          const first = next
          const last = next + p.count - 1
          let part = p.part
          const continues = run !== null && run.uid === p.uid
          const sharing = continues ? null : joined(run, p)
          if (run !== null && continues) {
            run.last = last
          } else if (run !== null && sharing !== null) {
            // A single call of the run's key and millisecond: its item, carrying its own envelope, joins the row.
            run.last = last
            part = sharing
            ended.add(p.uid)
          } else {
            endRun()
            run = this.#startRun(s, p, first, last, ended.has(p.uid))
            const names = isSingleCall(p) ? memberNames(p.envelope) : null
            if (names !== null) run.shared = { part: p, names }
          }
          blocks.add(p.tenant, first, p.count, run.req, p.ts, part)
          next = last + 1
        }
        endRun()
        blocks.finish()
        for (const d of deltas) s.upsertUsage.run(d.tenant, d.day, d.keyId, d.count)
      }).immediate()
    })
  }

  /**
   * The request row of a run of items [first, last]: a new row, or the row of its uid when the run follows that
   * row's items directly (the writer cut the request across two batches); any other continuation, or a uid met
   * again in the same batch, gets a row of its own (continuationUid).
   */
  #startRun (s: Statements, p: HistoryPart, first: number, last: number, seen: boolean): Run {
    const cols = [p.ts, p.tenant, p.requestId, p.bulkRequestId, p.httpStatus, p.authType, p.apikey, p.userId, p.envelope, first, last]
    if (!seen) {
      const inserted = s.insertNewRequest.run(p.uid, ...cols)
      if (inserted.changes === 1) return { uid: p.uid, req: Number(inserted.lastInsertRowid), last, stored: last, shared: null }
      const prior = s.requestByUid.get(p.uid) as { id: number, last_item: number } | undefined
      if (prior !== undefined && prior.last_item === first - 1) return { uid: p.uid, req: prior.id, last, stored: first - 1, shared: null }
    }
    const req = Number(s.insertRequest.run(continuationUid(p.uid, first), ...cols).lastInsertRowid)
    return { uid: p.uid, req, last, stored: last, shared: null }
  }

  /** Inserts records and counts them, in one transaction. */
  async writeHistory (records: HistoryRecord[]): Promise<void> {
    const rows = toRows(records) // validates everything before the transaction starts
    await this.#port.exclusive(() => { this.writeHistoryRowsSync(rows) })
  }

  /** Inserts rows the service built itself, with their usage counters, in one transaction. */
  async writeHistoryRows (rows: readonly HistoryRow[]): Promise<void> {
    await this.#port.exclusive(() => { this.writeHistoryRowsSync(rows) })
  }

  /** Inserts encoded parts with their usage counters, in one transaction. */
  async writeHistoryParts (parts: readonly HistoryPart[], mark?: JournalMark): Promise<void> {
    await this.#port.exclusive(() => { this.writeHistoryPartsSync(parts, mark) })
  }

  #prepared (db: Database.Database, sql: string): Database.Statement {
    let stmt = this.#searchCache.get(sql)
    if (stmt === undefined) {
      stmt = db.prepare(sql)
      this.#searchCache.set(sql, stmt) // bounded: one statement per combination of filters present
    }
    return stmt
  }

  /** One page of a tenant's history, newest first. */
  async searchHistory (tenant: string, filters: SearchFilters, limit: number, cursor: string | null): Promise<SearchPage> {
    this.#port.assertOpen()
    if (typeof tenant !== 'string' || tenant === '') throw new StoreError('INVALID_REQUEST', 'tenant is required')
    const f = validateFilters(filters)
    const n = validateLimit(limit)
    const c = decodeCursor(cursor)
    // One row more than asked tells whether another page exists, so the last page has next_cursor null. One read
    // transaction: the search runs several statements, and they all see the same snapshot (the writer's connection
    // may append to an open block in between).
    const { found, resume } = await this.#port.exclusive((db) => {
      const s = this.#statements(db)
      return db.transaction(() => readsBlocks(f)
        ? scanBlocks(this.#prepared(db, blockScanSql(f.indicatorType !== null)), s, tenant, f, c, n + 1, this.#searchBudget)
        : walkRequests(this.#prepared(db, requestWalkSql(f)), s, tenant, f, c, n + 1, this.#searchBudget))()
    })
    return searchPage(found, n, resume)
  }

  /**
   * EXPLAIN QUERY PLAN lines of the statements searchHistory would run (diagnostics and tests): the tenant's blocks
   * or requests newest first, then what each of them reads by primary key.
   */
  async explainSearch (tenant: string, filters: SearchFilters, cursor: string | null = null): Promise<string[]> {
    this.#port.assertOpen()
    const f = validateFilters(filters)
    decodeCursor(cursor)
    const statements = readsBlocks(f)
      ? [blockScanSql(f.indicatorType !== null), kBlockStatementSql.blockParts, kBlockStatementSql.requestById]
      : [requestWalkSql(f), kBlockStatementSql.partAt]
    // Plans do not depend on parameter values here: bind placeholders of the right count.
    const plan = (db: Database.Database, sql: string): string[] => {
      const params = new Array((sql.match(/\?/g) ?? []).length).fill(0)
      params[0] = tenant
      return (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as Array<{ detail: string }>).map((p) => p.detail)
    }
    return await this.#port.exclusive((db) => statements.flatMap((sql) => plan(db, sql)))
  }

  /**
   * Deletes history older than `before`: requests dated before it with their parts, kPurgeBatch requests per
   * transaction so writers interleave, then the blocks whose newest item is older. Returns the number of items
   * (records) deleted. A block that keeps newer parts keeps its filter bits for the deleted ones: a search only reads
   * the block's parts in vain. Usage counters are billing records with their own retention: they are not decremented.
   */
  async purgeHistory (before: Date): Promise<number> {
    this.#port.assertOpen()
    const ms = before instanceof Date ? before.getTime() : Number.NaN
    if (!Number.isFinite(ms)) throw new StoreError('INVALID_REQUEST', 'before must be a valid Date')
    let total = 0
    // Selected inside the transaction: a writer extending one of these requests cannot slip in between.
    const purgeSome = (db: Database.Database): boolean => {
      const s = this.#statements(db)
      return db.transaction((): boolean => {
        const requests = s.purgeRequests.all(ms) as Array<{ id: number, first_item: number, last_item: number }>
        for (const q of requests) {
          s.purgeParts.run(q.first_item, q.last_item)
          s.purgeRequest.run(q.id)
          total += q.last_item - q.first_item + 1
        }
        // Only once no request before the cut is left: until then a block may still hold one's parts.
        return requests.length > 0 || s.purgeBlocks.run(ms).changes > 0
      }).immediate()
    }
    while (await this.#port.exclusive(purgeSome)) {
      await new Promise<void>((resolve) => setImmediate(resolve)) // let queued work run between batches
    }
    return total
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
    this.#stmts = null
    this.#port.close()
    this.#db.close()
  }
}
