/**
 * What the request path hands to the history writer: one envelope per request (fields shared by its records)
 * plus the per-indicator parts the scoring workers encoded (history-codec.ts).
 */
import type { HistoryRecord } from '../store/index.ts'

/** Fields shared by every history record of one request: the record minus its indicator half. */
export type HistoryEnvelope = Omit<HistoryRecord, 'indicator' | 'risk' | 'scores' | 'labels' | 'label_count' | 'action_taken' | 'action_source'> & {
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
