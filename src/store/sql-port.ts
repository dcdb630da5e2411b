/**
 * What a store hands the modules of one concern each (accounts, API keys, allowlist, feedback, usage, sign-in limits):
 * a small SQL port, so each query is written once for both databases.
 *
 * The SQL those modules write is portable, with three marks the port rewrites for its database:
 *   ?          a parameter (PostgreSQL: $1, $2, ...)
 *   {name}     a table (PostgreSQL: "schema".name)
 *   {bytes}    the collation comparing text as bytes (SQLite: BINARY, its default; PostgreSQL: "C"), for every order a
 *              listing or cursor relies on, so both stores answer in the same order
 * Values differ only where the databases' types do: a list of strings is a parameter made by list() (SQLite: JSON
 * text, PostgreSQL: text[]), and cells are read back through listOf(), isoOf() and Number(), which accept both forms.
 *
 * Errors come out of the port already translated into StoreError (once, in the port, as a Kysely driver does in its
 * one executeQuery): STORE_UNAVAILABLE for a database that cannot answer, STORE_ERROR otherwise, STORE_CLOSED after
 * close(); a unique-key violation carries sqlState 23505 on both (isUniqueViolation).
 */
import { StoreError } from '../errors.ts'

/** How a transaction reads: `write` takes the write lock first; `snapshot` reads one consistent snapshot. */
export type TransactionMode = 'write' | 'snapshot'

/** A store's SQL, as the concern modules use it. */
export interface SqlPort {
  /** Runs a statement; the number of rows it changed. */
  run: (sql: string, params: unknown[]) => Promise<number>
  /** Runs a query; its rows. */
  all: <T>(sql: string, params: unknown[]) => Promise<T[]>
  /**
   * Runs `fn` in one transaction over the port it is given: committed when it resolves, rolled back when it throws.
   * A transaction inside a transaction joins it.
   */
  transaction: <T>(fn: (tx: SqlPort) => Promise<T>, mode?: TransactionMode) => Promise<T>
  /**
   * Inside a write transaction: transactions that call it with the same key take turns from here until they end, on
   * every instance (PostgreSQL: a transaction-level advisory lock on the key's hash, in the two-key space that no
   * session lock of the service uses; SQLite: write transactions take turns already). Outside one it does nothing.
   */
  turns: (key: string) => Promise<void>
  /** Throws STORE_CLOSED once the store is closed (for a call that answers without a query). */
  assertOpen: () => void
  /** A list of strings as a parameter (null stays null). */
  list: (values: readonly string[] | null) => unknown
}

/** SQLSTATE of a unique-key violation, which the SQLite port gives its constraint errors too. */
export const kUniqueViolation = '23505'

/** True when a store call failed because a unique key exists already. */
export function isUniqueViolation (err: unknown): boolean {
  return err instanceof StoreError && (err as StoreError & { sqlState?: string }).sqlState === kUniqueViolation
}

/** A list cell: SQLite keeps JSON text, PostgreSQL returns text[]. */
export function listOf (cell: unknown): string[] {
  return typeof cell === 'string' ? JSON.parse(cell) as string[] : cell as string[]
}

/** A time cell as ISO 8601 UTC: SQLite keeps the text, PostgreSQL returns a Date for timestamptz. */
export function isoOf (cell: unknown): string {
  return cell instanceof Date ? cell.toISOString() : cell as string
}

/** isoOf, with null kept. */
export function isoOrNull (cell: unknown): string | null {
  return cell === null || cell === undefined ? null : isoOf(cell)
}

/**
 * The portable SQL for one database: `table` names a table (already quoted or qualified as needed), `bytes` is the
 * byte-order collation's name, `numbered` turns ? into $1, $2, ...
 */
export function dialectSql (sql: string, table: (name: string) => string, bytes: string, numbered: boolean): string {
  let i = 0
  const out = sql.replace(/\{([a-z_]+)\}/g, (_m, name: string) => name === 'bytes' ? bytes : table(name))
  return numbered ? out.replace(/\?/g, () => `$${++i}`) : out
}
