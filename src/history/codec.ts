/**
 * History records as they travel from scoring workers to the history writer.
 *
 * A scoring worker knows each indicator's verdict, so it writes each record's per-indicator half as JSON text once,
 * with the indicator's type, value and normalized form, into an encoded part (block.ts; the record's members: record.ts). The writer
 * pairs each request's parts with its envelope and hands them to the store, which keeps them as they are (SQLite) or
 * expands them into rows (PostgreSQL, history.rejected). No thread parses and re-serializes records on the way.
 */
import { column, newRequestUid, optionalColumn } from './rows.ts'
import { utcDayOf } from './utc-day.ts'
import type { HistoryRequestFields } from './rows.ts'
import { partCount, type HistoryPart } from './block.ts'
import type { HistoryEnvelope } from './types.ts'

export { HistoryItems } from './block.ts'

/**
 * One request's envelope and encoded parts as store parts, one uid per request (writer side). A part that cannot be
 * read (not a format this version writes) goes to `undecodable` when given, else throws.
 */
export function historyParts (envelope: HistoryEnvelope, parts: Uint8Array[], out: HistoryPart[], undecodable?: (part: HistoryPart) => void): void {
  const { count: _count, ...fields } = envelope
  const ts = Date.parse(envelope.date)
  // One uid per request: the store keeps the envelope once and the items refer to it.
  const head: HistoryRequestFields = {
    uid: newRequestUid(),
    ts,
    date: envelope.date,
    day: utcDayOf(ts),
    tenant: column(envelope.tenant),
    requestId: column(envelope.request_id),
    bulkRequestId: optionalColumn(envelope.bulk_request_id),
    httpStatus: envelope.http_status,
    authType: column(envelope.auth_type),
    apikey: column(envelope.apikey),
    userId: optionalColumn(envelope.user_id),
    envelope: JSON.stringify(fields)
  }
  for (const part of parts) {
    let count: number
    try {
      count = partCount(part)
    } catch (err) {
      if (undecodable === undefined) throw err
      undecodable({ ...head, count: 0, part })
      continue
    }
    if (count > 0) out.push({ ...head, count, part })
  }
}
