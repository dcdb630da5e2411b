/**
 * History items in blocks, as both stores keep them (sqlite-search.ts, postgres-history.ts): the scoring threads'
 * encoded parts (block.ts) as they are, one stored row per part, not one row per item.
 *
 * A part holds consecutive item ids of one request, [id, id + n). Parts are grouped into blocks per tenant: a block
 * keeps what lets a search skip its parts without reading them, the date range of its requests, a mask of its items'
 * types and a filter of its items' values (16 bits per item at kBlockItems, 4 probes). A tenant has one open block
 * that new parts join until it holds kBlockItems items (PostgreSQL keeps one per tenant and UTC day, so that a day's
 * partition holds its blocks whole), so low-rate traffic fills blocks as well as bulks do and a value search reads
 * about one block per kBlockItems records.
 *
 * This module holds what does not depend on the database: filling a block, cutting rows into parts, and matching a
 * search against a part's items. Each store holds its SQL and the loops that page through blocks or requests.
 */
import {
  comparable, filterAdd, filterBits, filterHas, hashValue, HistoryItems, kStride, partHash, partStrings, partTypes, typeBit, type HistoryPart
} from './block.ts'
import { encodeCursor, requestFields, requestRuns, SearchPageBuilder, type Cursor, type HistoryRow, type ValidFilters } from './rows.ts'
import type { SearchPage } from './types.ts'

/**
 * Items a block takes before it closes. A part never straddles two blocks: the stores cut larger runs into parts of
 * at most this size, and a scoring worker's part is one chunk of one request (at most 10,000 items).
 */
export const kBlockItems = 16_384
/** Bytes of every block's value filter. */
export const kFilterBytes = filterBits(kBlockItems) / 8

/** A block while parts join it. */
export interface BlockState {
  id: number
  /** Items added (a purge does not subtract: the filter still holds them). */
  n: number
  /** Date range (epoch ms) of the requests of its parts. */
  minTs: number
  maxTs: number
  /** typeBit of every item, or-ed. */
  types: number
  filter: Buffer
}

/** A new, empty block. */
export function newBlock (id: number): BlockState {
  return { id, n: 0, minTs: 0, maxTs: 0, types: 0, filter: Buffer.alloc(kFilterBytes) }
}

/** Whether a part of n items must start a new block instead of joining b. */
export function blockIsFull (b: BlockState, n: number): boolean {
  return b.n > 0 && b.n + n > kBlockItems
}

const kHashes = new Uint32Array(2)

/** Adds a part of n items of a request dated ts to block b: its values to the filter, its date and types. */
export function addToBlock (b: BlockState, part: Uint8Array, n: number, ts: number): void {
  const buf = Buffer.isBuffer(part) ? part : Buffer.from(part.buffer, part.byteOffset, part.byteLength)
  for (let i = 0; i < n; i++) {
    partHash(buf, i, kHashes)
    filterAdd(b.filter, kHashes[0] as number, kHashes[1] as number)
  }
  if (b.n === 0 || ts < b.minTs) b.minTs = ts
  if (b.n === 0 || ts > b.maxTs) b.maxTs = ts
  b.types = (b.types | partTypes(part)) >>> 0
  b.n += n
}

/** The parts of rows (writeHistoryRows): one per run of rows of one request, at most kBlockItems items each. */
export function rowParts (rows: readonly HistoryRow[]): HistoryPart[] {
  const parts: HistoryPart[] = []
  for (const run of requestRuns(rows)) {
    for (let start = run.start; start < run.end; start += kBlockItems) {
      const end = Math.min(run.end, start + kBlockItems)
      const items = new HistoryItems(end - start)
      for (let i = start; i < end; i++) {
        const r = rows[i] as HistoryRow
        items.add(r.indicatorType, r.indicatorValue, r.indicatorNormalized, r.item)
      }
      // A uid seen earlier in the batch is filed as a request of its own by the store.
      parts.push({ ...requestFields(rows[start] as HistoryRow), count: end - start, part: items.encode() })
    }
  }
  return parts
}

/** One stored item, as decoded from its part. */
export interface BlockItem {
  type: string | null
  value: string
  fragment: string
}

/** The strings of a stored part, decoded once. */
export class PartItems {
  readonly #strings: Array<string | null>

  constructor (part: Uint8Array) {
    this.#strings = partStrings(part)
  }

  /** Item i of the part. */
  item (i: number): BlockItem {
    const j = i * kStride
    return { type: this.#strings[j] ?? null, value: this.#strings[j + 1] ?? '', fragment: this.#strings[j + 3] as string }
  }
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

/** A stored part as a search reads it. */
export interface StoredPart {
  id: number
  n: number
  part: Buffer
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

/**
 * A page of search results from up to `limit` + 1 items found (one more than asked tells whether another page
 * exists, so the last page has next_cursor null), bounded as SearchPageBuilder bounds it.
 */
/** Where a search that spent its budget stopped: the next page reads what is older than (ts, id). */
export interface SearchResume { ts: number, id: number }

/** Rows found, and where to go on when a budget ended the search before the page was full (else null). */
export interface SearchFound { found: FoundItem[], resume: SearchResume | null }

/**
 * The page of `found` (up to `limit` rows and the page's byte bound); its next_cursor continues after its last row
 * when rows are left, or from `resume` when the search stopped early, else null.
 */
export function searchPage (found: readonly FoundItem[], limit: number, resume: SearchResume | null = null): SearchPage {
  // The items of one request share its envelope's string, the key of its parsed form.
  const page = new SearchPageBuilder(limit)
  let added = 0
  while (added < found.length) {
    const r = found[added] as FoundItem
    if (!page.add(r.envelope, r.envelope, r.item)) break
    added++
  }
  const last = found[added - 1]
  return {
    results: page.results,
    next_cursor: added < found.length && last !== undefined
      ? encodeCursor(new Date(last.ts).toISOString(), last.id)
      : resume === null ? null : encodeCursor(new Date(resume.ts).toISOString(), resume.id)
  }
}

/** Whether a search reads blocks (an indicator filter) rather than walking requests. */
export function readsBlocks (f: ValidFilters): boolean {
  return f.indicatorValue !== null || (f.indicatorType !== null && f.userId === null && f.apikey === null)
}

/**
 * One search's filters and cursor, compared with stored parts and requests: the same for both stores, so that they
 * return the same records in the same order.
 */
export class ItemMatcher {
  readonly f: ValidFilters
  readonly cursor: Cursor | null
  /** comparable() of the value and type asked for, or null. */
  readonly want: string | null
  readonly wantType: string | null
  /** The value's hashes (block filters, part hashes) and the type's bit (type masks). */
  readonly h1: number
  readonly h2: number
  readonly typeBit: number
  /** The date range asked for, epoch ms (unbounded sides as the safe integer bounds). */
  readonly gte: number
  readonly lt: number
  readonly #probe = new Uint32Array(2)

  constructor (f: ValidFilters, cursor: Cursor | null) {
    this.f = f
    this.cursor = cursor
    this.want = f.indicatorValue === null ? null : comparable(f.indicatorValue)
    this.wantType = f.indicatorType === null ? null : comparable(f.indicatorType)
    const h = new Uint32Array(2)
    if (this.want !== null) hashValue(this.want, h, 0)
    this.h1 = h[0] as number
    this.h2 = h[1] as number
    this.typeBit = this.wantType === null ? 0 : typeBit(this.wantType)
    this.gte = f.gteMs ?? Number.MIN_SAFE_INTEGER
    this.lt = f.ltMs ?? Number.MAX_SAFE_INTEGER
  }

  /** False when a block with this filter certainly holds no item of the value asked for. */
  mayHold (filter: Uint8Array): boolean {
    return this.want === null || filterHas(filter, this.h1, this.h2)
  }

  /** Whether a request passes the request-level filters and the date range. */
  requestMatches (r: RequestInfo): boolean {
    const f = this.f
    return r.ts >= this.gte && r.ts < this.lt &&
      (f.userId === null || r.user_id === f.userId) &&
      (f.apikey === null || r.apikey === f.apikey) &&
      (!f.excludeBulk || r.bulk_request_id === null) &&
      (f.authType === null || r.auth_type === f.authType)
  }

  /**
   * A block scan's hits in one part of request r (null when the request is gone): its items of the value and type
   * asked for, below the cursor, appended to `out`.
   */
  partHits (p: StoredPart, r: RequestInfo | null, out: FoundItem[]): void {
    const types = partTypes(p.part) // also checks the part's format before its hashes are read
    if (this.wantType !== null && (types & this.typeBit) === 0) return
    if (r === null || !this.requestMatches(r)) return
    const c = this.cursor
    if (c !== null && (r.ts > c.ts || (r.ts === c.ts && p.id >= c.id))) return
    const probe = this.#probe
    let items: PartItems | null = null
    for (let i = 0; i < p.n; i++) {
      if (this.want !== null) {
        partHash(p.part, i, probe)
        if (probe[0] !== this.h1 || probe[1] !== this.h2) continue
      }
      const id = p.id + i
      if (c !== null && r.ts === c.ts && id >= c.id) continue
      items ??= new PartItems(p.part)
      const it = items.item(i)
      if (this.want !== null && comparable(it.value) !== this.want) continue
      if (!this.#typeMatches(it)) continue
      out.push({ id, ts: r.ts, envelope: r.envelope, item: it.fragment })
    }
  }

  /** The highest item id of request r a walk reads: below the cursor on the cursor's date. */
  topItem (r: RequestInfo): number {
    const c = this.cursor
    return c !== null && r.ts === c.ts ? Math.min(r.last_item, c.id - 1) : r.last_item
  }

  /**
   * A request walk's items of request r (which passed the request filters), from its top down, appended to `out`
   * until it holds `limit`; `itemAt` gives an item by id, or null for one not stored. Returns true once `out` is full.
   */
  requestItems (r: RequestInfo, itemAt: (id: number) => BlockItem | null, out: FoundItem[], limit: number): boolean {
    for (let id = this.topItem(r); id >= r.first_item; id--) {
      const it = itemAt(id)
      if (it === null || !this.#typeMatches(it)) continue
      out.push({ id, ts: r.ts, envelope: r.envelope, item: it.fragment })
      if (out.length >= limit) return true
    }
    return false
  }

  #typeMatches (it: BlockItem): boolean {
    return this.wantType === null || (it.type !== null && comparable(it.type) === this.wantType)
  }
}
