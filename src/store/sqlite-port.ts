/**
 * The SQLite connection of a store, as a SqlPort (sql-port.ts) and as the one place better-sqlite3's errors become
 * StoreError.
 *
 * better-sqlite3 is synchronous and a store has one connection: a transaction that awaits between its statements must
 * not let another caller's statement run inside it. Like Kysely's SQLite driver (its connection mutex), the port lets
 * one transaction hold the connection at a time; a statement outside it, and the store's own synchronous work
 * (exclusive()), wait until it ends. When no transaction is open, which is nearly always, they run at once.
 */
import type Database from 'better-sqlite3'
import { StoreError } from '../errors.ts'
import { dialectSql, kUniqueViolation, type SqlPort, type TransactionMode } from './sql-port.ts'

/** An error of better-sqlite3 as a StoreError (a StoreError passes unchanged). */
export function sqliteError (err: unknown): StoreError {
  if (err instanceof StoreError) return err
  const code = (err as { code?: unknown } | null)?.code
  // BUSY/LOCKED/IOERR/FULL are conditions an operator can fix or that pass: report them as unavailability.
  if (typeof code === 'string' && /^SQLITE_(BUSY|LOCKED|IOERR|FULL|CANTOPEN|READONLY)/.test(code)) {
    return new StoreError('STORE_UNAVAILABLE', `SQLite store unavailable (${code})`, { cause: err })
  }
  const wrapped = new StoreError('STORE_ERROR', `SQLite store error${typeof code === 'string' ? ` (${code})` : ''}`, { cause: err })
  if (code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE') (wrapped as StoreError & { sqlState?: string }).sqlState = kUniqueViolation
  return wrapped
}

/** One SQLite connection of a store. */
export class SqlitePort implements SqlPort {
  readonly #db: Database.Database
  readonly #statements = new Map<string, Database.Statement>()
  #closed = false
  /** True while a transaction holds the connection; #released settles when it ends. */
  #held = false
  #released: Promise<void> = Promise.resolve()
  /** The port a transaction's callback gets: it runs on the held connection without waiting for it. */
  readonly #inside: SqlPort

  constructor (db: Database.Database) {
    this.#db = db
    this.#inside = {
      run: async (sql, params) => this.#guard(() => this.#statement(sql).run(...params).changes),
      all: async <T>(sql: string, params: unknown[]) => this.#guard(() => this.#statement(sql).all(...params) as T[]),
      transaction: async (fn) => await fn(this.#inside),
      turns: async () => {}, // write transactions take turns already
      assertOpen: () => this.assertOpen(),
      list: (values) => this.list(values)
    }
  }

  /** The connection, for the store's own statements; STORE_CLOSED once closed. */
  get db (): Database.Database {
    this.assertOpen()
    return this.#db
  }

  assertOpen (): void {
    if (this.#closed) throw new StoreError('STORE_CLOSED', 'the store is closed')
  }

  /**
   * Runs the store's own synchronous work on the connection now, its errors translated. Refused while a transaction
   * of the port holds the connection (the work would join it): async callers use exclusive(), which waits.
   */
  sync<T> (fn: (db: Database.Database) => T): T {
    if (this.#held) throw new StoreError('STORE_ERROR', 'a synchronous store call while a transaction is open on the connection')
    return this.#guard(() => fn(this.db))
  }

  /** sync(), once no transaction holds the connection. */
  async exclusive<T> (fn: (db: Database.Database) => T): Promise<T> {
    while (this.#held) await this.#released
    return this.sync(fn)
  }

  async run (sql: string, params: unknown[]): Promise<number> {
    return await this.exclusive(() => this.#statement(sql).run(...params).changes)
  }

  async all<T> (sql: string, params: unknown[]): Promise<T[]> {
    return await this.exclusive(() => this.#statement(sql).all(...params) as T[])
  }

  /** Nothing: write transactions take turns already (SqlPort.turns). */
  async turns (_key: string): Promise<void> {}

  async transaction<T> (fn: (tx: SqlPort) => Promise<T>, mode: TransactionMode = 'write'): Promise<T> {
    while (this.#held) await this.#released
    // IMMEDIATE takes the write lock before the first read, so a read-then-write cannot lose to another connection;
    // a deferred BEGIN reads one snapshot (WAL) until it ends.
    this.sync((db) => db.exec(mode === 'write' ? 'BEGIN IMMEDIATE' : 'BEGIN'))
    let release = (): void => {}
    this.#held = true
    this.#released = new Promise((resolve) => { release = resolve })
    try {
      const result = await fn(this.#inside)
      this.#guard(() => this.#db.exec('COMMIT'))
      return result
    } catch (err) {
      try {
        if (this.#db.inTransaction) this.#db.exec('ROLLBACK')
      } catch {
        // The connection is closing or broken: SQLite rolls back what was not committed when it closes.
      }
      throw err // the port's statements and COMMIT throw StoreError already; the callback's own errors pass as they are
    } finally {
      this.#held = false
      release()
    }
  }

  list (values: readonly string[] | null): string | null {
    return values === null ? null : JSON.stringify(values)
  }

  /** Finalizes the statements; the store closes the connection. */
  close (): void {
    this.#closed = true
    this.#statements.clear()
  }

  #guard<T> (fn: () => T): T {
    try {
      return fn()
    } catch (err) {
      throw sqliteError(err)
    }
  }

  /** A prepared statement of portable SQL (one per distinct text: the modules' statements are a fixed set). */
  #statement (sql: string): Database.Statement {
    let st = this.#statements.get(sql)
    if (st === undefined) {
      st = this.db.prepare(dialectSql(sql, (name) => name, 'BINARY', false))
      this.#statements.set(sql, st)
    }
    return st
  }
}
