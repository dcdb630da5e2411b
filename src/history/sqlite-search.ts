/**
 * How the SQLite store keeps history items: as the encoded parts the scoring workers made, one row per part, grouped
 * per tenant into blocks that searches skip by filter (blocks.ts says what a block holds; this module holds the
 * SQLite tables and statements).
 *
 * Writing a 10,000-item bulk is then a few part, block and request rows instead of 10,000 rows and 20,000 index
 * entries: the history writer's cost per item fell from about 6 us to well under 1 us (docs/OPERATIONS.md).
 */
import type Database from 'better-sqlite3'
import { HistoryItems } from './block.ts'
import {
  addToBlock, blockIsFull, ItemMatcher, kBlockItems, newBlock, newestFirst, PartItems, type BlockItem, type BlockState, type FoundItem, type RequestInfo,
  type SearchFound, type StoredPart
} from './blocks.ts'
import type { Cursor, ValidFilters } from './rows.ts'

/** Blocks read per statement while a search scans blocks newest first. */
const kBlockPage = 64
/** Requests read per statement while a search walks requests newest first. */
const kRequestPage = 256
/**
 * Most items (and requests) one search reads before it answers what it has: SQLite searches run on the main thread,
 * and a filter that matches little of a large history would otherwise read all of it in one go (about 70 ns an item:
 * five million items held every other request for a third of a second). About 15-20 ms; the page then ends early
 * with a `next_cursor` from where the search stopped.
 */
export const kSearchBudget = 250_000

/** The part and block tables and their indexes (schema version 3). */
export const kBlocksSchema = `
  CREATE TABLE history_parts (
    id INTEGER PRIMARY KEY,                -- the first item's id: the part holds items id .. id + n - 1
    n INTEGER NOT NULL,
    req INTEGER NOT NULL,                  -- history_requests.id (every item of a part belongs to one request)
    block INTEGER NOT NULL,                -- history_blocks.id
    part BLOB NOT NULL                     -- the encoded items (history/block.ts)
  ) STRICT;
  CREATE INDEX history_parts_block ON history_parts (block, id);
  CREATE TABLE history_blocks (
    id INTEGER PRIMARY KEY,
    tenant TEXT NOT NULL,
    n INTEGER NOT NULL,                    -- items added (purge does not subtract: the filter still holds them)
    min_ts INTEGER NOT NULL,               -- date range (epoch ms) of the requests of its parts
    max_ts INTEGER NOT NULL,
    types INTEGER NOT NULL,                -- typeBit of every item, or-ed
    open INTEGER NOT NULL,                 -- 1 while new parts join it (one open block per tenant)
    filter BLOB NOT NULL                   -- value filter (block.ts filterAdd)
  ) STRICT;
  -- Value and type searches read a tenant's blocks newest first; a block's newest item bounds the rest of it.
  CREATE INDEX history_blocks_tenant ON history_blocks (tenant, max_ts, id);
  CREATE INDEX history_blocks_open ON history_blocks (tenant) WHERE open = 1;
  -- Purge: blocks whose newest item is older than the cut.
  CREATE INDEX history_blocks_date ON history_blocks (max_ts);
`

/** SQL of the statements BlockWriter uses. */
export const kBlockWriterSql = {
  openBlock: 'SELECT id, n, min_ts, max_ts, types, filter FROM history_blocks WHERE tenant = ? AND open = 1 ORDER BY id DESC LIMIT 1',
  insertBlock: 'INSERT INTO history_blocks (tenant, n, min_ts, max_ts, types, open, filter) VALUES (?, 0, 0, 0, 0, 1, ?)',
  updateBlock: 'UPDATE history_blocks SET n = ?, min_ts = ?, max_ts = ?, types = ?, open = ?, filter = ? WHERE id = ?',
  insertPart: 'INSERT INTO history_parts (id, n, req, block, part) VALUES (?, ?, ?, ?, ?)'
}

/** Statements of kBlockWriterSql, prepared. */
export type BlockWriterStatements = { [K in keyof typeof kBlockWriterSql]: Database.Statement }

/** Adds parts to their tenants' open blocks within one transaction; finish() writes the blocks back. */
export class BlockWriter {
  readonly #s: BlockWriterStatements
  readonly #blocks = new Map<string, BlockState>()

  constructor (s: BlockWriterStatements) {
    this.#s = s
  }

  /** Stores part `part` (items id .. id + n - 1 of request `req`, dated ts) in its tenant's open block. */
  add (tenant: string, id: number, n: number, req: number, ts: number, part: Uint8Array): void {
    let b = this.#blocks.get(tenant)
    if (b === undefined) {
      const row = this.#s.openBlock.get(tenant) as { id: number, n: number, min_ts: number, max_ts: number, types: number, filter: Buffer } | undefined
      b = row === undefined ? this.#create(tenant) : { id: row.id, n: row.n, minTs: row.min_ts, maxTs: row.max_ts, types: row.types, filter: row.filter }
      this.#blocks.set(tenant, b)
    }
    if (blockIsFull(b, n)) {
      this.#save(b, false)
      b = this.#create(tenant)
      this.#blocks.set(tenant, b)
    }
    this.#s.insertPart.run(id, n, req, b.id, part)
    addToBlock(b, part, n, ts)
  }

  /** Writes every block this writer changed. */
  finish (): void {
    for (const b of this.#blocks.values()) this.#save(b, b.n < kBlockItems)
    this.#blocks.clear()
  }

  #create (tenant: string): BlockState {
    const b = newBlock(0)
    b.id = Number(this.#s.insertBlock.run(tenant, b.filter).lastInsertRowid)
    return b
  }

  #save (b: BlockState, open: boolean): void {
    this.#s.updateBlock.run(b.n, b.minTs, b.maxTs, b.types, open ? 1 : 0, b.filter, b.id)
  }
}

/** Statements the block searches use. */
export interface BlockStatements {
  requestById: Database.Statement
  blockParts: Database.Statement
  partAt: Database.Statement
}

const kRequestColumns = 'id, ts, envelope, user_id, apikey, bulk_request_id, auth_type, first_item, last_item'

/** SQL of the statements above. */
export const kBlockStatementSql = {
  requestById: `SELECT ${kRequestColumns} FROM history_requests WHERE id = ?`,
  blockParts: 'SELECT id, n, req, part FROM history_parts WHERE block = ? ORDER BY id',
  partAt: 'SELECT id, n, part FROM history_parts WHERE id <= ? ORDER BY id DESC LIMIT 1'
}

/** SQL of the block scan of a value or type search (its parameters: see scanBlocks). */
export function blockScanSql (withTypes: boolean): string {
  return 'SELECT id, max_ts, filter FROM history_blocks INDEXED BY history_blocks_tenant ' +
    'WHERE tenant = ? AND max_ts >= ? AND min_ts < ? AND min_ts <= ?' + (withTypes ? ' AND (types & ?) != 0' : '') +
    ' AND (max_ts, id) < (?, ?) ORDER BY max_ts DESC, id DESC LIMIT ?'
}

/** Whether the request walk's index holds only requests without a bulk_request_id (excludeBulk read in the index). */
function walksBulkFreeIndex (f: ValidFilters): boolean {
  return f.excludeBulk && f.userId === null && f.apikey === null
}

/**
 * SQL of the request walk of a search without a value filter (its parameters: see walkRequests). Only what its index
 * holds is in the WHERE clause, so that every row the statement reads is one the walk sees and counts against its
 * budget: auth_type, and excludeBulk beside a user or key filter, are checked as the rows arrive. The keyset's ts is
 * also a plain upper bound (`ts <= ?`): the row value alone does not bound the index range, and a deep page read the
 * index from its newest entry.
 */
export function requestWalkSql (f: ValidFilters): string {
  const index = f.userId !== null
    ? 'history_requests_tenant_user'
    : f.apikey !== null
      ? 'history_requests_tenant_apikey'
      : f.excludeBulk ? 'history_requests_tenant_bulk' : 'history_requests_tenant_date'
  const where = ['tenant = ?']
  if (f.userId !== null) where.push('user_id = ?')
  if (f.apikey !== null) where.push('apikey = ?')
  if (walksBulkFreeIndex(f)) where.push('bulk_request_id IS NULL')
  where.push('ts >= ?', 'ts < ?', 'ts <= ?', '(ts, id) < (?, ?)')
  return `SELECT ${kRequestColumns} FROM history_requests INDEXED BY ${index} WHERE ${where.join(' AND ')} ` +
    'ORDER BY ts DESC, id DESC LIMIT ?'
}

/** Parameters of requestWalkSql before the keyset bounds and the limit. */
function requestWalkParams (tenant: string, f: ValidFilters): unknown[] {
  const p: unknown[] = [tenant]
  if (f.userId !== null) p.push(f.userId)
  if (f.apikey !== null) p.push(f.apikey)
  p.push(f.gteMs ?? Number.MIN_SAFE_INTEGER, f.ltMs ?? Number.MAX_SAFE_INTEGER)
  return p
}

/**
 * A value or type search: the tenant's blocks newest first (by their newest item), skipping blocks whose filter
 * or type mask rules the indicator out, each candidate's items checked in full. Blocks' date ranges overlap only
 * where requests were written out of date order, so the scan stops at the first block whose newest item is older
 * than the last row a full page keeps. Returns up to `limit` rows, newest first.
 */
export function scanBlocks (scan: Database.Statement, s: BlockStatements, tenant: string, f: ValidFilters, cursor: Cursor | null, limit: number, budget = kSearchBudget): SearchFound {
  const m = new ItemMatcher(f, cursor)
  let spent = 0
  const startTs = cursor?.ts ?? Number.MAX_SAFE_INTEGER
  const requests = new Map<number, RequestInfo | null>()
  const requestOf = (id: number): RequestInfo | null => {
    let r = requests.get(id)
    if (r === undefined) {
      r = (s.requestById.get(id) as RequestInfo | undefined) ?? null
      requests.set(id, r)
    }
    return r
  }
  const head: unknown[] = [tenant, m.gte, m.lt, cursor?.ts ?? Number.MAX_SAFE_INTEGER]
  if (m.wantType !== null) head.push(m.typeBit)
  let afterTs = Number.MAX_SAFE_INTEGER
  let afterId = Number.MAX_SAFE_INTEGER
  let found: FoundItem[] = []
  for (;;) {
    const blocks = scan.all(...head, afterTs, afterId, kBlockPage) as Array<{ id: number, max_ts: number, filter: Buffer }>
    for (const b of blocks) {
      if (found.length >= limit && b.max_ts < (found[limit - 1] as FoundItem).ts) return { found, resume: null }
      // Every block not read yet holds items no newer than this one's newest: what was found newer than that is
      // complete. Stopped only once that is older than the cursor, so that each page gets further than the last.
      if (spent >= budget && b.max_ts < startTs) return { found: found.filter((x) => x.ts > b.max_ts), resume: { ts: b.max_ts, id: Number.MAX_SAFE_INTEGER } }
      if (!m.mayHold(b.filter)) continue
      const hits: FoundItem[] = []
      for (const p of s.blockParts.all(b.id) as Array<StoredPart & { req: number }>) {
        m.partHits(p, requestOf(p.req), hits)
        spent += p.n
      }
      if (hits.length > 0) found = found.concat(hits).sort(newestFirst).slice(0, limit)
    }
    if (blocks.length < kBlockPage) return { found, resume: null }
    const last = blocks[blocks.length - 1] as { id: number, max_ts: number }
    afterTs = last.max_ts
    afterId = last.id
  }
}

/**
 * A search without a value filter: the requests matching the request-level filters, newest first through a
 * tenant-prefixed index, each request's items from its last to its first (its ids are one contiguous range).
 * Within one ts, request ids and item ids are both insertion order, so this is (ts DESC, item id DESC).
 */
export function walkRequests (walk: Database.Statement, s: BlockStatements, tenant: string, f: ValidFilters, cursor: Cursor | null, limit: number, budget = kSearchBudget): SearchFound {
  const m = new ItemMatcher(f, cursor)
  let spent = 0
  const head = requestWalkParams(tenant, f)
  let afterTs = cursor?.ts ?? Number.MAX_SAFE_INTEGER
  let afterId = Number.MAX_SAFE_INTEGER
  const found: FoundItem[] = []
  let part: { id: number, n: number, items: PartItems } | null = null
  const itemAt = (id: number): BlockItem | null => {
    if (part === null || id < part.id || id >= part.id + part.n) {
      const row = s.partAt.get(id) as StoredPart | undefined
      if (row === undefined || id >= row.id + row.n) return null
      part = { id: row.id, n: row.n, items: new PartItems(row.part) }
    }
    return part.items.item(id - part.id)
  }
  for (;;) {
    const requests = walk.all(...head, afterTs, afterTs, afterId, kRequestPage) as RequestInfo[]
    const checkBulk = f.excludeBulk && !walksBulkFreeIndex(f)
    for (const r of requests) {
      // Requests are read whole: what is left is older than the last one read (its ts, below its first item).
      if (spent >= budget) return { found, resume: { ts: r.ts, id: Math.max(1, m.topItem(r) + 1) } }
      spent++
      if ((f.authType !== null && r.auth_type !== f.authType) || (checkBulk && r.bulk_request_id !== null)) continue
      if (m.requestItems(r, itemAt, found, limit)) return { found, resume: null }
      spent += Math.max(0, m.topItem(r) - r.first_item + 1)
    }
    if (requests.length < kRequestPage) return { found, resume: null }
    const last = requests[requests.length - 1] as RequestInfo
    afterTs = last.ts
    afterId = last.id
  }
}

/** Schema 2 to 3: every item row becomes part of a part (one per run of one request); ids and requests are unchanged. */
export function migrateRowsToBlocks (db: Database.Database): void {
  db.exec(kBlocksSchema)
  const page = db.prepare('SELECT id, req, ts, tenant, indicator_type AS type, indicator_value AS value, ' +
    'indicator_normalized AS normalized, item FROM history WHERE id > ? ORDER BY id LIMIT 10000')
  const writer = new BlockWriter(prepareBlockWriter(db))
  interface Run { first: number, next: number, req: number, ts: number, tenant: string, items: HistoryItems }
  let run: Run | null = null
  const flush = (): void => {
    if (run !== null) writer.add(run.tenant, run.first, run.items.count, run.req, run.ts, run.items.encode())
    run = null
  }
  type Row = { id: number, req: number, ts: number, tenant: string, type: string | null, value: string, normalized: string | null, item: string }
  for (let after = 0; ;) {
    const rows = page.all(after) as Row[]
    for (const r of rows) {
      const current = run as Run | null
      if (current === null || current.req !== r.req || current.next !== r.id || current.items.count >= kBlockItems) {
        flush()
        run = { first: r.id, next: r.id, req: r.req, ts: r.ts, tenant: r.tenant, items: new HistoryItems() }
      }
      const open = run as Run
      open.items.add(r.type, r.value, r.normalized, r.item)
      open.next = r.id + 1
    }
    if (rows.length === 0) break
    after = (rows[rows.length - 1] as Row).id
  }
  flush()
  writer.finish()
  db.exec('DROP TABLE history; DROP TABLE history_segments;')
}

/** Prepares BlockWriter's statements on a connection. */
export function prepareBlockWriter (db: Database.Database): BlockWriterStatements {
  return {
    openBlock: db.prepare(kBlockWriterSql.openBlock),
    insertBlock: db.prepare(kBlockWriterSql.insertBlock),
    updateBlock: db.prepare(kBlockWriterSql.updateBlock),
    insertPart: db.prepare(kBlockWriterSql.insertPart)
  }
}

/** A stored item with its request's envelope (diagnostics and tests). */
export interface StoredItem {
  id: number
  envelope: string
  item: string
}

/** Every stored history item, in id order. */
export function storedItems (db: Database.Database): StoredItem[] {
  const request = db.prepare('SELECT envelope FROM history_requests WHERE id = ?').pluck()
  const out: StoredItem[] = []
  for (const p of db.prepare('SELECT id, n, req, part FROM history_parts ORDER BY id').all() as Array<{ id: number, n: number, req: number, part: Buffer }>) {
    const envelope = request.get(p.req) as string | undefined
    if (envelope === undefined) throw new Error(`part ${p.id} has no request ${p.req}`)
    const items = new PartItems(p.part)
    for (let i = 0; i < p.n; i++) out.push({ id: p.id + i, envelope, item: items.item(i).fragment })
  }
  return out
}
