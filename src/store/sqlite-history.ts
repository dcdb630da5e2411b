/**
 * How the SQLite store keeps history items: in blocks, not one row each.
 *
 * A block holds consecutive item ids of one tenant, [id, id + n), as the encoded parts the scoring workers made
 * (history-block.ts), stored as they arrived. Next to them it keeps what lets a search skip it: the date range of
 * its requests, a mask of its items' types and a filter of its items' values (4 probes, 16 bits per item). Which
 * request each item belongs to is in `runs`: [item offset, request id, ...], one pair where a request's run starts.
 *
 * Writing a 10,000-item bulk is then a few block and request rows instead of 10,000 rows and 20,000 index entries:
 * the history writer's cost per item fell from about 6 us to well under 1 us (docs/OPERATIONS.md).
 */
import type Database from 'better-sqlite3'
import {
  comparable, filterAdd, filterBits, filterHas, hashValue, HistoryItems, kStride, partCount, partHash, partStrings, partTypes, typeBit
} from './history-block.ts'
import type { Cursor, ValidFilters } from './history-rows.ts'

/** Most items in one block. A writer batch (IOC_HISTORY_BATCH, 20,000 by default) is cut into blocks of this size. */
export const kBlockItems = 20_000
/** Blocks read per statement while a search scans blocks newest first. */
const kBlockPage = 64
/** Requests read per statement while a search walks requests newest first. */
const kRequestPage = 256

/** The block table and its indexes (schema version 3). */
export const kBlocksSchema = `
  CREATE TABLE history_blocks (
    id INTEGER PRIMARY KEY,                -- the first item's id: the block holds items id .. id + n - 1
    n INTEGER NOT NULL,
    tenant TEXT NOT NULL,
    min_ts INTEGER NOT NULL,               -- date range (epoch ms) of the requests of its items
    max_ts INTEGER NOT NULL,
    types INTEGER NOT NULL,                -- typeBit of every item, or-ed
    runs TEXT NOT NULL,                    -- JSON [item offset, history_requests.id, ...]: where each request's run starts
    filter BLOB NOT NULL,                  -- value filter (history-block.ts filterAdd)
    items BLOB NOT NULL                    -- uint32 part count, then per part: uint32 byte length, the encoded part
  ) STRICT;
  -- Value and type searches read a tenant's blocks newest first; a block's newest item bounds the rest of it.
  CREATE INDEX history_blocks_tenant ON history_blocks (tenant, max_ts, id);
  -- Purge: blocks whose newest item is older than the cut.
  CREATE INDEX history_blocks_date ON history_blocks (max_ts);
`

/** One block being assembled from parts. */
export class BlockBuilder {
  n = 0
  minTs = Number.POSITIVE_INFINITY
  maxTs = Number.NEGATIVE_INFINITY
  types = 0
  readonly runs: number[] = []
  readonly parts: Buffer[] = []

  constructor (readonly id: number, readonly tenant: string) {}

  /** Appends a part of `count` items of request `req` dated `ts`. */
  add (part: Uint8Array, count: number, req: number, ts: number): void {
    if (this.runs.length === 0 || this.runs[this.runs.length - 1] !== req) this.runs.push(this.n, req)
    this.parts.push(Buffer.isBuffer(part) ? part : Buffer.from(part.buffer, part.byteOffset, part.byteLength))
    this.n += count
    if (ts < this.minTs) this.minTs = ts
    if (ts > this.maxTs) this.maxTs = ts
    this.types = (this.types | partTypes(part)) >>> 0
  }

  /** Parameters of the block's insert: id, n, tenant, min_ts, max_ts, types, runs, filter, items. */
  row (): [number, number, string, number, number, number, string, Buffer, Buffer] {
    const filter = Buffer.alloc(filterBits(this.n) / 8)
    const h = new Uint32Array(2)
    const sizes = Buffer.allocUnsafe(4 + 4 * this.parts.length)
    sizes.writeUInt32LE(this.parts.length, 0)
    const chunks: Buffer[] = [sizes.subarray(0, 4)]
    this.parts.forEach((part, k) => {
      const count = partCount(part)
      for (let i = 0; i < count; i++) {
        partHash(part, i, h)
        filterAdd(filter, h[0] as number, h[1] as number)
      }
      sizes.writeUInt32LE(part.length, 4 + 4 * k)
      chunks.push(sizes.subarray(4 + 4 * k, 8 + 4 * k), part)
    })
    return [this.id, this.n, this.tenant, this.minTs, this.maxTs, this.types, JSON.stringify(this.runs), filter, Buffer.concat(chunks)]
  }
}

/** One stored item, as decoded from its block. */
export interface BlockItem {
  type: string | null
  value: string
  fragment: string
}

/** The items of one stored block, decoded part by part as they are asked for. */
export class BlockItems {
  readonly #buf: Buffer
  /** Byte offset of each part, and the block offset of its first item. */
  readonly #offsets: number[] = []
  readonly #starts: number[] = []
  readonly #lengths: number[] = []
  readonly #decoded = new Map<number, Array<string | null>>()

  constructor (items: Buffer) {
    this.#buf = items
    const parts = items.readUInt32LE(0)
    let at = 4
    let start = 0
    for (let k = 0; k < parts; k++) {
      const len = items.readUInt32LE(at)
      at += 4
      this.#offsets.push(at)
      this.#lengths.push(len)
      this.#starts.push(start)
      start += partCount(items.subarray(at, at + len))
      at += len
    }
  }

  /** Parts in the block. */
  get parts (): number {
    return this.#offsets.length
  }

  /** The encoded part k. */
  part (k: number): Buffer {
    const at = this.#offsets[k] as number
    return this.#buf.subarray(at, at + (this.#lengths[k] as number))
  }

  /** Block offset of part k's first item. */
  start (k: number): number {
    return this.#starts[k] as number
  }

  /** The part holding block offset i. */
  partOf (i: number): number {
    let lo = 0
    let hi = this.#starts.length - 1
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1
      if ((this.#starts[mid] as number) <= i) lo = mid
      else hi = mid - 1
    }
    return lo
  }

  /** Item at block offset i. */
  item (i: number): BlockItem {
    const k = this.partOf(i)
    let strings = this.#decoded.get(k)
    if (strings === undefined) {
      strings = partStrings(this.part(k))
      this.#decoded.set(k, strings)
    }
    const j = (i - (this.#starts[k] as number)) * kStride
    return { type: strings[j] ?? null, value: strings[j + 1] ?? '', fragment: strings[j + 3] as string }
  }
}

/** The request of block offset i: runs is [offset, request id, ...] ascending by offset. */
export function requestAt (runs: readonly number[], i: number): number {
  let lo = 0
  let hi = runs.length / 2 - 1
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1
    if ((runs[2 * mid] as number) <= i) lo = mid
    else hi = mid - 1
  }
  return runs[2 * lo + 1] as number
}

/** A request as a search needs it. */
export interface RequestInfo {
  id: number
  ts: number
  envelope: string
  user_id: string | null
  apikey: string
  bulk_request_id: string | null
  auth_type: string
  first_item: number
  last_item: number
}

/** A search result before it is turned into a record. */
export interface FoundItem {
  id: number
  ts: number
  envelope: string
  item: string
}

/** (ts, id) descending, the order of every search. */
export function newestFirst (a: FoundItem, b: FoundItem): number {
  return b.ts - a.ts || b.id - a.id
}

/** Whether a request passes the request-level filters. */
function requestMatches (r: RequestInfo, f: ValidFilters): boolean {
  return (f.userId === null || r.user_id === f.userId) &&
    (f.apikey === null || r.apikey === f.apikey) &&
    (!f.excludeBulk || r.bulk_request_id === null) &&
    (f.authType === null || r.auth_type === f.authType)
}

/** Statements the block searches use. */
export interface BlockStatements {
  requestById: Database.Statement
  blockItems: Database.Statement
  blockAt: Database.Statement
}

const kRequestColumns = 'id, ts, envelope, user_id, apikey, bulk_request_id, auth_type, first_item, last_item'

/** SQL of the statements above. */
export const kBlockStatementSql = {
  requestById: `SELECT ${kRequestColumns} FROM history_requests WHERE id = ?`,
  blockItems: 'SELECT items FROM history_blocks WHERE id = ?',
  blockAt: 'SELECT id, n, items FROM history_blocks WHERE id <= ? ORDER BY id DESC LIMIT 1'
}

/** SQL of the block scan of a value or type search (its parameters: see scanBlocks). */
export function blockScanSql (withTypes: boolean): string {
  return 'SELECT id, n, max_ts, runs, filter FROM history_blocks INDEXED BY history_blocks_tenant ' +
    'WHERE tenant = ? AND max_ts >= ? AND min_ts < ? AND min_ts <= ?' + (withTypes ? ' AND (types & ?) != 0' : '') +
    ' AND (max_ts, id) < (?, ?) ORDER BY max_ts DESC, id DESC LIMIT ?'
}

/** SQL of the request walk of a search without a value filter (its parameters: see walkRequests). */
export function requestWalkSql (f: ValidFilters): { sql: string, index: string } {
  const index = f.userId !== null
    ? 'history_requests_tenant_user'
    : f.apikey !== null
      ? 'history_requests_tenant_apikey'
      : f.excludeBulk ? 'history_requests_tenant_bulk' : 'history_requests_tenant_date'
  const where = ['tenant = ?']
  if (f.userId !== null) where.push('user_id = ?')
  if (f.apikey !== null) where.push('apikey = ?')
  if (f.excludeBulk) where.push('bulk_request_id IS NULL')
  if (f.authType !== null) where.push('auth_type = ?')
  where.push('ts >= ?', 'ts < ?', '(ts, id) < (?, ?)')
  const sql = `SELECT ${kRequestColumns} FROM history_requests INDEXED BY ${index} WHERE ${where.join(' AND ')} ` +
    'ORDER BY ts DESC, id DESC LIMIT ?'
  return { sql, index }
}

/** Parameters of requestWalkSql before the keyset bound and the limit. */
function requestWalkParams (tenant: string, f: ValidFilters): unknown[] {
  const p: unknown[] = [tenant]
  if (f.userId !== null) p.push(f.userId)
  if (f.apikey !== null) p.push(f.apikey)
  if (f.authType !== null) p.push(f.authType)
  p.push(f.gteMs ?? Number.MIN_SAFE_INTEGER, f.ltMs ?? Number.MAX_SAFE_INTEGER)
  return p
}

/** Whether a search reads blocks (an indicator filter) rather than walking requests. */
export function readsBlocks (f: ValidFilters): boolean {
  return f.indicatorValue !== null || (f.indicatorType !== null && f.userId === null && f.apikey === null)
}

/**
 * A value or type search: the tenant's blocks newest first (by their newest item), skipping blocks whose filter
 * or type mask rules the indicator out, each candidate's items checked in full. Blocks' date ranges overlap only
 * where requests were written out of date order, so the scan stops at the first block whose newest item is older
 * than the last row a full page keeps. Returns up to `limit` rows, newest first.
 */
export function scanBlocks (scan: Database.Statement, s: BlockStatements, tenant: string, f: ValidFilters, cursor: Cursor | null, limit: number): FoundItem[] {
  const want = f.indicatorValue === null ? null : comparable(f.indicatorValue)
  const wantType = f.indicatorType === null ? null : comparable(f.indicatorType)
  const h = new Uint32Array(2)
  if (want !== null) hashValue(want, h, 0)
  const h1 = h[0] as number
  const h2 = h[1] as number
  const requests = new Map<number, RequestInfo | null>()
  const requestOf = (id: number): RequestInfo | null => {
    let r = requests.get(id)
    if (r === undefined) {
      r = (s.requestById.get(id) as RequestInfo | undefined) ?? null
      requests.set(id, r)
    }
    return r
  }
  const gte = f.gteMs ?? Number.MIN_SAFE_INTEGER
  const lt = f.ltMs ?? Number.MAX_SAFE_INTEGER
  const head: unknown[] = [tenant, gte, lt, cursor?.ts ?? Number.MAX_SAFE_INTEGER]
  if (wantType !== null) head.push(typeBit(wantType))
  let afterTs = Number.MAX_SAFE_INTEGER
  let afterId = Number.MAX_SAFE_INTEGER
  let found: FoundItem[] = []
  const probe = new Uint32Array(2)
  for (;;) {
    const blocks = scan.all(...head, afterTs, afterId, kBlockPage) as Array<{ id: number, n: number, max_ts: number, runs: string, filter: Buffer }>
    for (const b of blocks) {
      if (found.length >= limit && b.max_ts < (found[limit - 1] as FoundItem).ts) return found
      if (want !== null && !filterHas(b.filter, h1, h2)) continue
      const runs = JSON.parse(b.runs) as number[]
      const items = new BlockItems(s.blockItems.get(b.id) as Buffer)
      const hits: FoundItem[] = []
      for (let k = 0; k < items.parts; k++) {
        const part = items.part(k)
        if (wantType !== null && (partTypes(part) & typeBit(wantType)) === 0) continue
        const start = items.start(k)
        const count = partCount(part)
        for (let j = 0; j < count; j++) {
          if (want !== null) {
            partHash(part, j, probe)
            if (probe[0] !== h1 || probe[1] !== h2) continue
          }
          const i = start + j
          const it = items.item(i)
          if (want !== null && comparable(it.value) !== want) continue
          if (wantType !== null && (it.type === null || comparable(it.type) !== wantType)) continue
          const id = b.id + i
          const r = requestOf(requestAt(runs, i))
          // A purged request's items stay in their block until the whole block is purged: they are not history.
          if (r === null || id < r.first_item || id > r.last_item) continue
          if (r.ts < gte || r.ts >= lt || !requestMatches(r, f)) continue
          if (cursor !== null && (r.ts > cursor.ts || (r.ts === cursor.ts && id >= cursor.id))) continue
          hits.push({ id, ts: r.ts, envelope: r.envelope, item: it.fragment })
        }
      }
      if (hits.length > 0) found = found.concat(hits).sort(newestFirst).slice(0, limit)
    }
    if (blocks.length < kBlockPage) return found
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
export function walkRequests (walk: Database.Statement, s: BlockStatements, tenant: string, f: ValidFilters, cursor: Cursor | null, limit: number): FoundItem[] {
  const wantType = f.indicatorType === null ? null : comparable(f.indicatorType)
  const head = requestWalkParams(tenant, f)
  let afterTs = cursor?.ts ?? Number.MAX_SAFE_INTEGER
  let afterId = Number.MAX_SAFE_INTEGER
  const found: FoundItem[] = []
  let block: { id: number, n: number, items: BlockItems } | null = null
  const itemAt = (id: number): BlockItem | null => {
    if (block === null || id < block.id || id >= block.id + block.n) {
      const row = s.blockAt.get(id) as { id: number, n: number, items: Buffer } | undefined
      if (row === undefined || id >= row.id + row.n) return null
      block = { id: row.id, n: row.n, items: new BlockItems(row.items) }
    }
    return block.items.item(id - block.id)
  }
  for (;;) {
    const requests = walk.all(...head, afterTs, afterId, kRequestPage) as RequestInfo[]
    for (const r of requests) {
      const top = cursor !== null && r.ts === cursor.ts ? Math.min(r.last_item, cursor.id - 1) : r.last_item
      for (let id = top; id >= r.first_item; id--) {
        const it = itemAt(id)
        if (it === null) continue
        if (wantType !== null && (it.type === null || comparable(it.type) !== wantType)) continue
        found.push({ id, ts: r.ts, envelope: r.envelope, item: it.fragment })
        if (found.length >= limit) return found
      }
    }
    if (requests.length < kRequestPage) return found
    const last = requests[requests.length - 1] as RequestInfo
    afterTs = last.ts
    afterId = last.id
  }
}

/** Schema 2 to 3: every item row becomes part of a block; ids, requests and their ranges are unchanged. */
export function migrateRowsToBlocks (db: Database.Database): void {
  db.exec(kBlocksSchema)
  const page = db.prepare('SELECT id, req, ts, tenant, indicator_type AS type, indicator_value AS value, ' +
    'indicator_normalized AS normalized, item FROM history WHERE id > ? ORDER BY id LIMIT 10000')
  const insert = db.prepare('INSERT INTO history_blocks (id, n, tenant, min_ts, max_ts, types, runs, filter, items) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)')
  interface Open { block: BlockBuilder, next: number, items: HistoryItems, req: number, ts: number }
  const open = new Map<string, Open>()
  const endPart = (o: Open): void => {
    if (o.items.count > 0) o.block.add(o.items.encode(), o.items.count, o.req, o.ts)
  }
  const close = (o: Open): void => {
    endPart(o)
    insert.run(...o.block.row())
  }
  type Row = { id: number, req: number, ts: number, tenant: string, type: string | null, value: string, normalized: string | null, item: string }
  for (let after = 0; ;) {
    const rows = page.all(after) as Row[]
    for (const r of rows) {
      let o = open.get(r.tenant)
      if (o !== undefined && (o.next !== r.id || o.block.n + o.items.count >= kBlockItems)) {
        close(o)
        o = undefined
      }
      if (o === undefined) {
        o = { block: new BlockBuilder(r.id, r.tenant), next: r.id, items: new HistoryItems(), req: r.req, ts: r.ts }
        open.set(r.tenant, o)
      } else if (o.req !== r.req) {
        endPart(o)
        o.items = new HistoryItems()
        o.req = r.req
        o.ts = r.ts
      }
      o.items.add(r.type, r.value, r.normalized, r.item)
      o.next = r.id + 1
    }
    if (rows.length === 0) break
    after = (rows[rows.length - 1] as Row).id
  }
  for (const o of open.values()) close(o)
  db.exec('DROP TABLE history; DROP TABLE history_segments;')
}

/** A stored item with its request's envelope (diagnostics and tests). */
export interface StoredItem {
  id: number
  envelope: string
  item: string
}

/** Every item of the database that is history (its request exists), in id order. */
export function storedItems (db: Database.Database): StoredItem[] {
  const request = db.prepare('SELECT envelope, first_item, last_item FROM history_requests WHERE id = ?')
  const out: StoredItem[] = []
  for (const b of db.prepare('SELECT id, n, runs, items FROM history_blocks ORDER BY id').all() as Array<{ id: number, n: number, runs: string, items: Buffer }>) {
    const runs = JSON.parse(b.runs) as number[]
    const items = new BlockItems(b.items)
    for (let i = 0; i < b.n; i++) {
      const r = request.get(requestAt(runs, i)) as { envelope: string, first_item: number, last_item: number } | undefined
      const id = b.id + i
      if (r === undefined || id < r.first_item || id > r.last_item) continue
      out.push({ id, envelope: r.envelope, item: items.item(i).fragment })
    }
  }
  return out
}
