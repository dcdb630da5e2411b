/**
 * What the request path hands to the history writer: one envelope per request (fields shared by its records)
 * plus the per-indicator parts the scoring workers encoded (block.ts; record layout: record.ts).
 */
import type { ItemKey } from './record.ts'

/** Fields shared by every history record of one request: the record minus its indicator half. */
export type HistoryEnvelope = Omit<HistoryRecord, ItemKey> & {
  /** Number of records in the parts (one per indicator). */
  count: number
}

/** History's state for the health check. */
export interface HistoryState {
  /** store_failing: the store fails and records wait in the journal; down: the writer thread is restarting. */
  status: 'ok' | 'store_failing' | 'down'
  reason: string | null
  /** Records journalled and not yet in the store. */
  pending: number
  /** Records written to the store since start. */
  written: number
  /** Bytes of a spool left by a version before the journal, not yet replayed. */
  legacySpoolBytes: number
  /** The error code of a journal write that failed in the last seconds (a full disk: `ENOSPC`), else null. */
  journalError: string | null
  /** Journal bytes not yet in the store (live), and the limit at which requests are refused. */
  journalBytes: number
  journalLimit: number
  /** Times the writer thread died and was replaced. */
  restarts: number
  /** Store transactions of history batches since start, and the seconds they took. */
  storeWrites: number
  storeWriteSeconds: number
}

/** Where requests send their history. */
export interface HistorySink {
  /** Makes one request's records durable (journal); resolves before the request may be answered. */
  submit: (envelope: HistoryEnvelope, parts: Uint8Array[]) => Promise<void>
  /** null while new requests may be admitted, else why not (journal full, shutting down). */
  refusal: () => string | null
  /** Current state for the health check. */
  state: () => HistoryState
  /** Writes everything pending. */
  flush: () => Promise<void>
  /** Flushes, then stops the writer; idempotent. */
  close: () => Promise<void>
}

/** Indicator as recorded in history: the value exactly as sent, plus its type and normalized form when known. */
export interface HistoryIndicator {
  type: string | null
  value: string
  normalized: string | null
}

/** Caller identification for audit logging: the request's `source` (docs/API.md "Request bodies"). */
export interface HistorySource {
  channel?: string
  product?: string
  integration_id?: string
  event_type?: string
  severity_hint?: string
}

/**
 * One history record: the retired history endpoint's record fields plus the project's own (docs/API.md "Auth, quotas,
 * history"); plain data, msgpack-friendly.
 */
export interface HistoryRecord {
  /** ISO 8601 with millisecond precision; stored and returned as `YYYY-MM-DDTHH:mm:ss.sssZ`. */
  date: string
  request_id: string
  /** Null for single calls. */
  bulk_request_id: string | null
  http_status: number
  /** 'api_key' for the verdict endpoints. */
  auth_type: string
  tenant: string
  /** The key id, never the key. */
  apikey: string
  indicator: HistoryIndicator
  evidence_details: string
  label_details: string
  risk: object | null
  scores: object | null
  labels: object[]
  label_count: number
  action_taken: string | null
  action_source: string | null
  source: HistorySource | null
  scoring_version: string | null
  query_type: string | null
  project_id: string | null
  project_name: string | null
  user_id: string | null
}

/** Filters of GET /api/v2/mgmt/enrich-logs/search-history (API.md); all optional and combined with AND. */
export interface SearchFilters {
  /** Inclusive lower bound, ISO 8601 date-time with offset, or a date (UTC midnight). */
  date_gte?: string
  /** Exclusive upper bound, same formats as date_gte. */
  date_lt?: string
  user_id?: string
  apikey?: string
  /** True drops every record that carries a bulk_request_id. */
  exclude_bulk_requests?: boolean
  auth_type?: string
  indicator_type?: string
  /** Matches `indicator.value` exactly as sent (not the normalized form; see searchHistory). */
  indicator_value?: string
}

/** One page of search results, newest first. */
export interface SearchPage {
  results: HistoryRecord[]
  /** Opaque; pass it back to get the next page. Null on the last page. */
  next_cursor: string | null
}
