/**
 * Store-independent handling of history: record validation and flattening into rows, usage deltas,
 * search filter validation and the opaque pagination cursor. SQLite and PostgreSQL differ only in SQL.
 */
import { randomBytes } from 'node:crypto'
import { StoreError } from '../errors.ts'
import { isCanonicalIso, parseTimestamp, utcDayOf } from './utc-day.ts'
import type { HistoryRecord, SearchFilters } from './types.ts'
import { recordedString, splitRecord } from './record.ts'

/** Page size of search-history when the caller gives none (API.md). */
export const DEFAULT_SEARCH_LIMIT = 100
/** Largest page a search may ask for. */
export const MAX_SEARCH_LIMIT = 1000
/**
 * The indicator_value index covers only this many leading characters (an expression index): a PostgreSQL btree
 * entry must fit in about 2.7 kB, and one over-long value must not make a whole batch fail forever. Searches
 * compare the prefix through the index and the full value on the row, so matching stays exact.
 * Part of the schema (migration 1 of both stores): changing it needs a new migration that rebuilds the index.
 */
export const MAX_INDEXED_CHARS = 512

/** This process's tag in request uids: what tells two processes' uids of one millisecond apart. */
const kUidProcess = randomBytes(6).toString('hex')
let uidMs = 0
let uidSeq = 0

/**
 * A new request uid (HistoryRequestFields.uid): 9 base-36 digits of milliseconds, 4 of a counter within the
 * millisecond, then this process's random tag. A process's uids strictly increase, even if the clock steps back, so
 * SQLite's unique index on them takes each at its end: random UUIDs, which land anywhere in that index, cost a
 * single call's history about 10 us more (docs/PERFORMANCE.md). Nothing reads the time out of a uid.
 */
export function newRequestUid (): string {
  const now = Date.now()
  if (now > uidMs) {
    uidMs = now
    uidSeq = 0
  } else if (++uidSeq === 36 ** 4) {
    uidMs++
    uidSeq = 0
  }
  return `${uidMs.toString(36).padStart(9, '0')}${uidSeq.toString(36).padStart(4, '0')}${kUidProcess}`
}

/** The request-level fields of a history record as the stores keep them (columns sanitized with column()). */
export interface HistoryRequestFields {
  /** Unique per request (the service assigns it); every row or part of one request carries the same uid and envelope. */
  uid: string
  ts: number
  date: string
  day: string
  tenant: string
  requestId: string
  bulkRequestId: string | null
  httpStatus: number
  authType: string
  apikey: string
  userId: string | null
  /** JSON object text of the request-level fields (date, request_id, bulk_request_id, http_status, ...). */
  envelope: string
}

/** The request fields of a row or part, copied. */
export function requestFields (r: HistoryRequestFields): HistoryRequestFields {
  return {
    uid: r.uid,
    ts: r.ts,
    date: r.date,
    day: r.day,
    tenant: r.tenant,
    requestId: r.requestId,
    bulkRequestId: r.bulkRequestId,
    httpStatus: r.httpStatus,
    authType: r.authType,
    apikey: r.apikey,
    userId: r.userId,
    envelope: r.envelope
  }
}

/**
 * One history record, split into its request half (shared by every record of one request) and its indicator half.
 * The stored record is the JSON object `envelope` with the members of `item` added:
 * recordJson (record.ts, which owns the layout).
 */
export interface HistoryRow extends HistoryRequestFields {
  indicatorType: string | null
  indicatorValue: string
  indicatorNormalized: string | null
  /** JSON members text, without braces, of the indicator-level fields ("indicator":...,"risk":...,...). */
  item: string
}

export { recordJson } from './record.ts'

/** Rows to add to one usage counter. */
export interface UsageDelta {
  tenant: string
  keyId: string
  day: string
  count: number
}

/** Validated search filters, timestamps as epoch milliseconds. */
export interface ValidFilters {
  gteMs: number | null
  ltMs: number | null
  userId: string | null
  apikey: string | null
  excludeBulk: boolean
  authType: string | null
  indicatorType: string | null
  indicatorValue: string | null
}

/** Position after the last row of a page: newest-first order is (date, item id) descending. */
export interface Cursor {
  ts: number
  date: string
  id: number
}

// PostgreSQL text cannot hold NUL; replacing it in the column copies (the envelope and item JSON keep the
// original, escaped) keeps both stores accepting and matching the same records.
/** A text column value: NUL becomes U+FFFD (PostgreSQL text cannot hold NUL; the JSON halves keep the original). */
export function column (value: string): string {
  return value.includes('\u0000') ? value.replaceAll('\u0000', '\uFFFD') : value
}

/** column() for nullable values. */
export function optionalColumn (value: string | null | undefined): string | null {
  return value === null || value === undefined ? null : column(value)
}

function invalid (index: number, what: string): StoreError {
  return new StoreError('INVALID_RECORD', `history record ${index}: ${what}`)
}

function requireString (value: unknown, index: number, name: string): string {
  if (typeof value !== 'string' || value.length === 0) throw invalid(index, `${name} must be a non-empty string`)
  return value
}

function optionalString (value: unknown, index: number, name: string): string | null {
  if (value === null || value === undefined) return null
  if (typeof value !== 'string') throw invalid(index, `${name} must be a string or null`)
  return value
}

/**
 * Validates and flattens records before any write, so a bad record rejects the batch before the transaction
 * starts. Throws INVALID_RECORD (no field values in the message: they may be anything a client sent).
 *
 * Requests: consecutive records whose request-level half (envelope text: date, tenant, request_id, bulk_request_id,
 * http_status, auth_type, apikey, user_id, ... everything but the indicator's members) is identical share one new
 * uid, so they are stored as one request row; any other record starts a new one. Grouping only saves space: a
 * search returns the same records either way.
 */
export function toRows (records: readonly HistoryRecord[]): HistoryRow[] {
  if (!Array.isArray(records)) throw new StoreError('INVALID_RECORD', 'history records must be an array')
  const rows: HistoryRow[] = new Array(records.length)
  let previous: HistoryRow | null = null
  for (let i = 0; i < records.length; i++) {
    const r = records[i] as HistoryRecord
    if (r === null || typeof r !== 'object') throw invalid(i, 'not an object')
    const ts = parseTimestamp(r.date)
    if (ts === null) throw invalid(i, 'date must be an ISO 8601 timestamp with offset')
    const date = new Date(ts).toISOString()
    if (!Number.isInteger(r.http_status)) throw invalid(i, 'http_status must be an integer')
    const ind = r.indicator
    if (ind === null || typeof ind !== 'object' || typeof ind.value !== 'string') throw invalid(i, 'indicator.value must be a string')
    let halves: { envelope: string, item: string }
    try {
      halves = splitRecord(r, date)
    } catch (err) {
      throw new StoreError('INVALID_RECORD', `history record ${i}: not serializable as JSON`, { cause: err })
    }
    const row: HistoryRow = {
      uid: previous !== null && previous.envelope === halves.envelope ? previous.uid : newRequestUid(),
      ts,
      date,
      day: utcDayOf(ts),
      tenant: column(requireString(r.tenant, i, 'tenant')),
      requestId: column(requireString(r.request_id, i, 'request_id')),
      bulkRequestId: optionalColumn(optionalString(r.bulk_request_id, i, 'bulk_request_id')),
      httpStatus: r.http_status,
      authType: column(requireString(r.auth_type, i, 'auth_type')),
      apikey: column(requireString(r.apikey, i, 'apikey')),
      userId: optionalColumn(optionalString(r.user_id, i, 'user_id')),
      indicatorType: optionalColumn(optionalString(ind.type, i, 'indicator.type')),
      indicatorValue: column(ind.value),
      indicatorNormalized: optionalColumn(optionalString(ind.normalized, i, 'indicator.normalized')),
      envelope: halves.envelope,
      item: halves.item
    }
    rows[i] = row
    previous = row
  }
  return rows
}

/** A run of consecutive rows of one request within a batch: rows[start..end). */
export interface RequestRun {
  start: number
  end: number
  /** The row's uid, or null when an earlier run of the same batch already used it (see requestRuns). */
  uid: string | null
}

/**
 * Splits a batch (of rows, or of parts) into runs of consecutive entries with the same uid. A uid may legitimately
 * continue the last run of the previous batch (the writer cuts batches anywhere); a uid that reappears later in the
 * same batch (not expected from the writer) gets uid null, and the store files that run as a request row of its own.
 */
export function requestRuns (rows: ReadonlyArray<{ uid: string }>): RequestRun[] {
  const runs: RequestRun[] = []
  const seen = new Set<string>()
  let start = 0
  for (let i = 1; i <= rows.length; i++) {
    const uid = (rows[start] as { uid: string }).uid
    if (i < rows.length && (rows[i] as { uid: string }).uid === uid) continue
    runs.push({ start, end: i, uid: seen.has(uid) ? null : uid })
    seen.add(uid)
    start = i
  }
  return runs
}

/**
 * uid of a request row holding a run that cannot extend its request's row: the item ids of a request row form one
 * contiguous range, so a continuation that does not start right after that range (another writer's items came in
 * between, or a batch is replayed) becomes a row of its own. The derived uid is unique: an item id is only ever
 * reused (SQLite, after a purge) once every item above it is gone, and with them every request row holding them.
 */
export function continuationUid (uid: string, firstItem: number): string {
  return `${uid}:${firstItem}`
}

/** What usageDeltas counts: a row (one record) or a part of `count` records. */
export interface Countable {
  tenant: string
  apikey: string
  day: string
  count?: number
}

/**
 * One delta per (tenant, key, day), sorted: PostgreSQL transactions that upsert several counters then always
 * lock them in the same order, so two concurrent batches cannot deadlock.
 */
export function usageDeltas (rows: readonly Countable[]): UsageDelta[] {
  const byKey = new Map<string, UsageDelta>()
  let d: UsageDelta | undefined
  for (const row of rows) {
    const n = row.count ?? 1
    // Rows of one request are consecutive and share the three: count them without building a key.
    if (d !== undefined && d.tenant === row.tenant && d.keyId === row.apikey && d.day === row.day) {
      d.count += n
      continue
    }
    const k = `${row.tenant}\u0000${row.apikey}\u0000${row.day}`
    d = byKey.get(k)
    if (d === undefined) {
      d = { tenant: row.tenant, keyId: row.apikey, day: row.day, count: 0 }
      byKey.set(k, d)
    }
    d.count += n
  }
  return [...byKey.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map((e) => e[1])
}

function filterString (value: unknown, name: string): string | null {
  if (value === undefined || value === null) return null
  if (typeof value !== 'string') throw new StoreError('INVALID_REQUEST', `${name} must be a string`)
  return value
}

function filterDate (value: unknown, name: string): number | null {
  if (value === undefined || value === null) return null
  const ms = parseTimestamp(value)
  if (ms === null) throw new StoreError('INVALID_REQUEST', `${name} must be an ISO 8601 date-time with offset, or a date`)
  return ms
}

/** Validates search filters; throws INVALID_REQUEST. */
export function validateFilters (filters: SearchFilters): ValidFilters {
  if (filters === null || typeof filters !== 'object') throw new StoreError('INVALID_REQUEST', 'filters must be an object')
  const excludeBulk = filters.exclude_bulk_requests ?? false
  if (typeof excludeBulk !== 'boolean') throw new StoreError('INVALID_REQUEST', 'exclude_bulk_requests must be a boolean')
  return {
    gteMs: filterDate(filters.date_gte, 'date_gte'),
    ltMs: filterDate(filters.date_lt, 'date_lt'),
    userId: filterString(filters.user_id, 'user_id'),
    apikey: filterString(filters.apikey, 'apikey'),
    excludeBulk,
    authType: filterString(filters.auth_type, 'auth_type'),
    indicatorType: filterString(filters.indicator_type, 'indicator_type'),
    indicatorValue: filterString(filters.indicator_value, 'indicator_value')
  }
}

/** Throws INVALID_REQUEST unless limit is an integer in 1..MAX_SEARCH_LIMIT. */
export function validateLimit (limit: unknown): number {
  if (!Number.isInteger(limit) || (limit as number) < 1 || (limit as number) > MAX_SEARCH_LIMIT) {
    throw new StoreError('INVALID_REQUEST', `limit must be an integer from 1 to ${MAX_SEARCH_LIMIT}`)
  }
  return limit as number
}

export { MAX_RECORD_STRING } from './record.ts'
/** A record half of at most this many characters is answered as stored: every record written under the limits is. */
const kPlainHalfChars = 128 * 1024
/** Most bytes of records (their JSON) one search-history page holds: a page ends before the record that would pass it. */
export const MAX_PAGE_BYTES = 8 * 1024 * 1024

/** A record half parsed, with the bytes of its JSON as answered. */
interface ParsedHalf { value: Record<string, unknown>, bytes: number }

function cutString (_key: string, v: unknown): unknown {
  return typeof v === 'string' ? recordedString(v) : v
}

/** An object's JSON text (a record half), parsed with every over-long string cut (MAX_RECORD_STRING). */
function parseHalf (text: string): ParsedHalf {
  if (text.length <= kPlainHalfChars) return { value: JSON.parse(text) as Record<string, unknown>, bytes: Buffer.byteLength(text) }
  const value = JSON.parse(text, cutString) as Record<string, unknown>
  return { value, bytes: Buffer.byteLength(JSON.stringify(value)) }
}

/**
 * One page of search results, built record by record in the order found: at most `limit` records and MAX_PAGE_BYTES
 * of them (never empty), every string bounded. The records of one request share its envelope's text, which is
 * parsed once per page (a bulk's records are one envelope and a thousand small items).
 */
export class SearchPageBuilder {
  readonly results: HistoryRecord[] = []
  readonly #limit: number
  readonly #envelopes = new Map<string | number, ParsedHalf>()
  #bytes = 0

  constructor (limit: number) {
    this.#limit = limit
  }

  /** Whether the envelope under `key` (its text, or the request's id) was parsed already. */
  hasEnvelope (key: string | number): boolean {
    return this.#envelopes.has(key)
  }

  /**
   * Adds a record from its envelope (found under `key`; the text is read only the first time) and item; false when
   * the page is full, by count or bytes (then the record is not added and the page continues from the last one added).
   */
  add (key: string | number, envelope: string | null, item: string): boolean {
    if (this.results.length >= this.#limit) return false
    let head = this.#envelopes.get(key)
    if (head === undefined) {
      head = parseHalf(envelope ?? '{}')
      this.#envelopes.set(key, head)
    }
    const tail = parseHalf(`{${item}}`)
    const bytes = head.bytes + tail.bytes
    if (this.results.length > 0 && this.#bytes + bytes > MAX_PAGE_BYTES) return false
    this.#bytes += bytes
    this.results.push({ ...head.value, ...tail.value } as unknown as HistoryRecord)
    return true
  }
}

/** Opaque cursor: base64url of JSON [date, id] of the last row returned. */
export function encodeCursor (date: string, id: number): string {
  return Buffer.from(JSON.stringify([date, String(id)]), 'utf8').toString('base64url')
}

/** Decodes a cursor made by encodeCursor; null means the first page. Throws INVALID_REQUEST for anything else. */
export function decodeCursor (cursor: string | null | undefined): Cursor | null {
  if (cursor === null || cursor === undefined) return null
  const bad = new StoreError('INVALID_REQUEST', 'cursor is not a cursor returned by this endpoint')
  // Buffer.from(.., 'base64url') silently skips foreign characters, so check the alphabet first.
  if (typeof cursor !== 'string' || cursor.length === 0 || cursor.length > 200 || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw bad
  let parsed: unknown
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))
  } catch {
    throw bad
  }
  if (!Array.isArray(parsed) || parsed.length !== 2) throw bad
  const [date, id] = parsed as unknown[]
  if (!isCanonicalIso(date) || typeof id !== 'string' || !/^[1-9]\d{0,15}$/.test(id)) throw bad
  const n = Number(id)
  if (!Number.isSafeInteger(n)) throw bad
  return { ts: Date.parse(date), date, id: n }
}
