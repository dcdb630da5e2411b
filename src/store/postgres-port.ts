/**
 * The PostgreSQL pool of a store, as a SqlPort (sql-port.ts) for the concern modules, as the pg-level port its history
 * half uses (history/postgres-history.ts PgPort), and as the one place pg's errors become StoreError.
 *
 * The connection string carries credentials: it is never part of an error message, and errors from pg are wrapped in
 * StoreError with the URL and password stripped (postgresError).
 */
import pg from 'pg'
import { StoreError } from '../errors.ts'
import { safeCause, scrub, secretsOf } from './redact.ts'
import { dialectSql, type SqlPort, type TransactionMode } from './sql-port.ts'

/** Options of the pool. */
export interface PostgresPortOptions {
  url: string
  /** Schema of every table: a plain lowercase identifier, checked by the store. */
  schema: string
  max: number
  connectionTimeoutMs: number
  /**
   * Longest wait for the answer to a statement run outside a transaction (run, all: key and allowlist lookups among
   * them), in ms; default connectionTimeoutMs. A server that stops answering on an open connection then fails the
   * statement as unreachable (and #reach refuses the others at once) instead of holding every request as long as it
   * is silent. Transactions (history batches, migrations) and history searches are not bounded by it.
   */
  queryTimeoutMs?: number
  /** Receives errors of idle pooled connections (already sanitized); without it they are dropped, not thrown. */
  onError?: (err: StoreError) => void
}

// SQLSTATE classes meaning the server or the connection is unavailable, not that the query is wrong.
const kUnavailableSqlState = /^(08|53|57P0[1-3])/
const kUnavailableErrno = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'ETIMEDOUT', 'EAI_AGAIN', 'EHOSTUNREACH', 'EPIPE'])

/**
 * Wraps a pg error: message scrubbed, SQLSTATE kept, and the original as `cause` unless it mentions the URL or
 * password (Node's ERR_INVALID_URL carries the whole string in `input`), in which case a scrubbed copy stands in.
 */
export function postgresError (err: unknown, secrets: readonly string[]): StoreError {
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

/** A query config with pg's per-query read timeout, which its type declarations leave out. */
function boundedQuery (text: string, values: unknown[], timeoutMs: number): pg.QueryConfig {
  const config: pg.QueryConfig & { query_timeout: number } = { text, values, query_timeout: timeoutMs }
  return config
}

/** One store's pool. */
export class PostgresPort implements SqlPort {
  readonly #pool: pg.Pool
  readonly #secrets: string[]
  /** The schema, quoted. */
  readonly #s: string
  /** Portable SQL already rewritten for this schema (a fixed set of statements). */
  readonly #sql = new Map<string, string>()
  #closed = false
  #ending: Promise<void> | null = null
  /** The last attempt found the server unreachable: no answer at all (cleared by the next one that reaches it). */
  #down = false
  /** An attempt is in flight while #down: the others fail at once (#reach). */
  #probing = false
  readonly #queryTimeoutMs: number

  constructor (options: PostgresPortOptions) {
    this.#s = `"${options.schema}"`
    this.#secrets = secretsOf(options.url)
    this.#queryTimeoutMs = options.queryTimeoutMs ?? options.connectionTimeoutMs
    this.#pool = new pg.Pool({
      connectionString: options.url,
      max: options.max,
      connectionTimeoutMillis: options.connectionTimeoutMs,
      application_name: 'ioc-verdict'
    })
    // An idle pooled connection that dies emits 'error' on the pool; unhandled, it would crash the process.
    const onError = options.onError
    this.#pool.on('error', (err) => { onError?.(postgresError(err, this.#secrets)) })
  }

  assertOpen (): void {
    if (this.#closed) throw new StoreError('STORE_CLOSED', 'the store is closed')
  }

  /**
   * A query in PostgreSQL's own SQL, on any pooled connection; with `timeoutMs`, its answer awaited at most that long:
   * pg fails it ("Query read timeout", unreachable) and the pool drops that connection, whose server may still answer
   * the statement late.
   */
  async query<R extends pg.QueryResultRow> (sql: string, params: unknown[] = [], timeoutMs?: number): Promise<pg.QueryResult<R>> {
    this.assertOpen()
    return await this.#reach(async () => await this.#pool.query<R>(timeoutMs === undefined ? { text: sql, values: params } : boundedQuery(sql, params, timeoutMs)))
  }

  /**
   * Runs `attempt` (a query or a connection from the pool), its errors as StoreError. Once an attempt has found the
   * server unreachable, the next one goes ahead alone: while it is in flight, the others fail at once with
   * STORE_UNAVAILABLE, so a server that does not answer (a network that drops packets) costs one caller the
   * connection timeout, not every request of the meantime (and their connection attempts do not pile up in the
   * pool's queue). The first attempt that reaches the server, with any answer, lets everyone through again.
   */
  async #reach<T> (attempt: () => Promise<T>): Promise<T> {
    const probe = this.#down
    if (probe) {
      if (this.#probing) throw new StoreError('STORE_UNAVAILABLE', 'PostgreSQL unavailable: the last attempt failed and the next one is in progress')
      this.#probing = true
    }
    try {
      const result = await attempt()
      this.#down = false
      return result
    } catch (err) {
      const e = postgresError(err, this.#secrets)
      // Unreachable: no answer at all (refused, timed out, cut). A server that answered with an error state (one
      // connection terminated, too many clients) is reached, and other connections may still work.
      this.#down = e.code === 'STORE_UNAVAILABLE' && (e as StoreError & { sqlState?: string }).sqlState === undefined
      throw e
    } finally {
      if (probe) this.#probing = false
    }
  }

  /** Runs `fn` in one transaction on one pooled connection; a connection whose ROLLBACK failed is not reused. */
  async withTransaction<T> (fn: (client: pg.PoolClient) => Promise<T>, begin = 'BEGIN'): Promise<T> {
    const client = await this.#connect()
    let broken = false
    try {
      await client.query(begin)
      const result = await fn(client)
      await client.query('COMMIT')
      return result
    } catch (err) {
      try {
        await client.query('ROLLBACK')
      } catch {
        broken = true // the connection is unusable: destroy it rather than return it to the pool
      }
      throw postgresError(err, this.#secrets)
    } finally {
      client.release(broken)
    }
  }

  /** Runs `fn` on one pooled connection (no transaction of its own); a connection that failed is not reused. */
  async withSession<T> (fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.#connect()
    let broken = false
    try {
      return await fn(client)
    } catch (err) {
      broken = true
      throw postgresError(err, this.#secrets)
    } finally {
      client.release(broken)
    }
  }

  async run (sql: string, params: unknown[]): Promise<number> {
    return (await this.query(this.#dialect(sql), params, this.#queryTimeoutMs)).rowCount ?? 0
  }

  async all<T> (sql: string, params: unknown[]): Promise<T[]> {
    return (await this.query(this.#dialect(sql), params, this.#queryTimeoutMs)).rows as T[]
  }

  /** Nothing outside a transaction (SqlPort.turns). */
  async turns (_key: string): Promise<void> {}

  async transaction<T> (fn: (tx: SqlPort) => Promise<T>, mode: TransactionMode = 'write'): Promise<T> {
    // A snapshot: every statement sees the same committed data (READ COMMITTED takes a new snapshot per statement).
    const begin = mode === 'snapshot' ? 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY' : 'BEGIN'
    // The callback's own errors pass as they are (its statements' are StoreError already); withTransaction wraps
    // everything else, as pg's errors of BEGIN and COMMIT.
    let own: { err: unknown } | null = null
    try {
      return await this.withTransaction(async (client) => {
        try {
          return await fn(this.#clientPort(client))
        } catch (err) {
          own = { err }
          throw err
        }
      }, begin)
    } catch (err) {
      throw own === null ? err : (own as { err: unknown }).err
    }
  }

  /** The port of a transaction's connection. */
  #clientPort (client: pg.PoolClient): SqlPort {
    const one = async <R extends pg.QueryResultRow>(sql: string, params: unknown[]): Promise<pg.QueryResult<R>> => {
      try {
        return await client.query<R>(this.#dialect(sql), params)
      } catch (err) {
        throw postgresError(err, this.#secrets)
      }
    }
    const tx: SqlPort = {
      run: async (sql, params) => (await one(sql, params)).rowCount ?? 0,
      all: async <R>(sql: string, params: unknown[]) => (await one(sql, params)).rows as R[],
      transaction: async (inner) => await inner(tx),
      // Two int4 keys: their space does not overlap the bigint keys the migrations, history and leader locks use.
      turns: async (key) => { await one('SELECT pg_advisory_xact_lock(1769369190, hashtext(?))', [key]) },
      assertOpen: () => { this.assertOpen() },
      list: (values) => this.list(values)
    }
    return tx
  }

  list (values: readonly string[] | null): readonly string[] | null {
    return values
  }

  /** Ends the pool after in-flight queries; idempotent. */
  async close (): Promise<void> {
    this.#closed = true
    this.#ending ??= this.#pool.end().catch(() => {})
    await this.#ending
  }

  #dialect (sql: string): string {
    let out = this.#sql.get(sql)
    if (out === undefined) {
      out = dialectSql(sql, (name) => `${this.#s}.${name}`, '"C"', true)
      this.#sql.set(sql, out)
    }
    return out
  }

  /**
   * A pooled connection, with a listener for its 'error' event while it is checked out (the pool listens only while
   * it is idle): a connection lost mid-query fails that query, and must not also crash the process.
   */
  async #connect (): Promise<pg.PoolClient> {
    this.assertOpen()
    const client = await this.#reach(async () => await this.#pool.connect())
    const ignore = (): void => {}
    client.on('error', ignore)
    const release = client.release
    client.release = (err?: Error | boolean) => {
      client.removeListener('error', ignore)
      release.call(client, err)
    }
    return client
  }
}
