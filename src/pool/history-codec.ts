/**
 * History records as they travel from scoring workers to the history writer.
 *
 * A scoring worker knows each indicator's verdict, so it writes each record's per-indicator half as JSON text once
 * (cached with the verdict) plus the three indexed columns; the writer only prepends the request envelope. No thread
 * parses and re-serializes records on the way to the store.
 */
import { Packr } from 'msgpackr'
import { column, optionalColumn, utcDayOf, type HistoryRow } from '../store/index.ts'
import type { HistoryEnvelope } from './history-types.ts'

/** Plain msgpack for arrays of strings: no record extension needed, same on both threads. */
const kPackr = new Packr({ useRecords: false })
/** Strings per encoded item: type, value, normalized, JSON fragment. */
const kStride = 4

/** Collects one chunk's history items (worker side). */
export class HistoryItems {
  private readonly flat: Array<string | null> = []

  /**
   * Adds one record. `fragment` is the JSON members `"indicator":...,"risk":...,"scores":...,"labels":...,
   * "label_count":...,"action_taken":...,"action_source":...` without braces.
   */
  add (type: string | null, value: string, normalized: string | null, fragment: string): void {
    this.flat.push(type, value, normalized, fragment)
  }

  /** The encoded items, in an owned buffer that can be transferred. */
  encode (): Uint8Array<ArrayBuffer> {
    const packed = kPackr.pack(this.flat)
    const out = new Uint8Array(packed.length)
    out.set(packed)
    return out
  }
}

/** The per-indicator JSON members of a record (everything that is not in the envelope). */
export function itemFragment (indicator: { type: string | null, value: string, normalized: string | null }, verdictMembers: string, actionTaken: string | null, actionSource: string | null): string {
  return `"indicator":${JSON.stringify(indicator)},${verdictMembers},"action_taken":${JSON.stringify(actionTaken)},"action_source":${JSON.stringify(actionSource)}`
}

/** Verdict members of a record for an invalid indicator. */
export const kInvalidVerdictMembers = '"risk":null,"scores":null,"labels":[],"label_count":0'

/** Expands one request's envelope and encoded parts into store rows (writer side). */
export function historyRows (envelope: HistoryEnvelope, parts: Uint8Array[], out: HistoryRow[]): void {
  const { count: _count, ...fields } = envelope
  const head = JSON.stringify(fields)
  // The envelope's members, then each item's: one string concatenation per record.
  const prefix = `${head.slice(0, -1)},`
  const ts = Date.parse(envelope.date)
  const day = utcDayOf(ts)
  const tenant = column(envelope.tenant)
  const requestId = column(envelope.request_id)
  const bulkRequestId = optionalColumn(envelope.bulk_request_id)
  const authType = column(envelope.auth_type)
  const apikey = column(envelope.apikey)
  const userId = optionalColumn(envelope.user_id)
  for (const part of parts) {
    const flat = kPackr.unpack(part) as Array<string | null>
    for (let i = 0; i + kStride <= flat.length; i += kStride) {
      out.push({
        ts,
        date: envelope.date,
        day,
        tenant,
        requestId,
        bulkRequestId,
        httpStatus: envelope.http_status,
        authType,
        apikey,
        userId,
        indicatorType: optionalColumn(flat[i]),
        indicatorValue: column(flat[i + 1] ?? ''),
        indicatorNormalized: optionalColumn(flat[i + 2]),
        doc: `${prefix}${flat[i + 3] as string}}`
      })
    }
  }
}
