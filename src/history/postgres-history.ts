/**
 * How the PostgreSQL store keeps history (src/store/postgres.ts delegates its history methods here): the scoring
 * threads' encoded parts in blocks, as the SQLite store keeps them (blocks.ts), in three tables partitioned by UTC day
 * (declarative range partitioning), so that retention drops a day's partitions whole instead of deleting rows.
 *
 *   history_requests  a request's envelope, its filter columns and its items' id range [first_item, last_item];
 *                     partitioned by `date`, the request's timestamp
 *   history_parts     one row per part: items id .. id + n - 1 of one request, the part's bytes stored uncompressed;
 *                     partitioned by `day`, the request's UTC day
 *   history_blocks    one row per block (a tenant's parts of one day: filter, date range, type mask); by `day`
 *
 * Writing: each batch is one transaction that reserves its item, request and block ids (sequences, under a
 * transaction-scoped advisory lock, so ids follow insertion order, which the search order and item ranges rely on),
 * sends its parts and request rows with binary COPY (postgres-copy.ts), rewrites the blocks they joined, adds the
 * usage counters and saves the journal position. A 10,000-indicator bulk is a few rows, not 10,000 and their indexes.
 * Every run of a batch's parts with one uid becomes a request row of its own: a request the writer cut across two
 * batches (it does not: it reads whole requests) would be two rows with the same envelope, which searches return in
 * the same order as one.
 *
 * Partitions: a day's three partitions are created together, in a short transaction of their own (creating a
 * partition locks its parent table, so never inside a batch's transaction), for the day of each batch and the day
 * after, so that the first batch after midnight finds them made. Retention drops the three partitions of each day
 * that ended before the cutoff.
 *
 * Upgrade: schema version 8 renamed the tables of one row per indicator (history, history_requests) to history_rows
 * and history_rows_requests; moveRows() turns them into parts and blocks, ids kept, in transactions of a bounded
 * number of items that each also advance history_rows_moved, so an interrupted move resumes where it stopped with
 * nothing lost or written twice. It then drops them.
 */
import type pg from 'pg'
import { HistoryItems, type HistoryPart } from './block.ts'
import { addToBlock, blockIsFull, kBlockItems, newBlock, type BlockState } from './blocks.ts'
import { CopyRows, copyRows } from './postgres-copy.ts'
import { requestRuns, usageDeltas, type HistoryRequestFields, type UsageDelta } from './rows.ts'
import { StoreError } from '../errors.ts'
import { utcDayOf, utcDayStartMs } from './utc-day.ts'

/** What the history half needs of the store: queries and transactions with errors already translated. */
export interface PgPort {
  /** The schema's name (unquoted, a plain lowercase identifier). */
  schema: string
  query: <R extends pg.QueryResultRow>(sql: string, params?: unknown[]) => Promise<pg.QueryResult<R>>
  transaction: <T>(fn: (client: pg.PoolClient) => Promise<T>) => Promise<T>
  /** One connection of the pool for the whole callback (work that holds a session-level lock). */
  session: <T>(fn: (client: pg.PoolClient) => Promise<T>) => Promise<T>
}

/** A journal's position, saved in the batch's transaction (store/types.ts JournalMark). */
interface Mark { journal: string, position: number }

/** A request row to write. */
interface RequestRow { id: number, fields: HistoryRequestFields, first: number, last: number }

/** A part row to write; `block` is set when the part joins a block. */
interface PartRow { day: string, id: number, n: number, req: number, tenant: string, ts: number, part: Uint8Array, block: DayBlock | null }

/** A block of one tenant and day while parts join it. */
interface DayBlock extends BlockState { tenant: string, day: string, stored: boolean, open: boolean }

/** An open block as read. */
interface OpenBlockRow { id: string, day: string, tenant: string, n: number, min_ts: string, max_ts: string, types: string, filter: Buffer }

/**
 * What a batch took under the writers' lock: the first of its reserved ids, the open blocks its parts join, and the
 * ids of blocks marked open that are not the newest of their tenant and day (left open by versions before 2026-11-27;
 * the batch closes them).
 */
interface Reserved { item: number, req: number, block: number, blocks: number, open: Map<string, DayBlock>, stale: DayBlock[] }

const kDayMs = 86_400_000
/** Longest a partition's creation or removal waits for the locks it needs (running searches, a batch), in ms. */
const kDdlLockTimeoutMs = 5_000
/** Items per transaction of the move from rows to parts (PostgresStoreOptions.moveBatch). */
export const kMoveBatch = 50_000
/** Requests read per statement by the move. */
const kMoveRequests = 1_000
const kPartitionPattern = /^history_requests_d(\d{4})(\d{2})(\d{2})$/

/** The UTC day after `day`. */
function nextDay (day: string): string {
  return utcDayOf(utcDayStartMs(day) + kDayMs)
}

/**
 * Schema version 8: the row tables move aside (their secondary indexes dropped, their key constraints renamed so the
 * new tables may use the names), the partitioned tables and the id sequences (continuing the old ones) are created.
 */
export function partsSchema (s: string): string {
  return `
    ALTER TABLE ${s}.history RENAME TO history_rows;
    ALTER TABLE ${s}.history_rows RENAME CONSTRAINT history_pkey TO history_rows_pkey;
    ALTER TABLE ${s}.history_requests RENAME TO history_rows_requests;
    ALTER TABLE ${s}.history_rows_requests RENAME CONSTRAINT history_requests_pkey TO history_rows_requests_pkey;
    DROP INDEX ${s}.history_requests_uid, ${s}.history_requests_tenant_date, ${s}.history_requests_tenant_apikey,
      ${s}.history_requests_tenant_user, ${s}.history_requests_tenant_bulk, ${s}.history_requests_date,
      ${s}.history_tenant_itype, ${s}.history_tenant_ivalue;
    -- Requests of history_rows_requests with an id up to this one are in parts (moveRows).
    CREATE TABLE ${s}.history_rows_moved (request bigint NOT NULL);
    INSERT INTO ${s}.history_rows_moved VALUES (0);

    CREATE SEQUENCE ${s}.history_item_ids;
    CREATE SEQUENCE ${s}.history_request_ids;
    CREATE SEQUENCE ${s}.history_block_ids;
    -- New ids continue above the old ones (ids the old sequences handed out, or any row inserted with its own id).
    SELECT setval('${s}.history_item_ids', greatest((SELECT coalesce(max(id), 0) FROM ${s}.history_rows),
      (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM ${s}.history_id_seq)) + 1, false);
    SELECT setval('${s}.history_request_ids', greatest((SELECT coalesce(max(id), 0) FROM ${s}.history_rows_requests),
      (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM ${s}.history_requests_id_seq)) + 1, false);

    CREATE TABLE ${s}.history_requests (
      id bigint NOT NULL,
      uid text NOT NULL,                    -- the writer's request identifier (not unique: see postgres-history.ts)
      date timestamptz NOT NULL,
      tenant text NOT NULL,
      request_id text NOT NULL,
      bulk_request_id text,
      http_status integer NOT NULL,
      auth_type text NOT NULL,
      apikey text NOT NULL,
      user_id text,
      envelope text NOT NULL,               -- JSON object of the request-level members of each record
      first_item bigint NOT NULL,           -- the items' id range, every id held by one of its parts
      last_item bigint NOT NULL,
      PRIMARY KEY (id, date)
    ) PARTITION BY RANGE (date);
    -- Every search is tenant-scoped and ordered by (date, id) descending: each index starts with tenant and ends with
    -- (date, id), so a filter is an index range read backwards, partitions newest first, and LIMIT stops it early.
    CREATE INDEX history_requests_tenant_date ON ${s}.history_requests (tenant, date, id);
    CREATE INDEX history_requests_tenant_apikey ON ${s}.history_requests (tenant, apikey, date, id);
    CREATE INDEX history_requests_tenant_user ON ${s}.history_requests (tenant, user_id, date, id) WHERE user_id IS NOT NULL;
    CREATE INDEX history_requests_tenant_bulk ON ${s}.history_requests (tenant, date, id) WHERE bulk_request_id IS NULL;

    CREATE TABLE ${s}.history_parts (
      day date NOT NULL,                    -- the request's UTC day
      id bigint NOT NULL,                   -- the first item's id: the part holds items id .. id + n - 1
      n integer NOT NULL,
      req bigint NOT NULL,                  -- history_requests.id (every item of a part belongs to one request)
      block bigint NOT NULL,                -- history_blocks.id
      part bytea NOT NULL,                  -- the encoded items (history/block.ts)
      PRIMARY KEY (id, day)
    ) PARTITION BY RANGE (day);
    -- Stored as they are, like SQLite's: compressing them cost the server more than writing their bytes.
    ALTER TABLE ${s}.history_parts ALTER COLUMN part SET STORAGE EXTERNAL;
    CREATE INDEX history_parts_block ON ${s}.history_parts (block, id);

    CREATE TABLE ${s}.history_blocks (
      day date NOT NULL,
      id bigint NOT NULL,
      tenant text NOT NULL,
      n integer NOT NULL,                   -- items added
      min_ts bigint NOT NULL,               -- date range (epoch ms) of the requests of its parts
      max_ts bigint NOT NULL,
      types bigint NOT NULL,                -- typeBit of every item, or-ed
      open boolean NOT NULL,                -- while new parts join it (one open block per tenant and day)
      filter bytea NOT NULL,                -- value filter (block.ts filterAdd; get_bit numbers its bits)
      PRIMARY KEY (id, day)
    ) PARTITION BY RANGE (day);
    -- Value and type searches read a tenant's blocks newest first; a block's newest item bounds the rest of it.
    ALTER TABLE ${s}.history_blocks ALTER COLUMN filter SET STORAGE EXTERNAL;
    CREATE INDEX history_blocks_tenant ON ${s}.history_blocks (tenant, max_ts, id);
    CREATE INDEX history_blocks_open ON ${s}.history_blocks (tenant, day) WHERE open;
  `
}

/** The PostgreSQL store's history: writes, partitions, retention and the move from rows. */
export class PostgresHistory {
  readonly #port: PgPort
  /** The schema, quoted. */
  readonly #s: string
  /** Days whose partitions this store made or found (a purge elsewhere may drop one: see write()). */
  readonly #days = new Set<string>()

  constructor (port: PgPort) {
    this.#port = port
    this.#s = `"${port.schema}"`
  }

  /** Makes the partitions of `days` that do not exist yet (each day's three in one short transaction). */
  async ensureDays (days: Iterable<string>): Promise<void> {
    const missing = [...new Set(days)].filter((d) => !this.#days.has(d))
    if (missing.length === 0) return
    await this.#port.transaction(async (c) => await this.#createDays(c, missing))
    for (const d of missing) this.#days.add(d)
  }

  async #createDays (c: pg.PoolClient, days: readonly string[]): Promise<void> {
    const s = this.#s
    await c.query(`SET LOCAL lock_timeout = ${kDdlLockTimeoutMs}`)
    // Instances making the same day serialize here (CREATE TABLE IF NOT EXISTS alone can race).
    await c.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`ioc-verdict:history-days:${this.#port.schema}`])
    const existing = new Set(await this.partitionDays(c))
    const lz4 = await lz4Available(c)
    for (const day of days) {
      if (existing.has(day)) continue
      const d = day.replaceAll('-', '')
      const next = nextDay(day)
      await c.query(
        `CREATE TABLE ${s}.history_requests_d${d} PARTITION OF ${s}.history_requests FOR VALUES FROM ('${day} 00:00:00+00') TO ('${next} 00:00:00+00');` +
        `CREATE TABLE ${s}.history_parts_d${d} PARTITION OF ${s}.history_parts FOR VALUES FROM ('${day}') TO ('${next}');` +
        (lz4 ? `ALTER TABLE ${s}.history_parts_d${d} ALTER COLUMN part SET STORAGE EXTENDED, ALTER COLUMN part SET COMPRESSION lz4;` : '') +
        `CREATE TABLE ${s}.history_blocks_d${d} PARTITION OF ${s}.history_blocks FOR VALUES FROM ('${day}') TO ('${next}');`)
    }
  }

  /** The days that have partitions, ascending (on `c`, or on a connection of the pool). */
  async partitionDays (c: pg.PoolClient | null = null): Promise<string[]> {
    const sql = 'SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid ' +
      `WHERE i.inhparent = '${this.#s}.history_requests'::regclass`
    const { rows } = c === null ? await this.#port.query<{ name: string }>(sql) : await c.query<{ name: string }>(sql)
    const days: string[] = []
    for (const r of rows) {
      const m = kPartitionPattern.exec(r.name)
      if (m !== null) days.push(`${m[1]}-${m[2]}-${m[3]}`)
    }
    return days.sort()
  }

  /**
   * Writes parts with their usage counters in one transaction, and the journal mark when given. Parts get
   * consecutive item ids in order; each run of parts with one uid becomes a request row. `meanwhile` runs once the
   * commit is sent, while the server writes the batch (Store.writeHistoryParts).
   */
  async write (parts: readonly HistoryPart[], mark: Mark | undefined, meanwhile?: () => void): Promise<void> {
    const todo = parts.filter((p) => p.count > 0)
    if (todo.length === 0 && mark === undefined) return
    const days = new Set<string>()
    for (const p of todo) days.add(p.day).add(nextDay(p.day))
    let pending = meanwhile
    const once = (): void => {
      const fn = pending
      pending = undefined
      fn?.()
    }
    for (let attempt = 1; ; attempt++) {
      await this.ensureDays(days)
      try {
        await this.#write(todo, mark, once)
        return
      } catch (err) {
        // 23514: no partition for a row. Another instance's purge dropped a day this store had seen: look again.
        if ((err as { sqlState?: string }).sqlState !== '23514' || attempt > 1) throw err
        this.#days.clear()
      }
    }
  }

  /**
   * One batch's transaction, in four round trips: begin, save the mark, take the writers' lock, reserve the ids and
   * read the open blocks; COPY the parts; COPY the request rows; write the blocks, add the usage counters and commit.
   * Statements other than the COPYs carry their values as literals (escaped), so that several go in one round trip.
   */
  async #write (todo: readonly HistoryPart[], mark: Mark | undefined, meanwhile: (() => void) | undefined): Promise<void> {
    const s = this.#s
    await this.#port.session(async (c) => {
      const begin = ['BEGIN']
      if (mark !== undefined) {
        if (!Number.isSafeInteger(mark.position)) throw new StoreError('INVALID_REQUEST', 'a journal position must be an integer')
        begin.push(`INSERT INTO ${s}.history_journal (journal, position) VALUES (${c.escapeLiteral(mark.journal)}, ${mark.position}) ` +
          'ON CONFLICT (journal) DO UPDATE SET position = excluded.position')
      }
      if (todo.length === 0) {
        await inTransaction(c, begin.join('; '), async () => null, meanwhile)
        return
      }
      const runs = requestRuns(todo)
      const items = todo.reduce((n, p) => n + p.count, 0)
      begin.push(this.#lockSql(c), this.#reserveSql(c, todo, items, { requests: runs.length }))
      await inTransaction(c, begin.join('; '), async (head) => {
        const reserved = reservedOf(head)
        let item = reserved.item
        let req = reserved.req
        const requests: RequestRow[] = []
        const stored: PartRow[] = []
        for (const run of runs) {
          const first = item
          for (let k = run.start; k < run.end; k++) {
            const p = todo[k] as HistoryPart
            stored.push({ day: p.day, id: item, n: p.count, req, tenant: p.tenant, ts: p.ts, part: p.part, block: null })
            item += p.count
          }
          requests.push({ id: req++, fields: todo[run.start] as HistoryPart, first, last: item - 1 })
        }
        return await this.#store(c, requests, stored, reserved, usageDeltas(todo))
      }, meanwhile)
    })
  }

  /** SQL taking the lock that serializes batches (and purges) of every instance on the schema. */
  #lockSql (c: pg.PoolClient): string {
    return `SELECT pg_advisory_xact_lock(hashtext(${c.escapeLiteral(`ioc-verdict:history:${this.#port.schema}`)}))`
  }

  /**
   * SQL run under the writers' lock that reserves enough block ids for any way `parts` (of `items` items) can fill
   * blocks and, with `ids`, `items` item ids and `ids.requests` request ids (consecutive), and reads the open blocks
   * of the parts' tenants and days (reservedOf reads its rows).
   */
  #reserveSql (c: pg.PoolClient, parts: ReadonlyArray<{ tenant: string, day: string }>, items: number, ids: { requests: number } | null): string {
    const s = this.#s
    const keys = new Map<string, { tenant: string, day: string }>()
    for (const p of parts) keys.set(`${p.tenant}\u0000${p.day}`, { tenant: p.tenant, day: p.day })
    // A tenant and day starts a block with its first part, then whenever a part does not fit: two blocks in a row hold
    // more than kBlockItems items. Ids reserved and not used leave gaps, which nothing minds.
    const blocks = 2 * keys.size + Math.ceil(2 * items / kBlockItems)
    const reserved = [`${reserve(`${s}.history_block_ids`, blocks)} AS block`]
    if (ids !== null) reserved.push(`${reserve(`${s}.history_item_ids`, items)} AS item`, `${reserve(`${s}.history_request_ids`, ids.requests)} AS req`)
    const tenants = [...keys.values()].map((k) => c.escapeLiteral(k.tenant)).join(', ')
    const days = [...keys.values()].map((k) => c.escapeLiteral(k.day)).join(', ')
    return `SELECT r.*, ${blocks} AS blocks, b.id, b.day::text AS day, b.tenant, b.n, b.min_ts, b.max_ts, b.types, b.filter ` +
      `FROM (SELECT ${reserved.join(', ')}) r LEFT JOIN LATERAL (SELECT * FROM ${s}.history_blocks WHERE open ` +
      `AND (tenant, day) IN (SELECT * FROM unnest(ARRAY[${tenants}]::text[], ARRAY[${days}]::date[]))) b ON true ORDER BY b.id`
  }

  /**
   * Stores request rows and part rows whose ids are set: each part joins its tenant's open block of its day (or
   * starts one), parts and requests go in with COPY. Returns the statement that writes back the blocks they joined
   * (and adds the usage counters, when given), for the caller to send with the transaction's end.
   */
  async #store (c: pg.PoolClient, requests: readonly RequestRow[], parts: PartRow[], reserved: Reserved, usage: readonly UsageDelta[] | null): Promise<string> {
    const s = this.#s
    const touched = new Map<number, DayBlock>()
    const current = new Map(reserved.open)
    /** Stored blocks to close that no part joins in this batch (their row is otherwise left as it is). */
    const closed = [...reserved.stale]
    let nextBlock = reserved.block
    for (const p of parts) {
      const key = `${p.tenant}\u0000${p.day}`
      let b = current.get(key)
      if (b === undefined || blockIsFull(b, p.n)) {
        if (b !== undefined) {
          b.open = false
          if (!touched.has(b.id)) closed.push(b)
        }
        if (nextBlock >= reserved.block + reserved.blocks) throw new Error('more blocks than reserved')
        b = { ...newBlock(nextBlock++), tenant: p.tenant, day: p.day, stored: false, open: true }
        current.set(key, b)
      }
      touched.set(b.id, b)
      p.block = b
      addToBlock(b, p.part, p.n, p.ts)
    }
    const partRows = new CopyRows()
    for (const p of parts) partRows.row(6).date(p.day).int8(p.id).int4(p.n).int8(p.req).int8((p.block as DayBlock).id).bytea(p.part)
    await copyRows(c, `${s}.history_parts (day, id, n, req, block, part)`, partRows)
    const requestRows = new CopyRows()
    for (const r of requests) {
      const f = r.fields
      requestRows.row(13).int8(r.id).text(f.uid).timestamptz(f.ts).text(f.tenant).text(f.requestId).text(f.bulkRequestId).int4(f.httpStatus)
        .text(f.authType).text(f.apikey).text(f.userId).text(f.envelope).int8(r.first).int8(r.last)
    }
    await copyRows(c, `${s}.history_requests (id, uid, date, tenant, request_id, bulk_request_id, http_status, auth_type, apikey, user_id, ` +
      'envelope, first_item, last_item)', requestRows)
    const lit = (v: string): string => c.escapeLiteral(v)
    const values = [...touched.values()].map((b) => `(${lit(b.day)}::date, ${b.id}, ${lit(b.tenant)}, ${b.n}, ${b.minTs}, ${b.maxTs}, ${b.types}, ` +
      `${b.open && b.n < kBlockItems}, decode('${b.filter.toString('hex')}', 'hex'))`)
    const sql = `INSERT INTO ${s}.history_blocks (day, id, tenant, n, min_ts, max_ts, types, open, filter) VALUES ${values.join(', ')} ` +
      'ON CONFLICT (id, day) DO UPDATE SET n = excluded.n, min_ts = excluded.min_ts, max_ts = excluded.max_ts, types = excluded.types, ' +
      'open = excluded.open, filter = excluded.filter'
    // A block the batch's parts did not fit in is closed without rewriting its filter: left open, it would be read
    // back (filter and all) by every later batch of its tenant and day.
    const close = closed.length === 0
      ? ''
      : `UPDATE ${s}.history_blocks SET open = false WHERE open AND (id, day) IN (SELECT * FROM unnest(` +
        `ARRAY[${closed.map((b) => b.id).join(', ')}]::bigint[], ARRAY[${closed.map((b) => lit(b.day)).join(', ')}]::date[])); `
    if (usage === null || usage.length === 0) return close + sql
    // Deltas are sorted, so concurrent batches lock counter rows in the same order and cannot deadlock.
    return `${close}WITH blocks AS (${sql}) INSERT INTO ${s}.usage AS u (tenant, day, key_id, count) SELECT * FROM unnest(` +
      `ARRAY[${usage.map((d) => lit(d.tenant)).join(', ')}]::text[], ARRAY[${usage.map((d) => lit(d.day)).join(', ')}]::date[], ` +
      `ARRAY[${usage.map((d) => lit(d.keyId)).join(', ')}]::text[], ARRAY[${usage.map((d) => d.count).join(', ')}]::bigint[]) ` +
      'ON CONFLICT (tenant, day, key_id) DO UPDATE SET count = u.count + excluded.count'
  }

  /**
   * Drops the partitions of every day that ended at or before `before`, oldest first, and returns the number of
   * records they held. Each day goes in a transaction of its own that waits for running batches (the writers' lock)
   * and at most kDdlLockTimeoutMs for running searches; a day it could not drop is dropped by the next purge.
   */
  async purge (before: Date): Promise<number> {
    const cut = utcDayOf(before.getTime())
    const s = this.#s
    let total = 0
    for (const day of (await this.partitionDays()).filter((d) => d < cut)) {
      const d = day.replaceAll('-', '')
      total += await this.#port.transaction(async (c) => {
        await c.query(this.#lockSql(c))
        await c.query(`SET LOCAL lock_timeout = ${kDdlLockTimeoutMs}`)
        const { rows } = await c.query<{ n: string }>(`SELECT coalesce(sum(n), 0) AS n FROM ${s}.history_parts_d${d}`)
        await c.query(`DROP TABLE ${s}.history_requests_d${d}, ${s}.history_parts_d${d}, ${s}.history_blocks_d${d}`)
        return Number(rows[0]?.n ?? 0)
      })
      this.#days.delete(day)
    }
    return total
  }

  /**
   * Moves the rows of schema version 7 (history_rows, history_rows_requests) into parts, `batch` items or so per
   * transaction, each advancing history_rows_moved in the same transaction, then drops them. Instances starting
   * together wait on one lock, so one of them moves and the others find nothing left; usage counters stay as they
   * are (they counted these records when they were written).
   */
  async moveRows (batch: number = kMoveBatch): Promise<void> {
    const s = this.#s
    const present = async (c: pg.PoolClient): Promise<boolean> =>
      (await c.query<{ present: boolean }>(`SELECT to_regclass('${s}.history_rows') IS NOT NULL AS present`)).rows[0]?.present === true
    await this.#port.session(async (c) => {
      if (!await present(c)) return
      const lock = `ioc-verdict:history-move:${this.#port.schema}`
      await c.query('SELECT pg_advisory_lock(hashtext($1))', [lock])
      try {
        while (await present(c)) {
          const chunk = await this.#readRows(c, batch)
          if (chunk === null) {
            await inTransaction(c, `BEGIN; DROP TABLE ${s}.history_rows, ${s}.history_rows_requests, ${s}.history_rows_moved`, async () => null)
            break
          }
          // Partitions before the transaction, as for live batches.
          const missing = [...new Set(chunk.parts.map((p) => p.day))].filter((d) => !this.#days.has(d))
          if (missing.length > 0) {
            await inTransaction(c, 'BEGIN', async () => { await this.#createDays(c, missing); return null })
            for (const d of missing) this.#days.add(d)
          }
          const items = chunk.parts.reduce((n, p) => n + p.n, 0)
          await inTransaction(c, `BEGIN; ${this.#lockSql(c)}; ${this.#reserveSql(c, chunk.parts, items, null)}`, async (head) =>
            `${await this.#store(c, chunk.requests, chunk.parts, reservedOf(head), null)}; UPDATE ${s}.history_rows_moved SET request = ${chunk.last}`)
        }
      } finally {
        await c.query('SELECT pg_advisory_unlock(hashtext($1))', [lock]).catch(() => {})
      }
    })
  }

  /** The next rows to move, as request and part rows with their own ids; null when every row is moved. */
  async #readRows (c: pg.PoolClient, batch: number): Promise<{ requests: RequestRow[], parts: PartRow[], last: number } | null> {
    const s = this.#s
    const { rows: [moved] } = await c.query<{ request: string }>(`SELECT request FROM ${s}.history_rows_moved`)
    const { rows: found } = await c.query<RowRequest>(
      'SELECT id, uid, date, tenant, request_id, bulk_request_id, http_status, auth_type, apikey, user_id, envelope, first_item, last_item ' +
      `FROM ${s}.history_rows_requests WHERE id > $1 ORDER BY id LIMIT ${kMoveRequests}`, [moved?.request ?? 0])
    if (found.length === 0) return null
    const chosen: RowRequest[] = []
    let items = 0
    for (const r of found) {
      chosen.push(r)
      items += Number(r.last_item) - Number(r.first_item) + 1
      if (items >= batch) break
    }
    // Each request's items by its id range and its id, so an item can only go to its own request.
    const { rows: rowItems } = await c.query<RowItem>(
      'SELECT h.id, h.req, h.indicator_type, h.indicator_value, h.indicator_normalized, h.item ' +
      `FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS q(req, first, last) JOIN ${s}.history_rows h ` +
      'ON h.id >= q.first AND h.id <= q.last AND h.req = q.req ORDER BY h.id',
      [chosen.map((r) => r.id), chosen.map((r) => r.first_item), chosen.map((r) => r.last_item)])
    const byRequest = new Map<string, RowItem[]>()
    for (const it of rowItems) {
      let list = byRequest.get(it.req)
      if (list === undefined) byRequest.set(it.req, list = [])
      list.push(it)
    }
    const requests: RequestRow[] = []
    const parts: PartRow[] = []
    for (const r of chosen) {
      const list = byRequest.get(r.id)
      if (list === undefined) continue // no items left (purged): nothing a search could return
      const ts = r.date.getTime()
      const fields: HistoryRequestFields = {
        uid: r.uid,
        ts,
        date: r.date.toISOString(),
        day: utcDayOf(ts),
        tenant: r.tenant,
        requestId: r.request_id,
        bulkRequestId: r.bulk_request_id,
        httpStatus: r.http_status,
        authType: r.auth_type,
        apikey: r.apikey,
        userId: r.user_id,
        envelope: r.envelope
      }
      requests.push({ id: Number(r.id), fields, first: Number(list[0]?.id), last: Number(list[list.length - 1]?.id) })
      // Parts of consecutive ids, at most kBlockItems items each.
      let start = 0
      for (let i = 1; i <= list.length; i++) {
        const prev = list[i - 1] as RowItem
        if (i < list.length && i - start < kBlockItems && Number((list[i] as RowItem).id) === Number(prev.id) + 1) continue
        const items = new HistoryItems(i - start)
        for (let k = start; k < i; k++) {
          const x = list[k] as RowItem
          items.add(x.indicator_type, x.indicator_value, x.indicator_normalized, x.item)
        }
        parts.push({ day: fields.day, id: Number((list[start] as RowItem).id), n: i - start, req: Number(r.id), tenant: r.tenant, ts, part: items.encode(), block: null })
        start = i
      }
    }
    return { requests, parts, last: Number((chosen[chosen.length - 1] as RowRequest).id) }
  }
}

/** A request row of schema version 7. */
interface RowRequest {
  id: string
  uid: string
  date: Date
  tenant: string
  request_id: string
  bulk_request_id: string | null
  http_status: number
  auth_type: string
  apikey: string
  user_id: string | null
  envelope: string
  first_item: string
  last_item: string
}

/** An item row of schema version 7. */
interface RowItem { id: string, req: string, indicator_type: string | null, indicator_value: string, indicator_normalized: string | null, item: string }

/**
 * SQL reserving `n` consecutive values of a sequence and giving the first: nextval, then setval past the rest. Atomic
 * with respect to other writers only under the writers' lock.
 */
function reserve (sequence: string, n: number): string {
  return `setval('${sequence}', nextval('${sequence}') + ${n} - 1) - ${n} + 1`
}

/**
 * Runs a transaction on a connection held for a session (errors are the caller's to translate): `begin` is BEGIN and
 * the statements that follow it at once (one round trip); `fn` gets their results and returns the transaction's last
 * statement, sent with COMMIT (one round trip), or null.
 */
async function inTransaction (c: pg.PoolClient, begin: string, fn: (head: pg.QueryResult[]) => Promise<string | null>,
  meanwhile?: () => void): Promise<void> {
  try {
    const head = await c.query(begin) as pg.QueryResult | pg.QueryResult[]
    const last = await fn(Array.isArray(head) ? head : [head])
    // After an error in the last statement the server skips COMMIT; the catch below rolls back.
    const committed = c.query(last === null ? 'COMMIT' : `${last}; COMMIT`)
    // The query is on the socket: the server writes (and syncs) the batch while the caller works.
    meanwhile?.()
    await committed
  } catch (err) {
    await c.query('ROLLBACK').catch(() => {})
    throw err
  }
}

/**
 * Whether the server can compress TOAST values with lz4 (PostgreSQL 14 and later, built with lz4). Day partitions of
 * history_parts then keep their parts lz4-compressed: about 58% of the bytes, so a batch writes that much less heap
 * and WAL, and it measured faster than parts stored as they are (docs/PERFORMANCE.md "History on PostgreSQL"; pglz,
 * the default method, cost more CPU than it saved). Reading them back is lz4's fast decompression; answers are the same.
 */
async function lz4Available (c: pg.PoolClient): Promise<boolean> {
  const { rows } = await c.query<{ lz4: boolean }>("SELECT 'lz4' = ANY (enumvals) AS lz4 FROM pg_settings WHERE name = 'default_toast_compression'")
  return rows[0]?.lz4 === true
}

/** What the reservation statement (#reserveSql, the last of `head`) returned. */
function reservedOf (head: readonly pg.QueryResult[]): Reserved {
  const rows = (head[head.length - 1]?.rows ?? []) as Array<{ item: string | undefined, req: string | undefined, block: string, blocks: number } & Partial<OpenBlockRow>>
  const first = rows[0]
  const open = new Map<string, DayBlock>()
  const stale: DayBlock[] = []
  // Ordered by id: were there two open blocks of one tenant and day, the newer one is taken and the older closed.
  for (const r of rows) {
    if (r.id === null || r.id === undefined) continue
    const b = r as OpenBlockRow
    const key = `${b.tenant}\u0000${b.day}`
    const older = open.get(key)
    if (older !== undefined) stale.push(older)
    open.set(key, {
      id: Number(b.id), n: b.n, minTs: Number(b.min_ts), maxTs: Number(b.max_ts), types: Number(b.types), filter: b.filter, tenant: b.tenant, day: b.day, stored: true, open: true
    })
  }
  return { item: Number(first?.item ?? 0), req: Number(first?.req ?? 0), block: Number(first?.block), blocks: Number(first?.blocks), open, stale }
}
