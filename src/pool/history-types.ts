/**
 * What the request path hands to the history writer: one envelope per request (fields shared by its records)
 * plus the msgpack-encoded per-indicator parts the scoring workers produced.
 */
import type { HistorySource } from '../store/index.ts'

/** Fields shared by every history record of one request. */
export interface HistoryEnvelope {
  date: string
  request_id: string
  bulk_request_id: string | null
  http_status: number
  auth_type: string
  tenant: string
  apikey: string
  user_id: string | null
  evidence_details: string
  label_details: string
  source: HistorySource | null
  scoring_version: string | null
  query_type: string | null
  project_id: string | null
  project_name: string | null
  /** Number of records in the parts (one per indicator). */
  count: number
}

/** Where requests send their history. */
export interface HistorySink {
  /** Queues one request's records; the buffers are transferred. */
  submit: (envelope: HistoryEnvelope, parts: Uint8Array[]) => void
  /** null while new requests may be admitted, else why not (spool limit reached, writer down). */
  refusal: () => string | null
  /** Current state for the health check. */
  state: () => { status: 'ok' | 'spooling' | 'down', reason: string | null, pending: number, written: number, spoolBytes: number }
  /** Writes everything pending. */
  flush: () => Promise<void>
  /** Flushes, then stops the writer; idempotent. */
  close: () => Promise<void>
}
