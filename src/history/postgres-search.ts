/**
 * History searches on PostgreSQL (tables: postgres-history.ts), with the same comparisons as SQLite's (blocks.ts
 * ItemMatcher), so that both stores return the same records in the same order with the same cursors.
 *
 * A value or type search reads the tenant's blocks newest first, the filter and type mask tested in SQL (get_bit on
 * the probe bits), then each candidate block's parts with their requests in one statement. Any other search walks the
 * tenant's requests newest first through a tenant-prefixed index and reads, for a group of them at a time, just the
 * parts that hold the items the page still needs (a request's items are one id range, every id in one of its parts).
 * Statements run outside a transaction: a search that meets a batch written meanwhile may return it, as it would a
 * moment later; a day dropped meanwhile is skipped.
 */
import type pg from 'pg'
import { filterProbeBits } from './block.ts'
import { ItemMatcher, kFilterBytes, newestFirst, PartItems, readsBlocks, type BlockItem, type FoundItem, type RequestInfo, type StoredPart } from './blocks.ts'
import type { Cursor, ValidFilters } from './rows.ts'
import { utcDayStartMs } from './utc-day.ts'

/** Blocks read per statement while a search scans blocks newest first. */
const kBlockPage = 64
/** Requests read per statement while a search walks requests newest first. */
const kRequestPage = 256
const kDayMs = 86_400_000

/** A statement and its parameters. */
export interface Statement { sql: string, params: unknown[] }

type Query = <R extends pg.QueryResultRow>(sql: string, params?: unknown[]) => Promise<pg.QueryResult<R>>

/** Request columns a search reads, as `r.*`. */
const kRequestColumns = 'r.id, r.date, r.envelope, r.user_id, r.apikey, r.bulk_request_id, r.auth_type, r.first_item, r.last_item'

interface RequestRow {
  id: string
  date: Date
  envelope: string
  user_id: string | null
  apikey: string
  bulk_request_id: string | null
  auth_type: string
  first_item: string
  last_item: string
}

/** A row of blockParts: a part, and its request's columns (null when the request is gone). */
type BlockPartRow = { part_id: string, n: number, part: Buffer } & { [K in keyof RequestRow]: RequestRow[K] | null }

function requestInfo (r: RequestRow): RequestInfo {
  return {
    id: Number(r.id),
    ts: r.date.getTime(),
    envelope: r.envelope,
    user_id: r.user_id,
    apikey: r.apikey,
    bulk_request_id: r.bulk_request_id,
    auth_type: r.auth_type,
    first_item: Number(r.first_item),
    last_item: Number(r.last_item)
  }
}

/** Numbered parameters of one statement. */
class Params {
  readonly list: unknown[] = []
  p (value: unknown): string {
    this.list.push(value)
    return `$${this.list.length}`
  }
}

/** The blocks of a value or type search, newest first, after (afterTs, afterId). */
function blockScan (s: string, tenant: string, m: ItemMatcher, afterTs: number, afterId: number): Statement {
  const q = new Params()
  const where = [`tenant = ${q.p(tenant)}`, `max_ts >= ${q.p(m.gte)}`, `min_ts < ${q.p(m.lt)}`, `min_ts <= ${q.p(m.cursor?.ts ?? Number.MAX_SAFE_INTEGER)}`]
  if (m.wantType !== null) where.push(`(types & ${q.p(m.typeBit)}) <> 0`)
  if (m.want !== null) {
    for (const bit of filterProbeBits(kFilterBytes, m.h1, m.h2)) where.push(`get_bit(filter, ${q.p(bit)}) = 1`)
  }
  where.push(`(max_ts, id) < (${q.p(afterTs)}, ${q.p(afterId)})`)
  return {
    sql: `SELECT id, day::text AS day, max_ts FROM ${s}.history_blocks WHERE ${where.join(' AND ')} ORDER BY max_ts DESC, id DESC LIMIT ${kBlockPage}`,
    params: q.list
  }
}

/** A block's parts, each with its request (null when gone). */
function blockParts (s: string, id: number, day: string): Statement {
  const start = utcDayStartMs(day)
  return {
    sql: `SELECT p.id AS part_id, p.n, p.part, ${kRequestColumns} FROM ${s}.history_parts p LEFT JOIN ${s}.history_requests r ` +
      'ON r.id = p.req AND r.date >= $3 AND r.date < $4 WHERE p.block = $1 AND p.day = $2 ORDER BY p.id',
    params: [id, day, new Date(start).toISOString(), new Date(start + kDayMs).toISOString()]
  }
}

/** The requests of a search without an indicator filter, newest first, after (afterDate, afterId). */
function requestWalk (s: string, tenant: string, f: ValidFilters, afterDate: string, afterId: number): Statement {
  const q = new Params()
  const where = [`r.tenant = ${q.p(tenant)}`]
  if (f.userId !== null) where.push(`r.user_id = ${q.p(f.userId)}`)
  if (f.apikey !== null) where.push(`r.apikey = ${q.p(f.apikey)}`)
  if (f.excludeBulk) where.push('r.bulk_request_id IS NULL')
  if (f.authType !== null) where.push(`r.auth_type = ${q.p(f.authType)}`)
  if (f.gteMs !== null) where.push(`r.date >= ${q.p(new Date(f.gteMs).toISOString())}`)
  if (f.ltMs !== null) where.push(`r.date < ${q.p(new Date(f.ltMs).toISOString())}`)
  // A row comparison is one btree range condition on (date, id): pages seek instead of filtering.
  where.push(`(r.date, r.id) < (${q.p(afterDate)}::timestamptz, ${q.p(afterId)}::bigint)`)
  return {
    sql: `SELECT ${kRequestColumns} FROM ${s}.history_requests r WHERE ${where.join(' AND ')} ORDER BY r.date DESC, r.id DESC LIMIT ${kRequestPage}`,
    params: q.list
  }
}

/** Item ranges [lo, hi] of requests (items first.. of the request on `day`) to read parts for. */
interface Range { day: string, first: number, lo: number, hi: number }

/** The parts holding any item of the ranges. */
function rangeParts (s: string, ranges: readonly Range[]): Statement {
  return {
    sql: 'SELECT p.id, p.n, p.part FROM unnest($1::date[], $2::bigint[], $3::bigint[], $4::bigint[]) AS q(day, first, lo, hi) ' +
      `CROSS JOIN LATERAL (SELECT id, n, part FROM ${s}.history_parts p WHERE p.day = q.day AND p.id >= q.first AND p.id <= q.hi ` +
      'AND p.id + p.n > q.lo) p',
    params: [ranges.map((r) => r.day), ranges.map((r) => r.first), ranges.map((r) => r.lo), ranges.map((r) => r.hi)]
  }
}

/** Items of a set of parts by id (parts decoded once, on first use). */
class PartIndex {
  readonly #parts: StoredPart[]
  readonly #decoded = new Map<number, PartItems>()

  constructor (parts: StoredPart[]) {
    this.#parts = parts.sort((a, b) => a.id - b.id)
  }

  /** The item with this id, or null when none of the parts holds it. */
  itemAt (id: number): BlockItem | null {
    const a = this.#parts
    let lo = 0
    let hi = a.length - 1
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1
      const p = a[mid] as StoredPart
      if (id < p.id) hi = mid - 1
      else if (id >= p.id + p.n) lo = mid + 1
      else {
        let items = this.#decoded.get(p.id)
        if (items === undefined) this.#decoded.set(p.id, items = new PartItems(p.part))
        return items.item(id - p.id)
      }
    }
    return null
  }
}

function storedPart (r: { id: string, n: number, part: Buffer }): StoredPart {
  return { id: Number(r.id), n: r.n, part: r.part }
}

/** Up to `limit` items of a tenant's history matching the filters, newest first, after the cursor. */
export async function searchHistory (query: Query, s: string, tenant: string, f: ValidFilters, cursor: Cursor | null, limit: number): Promise<FoundItem[]> {
  const m = new ItemMatcher(f, cursor)
  return readsBlocks(f) ? await scanBlocks(query, s, tenant, m, limit) : await walkRequests(query, s, tenant, m, limit)
}

async function scanBlocks (query: Query, s: string, tenant: string, m: ItemMatcher, limit: number): Promise<FoundItem[]> {
  let afterTs = Number.MAX_SAFE_INTEGER
  let afterId = Number.MAX_SAFE_INTEGER
  let found: FoundItem[] = []
  for (;;) {
    const scan = blockScan(s, tenant, m, afterTs, afterId)
    const { rows: blocks } = await query<{ id: string, day: string, max_ts: string }>(scan.sql, scan.params)
    for (const b of blocks) {
      if (found.length >= limit && Number(b.max_ts) < (found[limit - 1] as FoundItem).ts) return found
      const st = blockParts(s, Number(b.id), b.day)
      const { rows } = await query<BlockPartRow>(st.sql, st.params)
      const hits: FoundItem[] = []
      for (const row of rows) m.partHits({ id: Number(row.part_id), n: row.n, part: row.part }, row.id === null ? null : requestInfo(row as RequestRow), hits)
      if (hits.length > 0) found = found.concat(hits).sort(newestFirst).slice(0, limit)
    }
    if (blocks.length < kBlockPage) return found
    const last = blocks[blocks.length - 1] as { id: string, max_ts: string }
    afterTs = Number(last.max_ts)
    afterId = Number(last.id)
  }
}

async function walkRequests (query: Query, s: string, tenant: string, m: ItemMatcher, limit: number): Promise<FoundItem[]> {
  let afterDate = m.cursor?.date ?? 'infinity'
  let afterId = Number.MAX_SAFE_INTEGER
  const found: FoundItem[] = []
  for (;;) {
    const walk = requestWalk(s, tenant, m.f, afterDate, afterId)
    const requests = (await query<RequestRow>(walk.sql, walk.params)).rows.map(requestInfo)
    for (let i = 0; i < requests.length;) {
      // The next requests, enough to fill the page if every item they hold below the cursor matched; without a type
      // filter, only the top items of the last of them that the page can take.
      const ranges: Range[] = []
      let j = i
      for (let want = limit - found.length; j < requests.length && (j === i || want > 0); j++) {
        const r = requests[j] as RequestInfo
        const top = m.topItem(r)
        if (top < r.first_item) continue
        const lo = m.wantType === null ? Math.max(r.first_item, top - want + 1) : r.first_item
        ranges.push({ day: new Date(r.ts).toISOString().slice(0, 10), first: r.first_item, lo, hi: top })
        want -= top - lo + 1
      }
      const st = rangeParts(s, ranges)
      const parts = new PartIndex((await query<{ id: string, n: number, part: Buffer }>(st.sql, st.params)).rows.map(storedPart))
      const itemAt = (id: number): BlockItem | null => parts.itemAt(id)
      for (; i < j; i++) {
        if (m.requestItems(requests[i] as RequestInfo, itemAt, found, limit)) return found
      }
    }
    if (requests.length < kRequestPage) return found
    const last = requests[requests.length - 1] as RequestInfo
    afterDate = new Date(last.ts).toISOString()
    afterId = last.id
  }
}

/**
 * The statements a search runs first (a page of blocks or requests, then what it reads of them, on `day`), for
 * EXPLAIN.
 */
export function searchStatements (s: string, tenant: string, f: ValidFilters, cursor: Cursor | null, day: string): Statement[] {
  const m = new ItemMatcher(f, cursor)
  if (readsBlocks(f)) return [blockScan(s, tenant, m, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER), blockParts(s, 1, day)]
  return [requestWalk(s, tenant, f, cursor?.date ?? 'infinity', Number.MAX_SAFE_INTEGER), rangeParts(s, [{ day, first: 1, lo: 1, hi: 1 }])]
}
