/**
 * History records as they travel from scoring workers to the history writer.
 *
 * A scoring worker knows each indicator's verdict, so it writes each record's per-indicator half as JSON text once
 * (cached with the verdict) plus the three indexed columns; the writer only prepends the request envelope. No thread
 * parses and re-serializes records on the way to the store.
 */
import { randomUUID } from 'node:crypto'
import { column, optionalColumn, utcDayOf, type HistoryRow } from '../store/index.ts'
import type { HistoryEnvelope } from './history-types.ts'

/** Strings per encoded item: type, value, normalized, JSON fragment. */
const kStride = 4
/** End offset marking a null string. */
const kNull = 0xffffffff

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

  /**
   * The encoded items, in an owned buffer that can be transferred. Layout: uint32 string count n, n uint32 end
   * offsets in UTF-16 code units into the joined text (0xffffffff for null), then the joined text as UTF-8.
   * One native write here and one native read on the writer's side, however many strings: offsets count code
   * units, so the reader slices the decoded text instead of decoding each string.
   */
  encode (): Uint8Array<ArrayBuffer> {
    const n = this.flat.length
    const head = 4 + 4 * n
    const text = this.flat.join('') // a null joins as ''
    const out = Buffer.allocUnsafeSlow(head + Buffer.byteLength(text))
    out.writeUInt32LE(n, 0)
    let end = 0
    for (let i = 0; i < n; i++) {
      const str = this.flat[i] as string | null
      if (str === null) {
        out.writeUInt32LE(kNull, 4 + 4 * i)
        continue
      }
      end += str.length
      out.writeUInt32LE(end, 4 + 4 * i)
    }
    const written = out.write(text, head, 'utf8')
    return new Uint8Array(out.buffer, 0, head + written) as Uint8Array<ArrayBuffer>
  }
}

/** Decodes what HistoryItems.encode produced. */
function decodeStrings (part: Uint8Array): Array<string | null> {
  const buf = Buffer.from(part.buffer, part.byteOffset, part.byteLength)
  const n = buf.readUInt32LE(0)
  const head = 4 + 4 * n
  const text = buf.toString('utf8', head)
  const out: Array<string | null> = new Array(n)
  let start = 0
  for (let i = 0; i < n; i++) {
    const end = buf.readUInt32LE(4 + 4 * i)
    if (end === kNull) {
      out[i] = null
      continue
    }
    out[i] = text.slice(start, end)
    start = end
  }
  return out
}

/** The per-indicator JSON members of a record (everything that is not in the envelope). */
export function itemFragment (indicator: { type: string | null, value: string, normalized: string | null }, verdictMembers: string, actionTaken: string | null, actionSource: string | null): string {
  return fragmentOf(JSON.stringify(indicator), verdictMembers, actionTaken, actionSource)
}

/** itemFragment with the indicator object already as JSON text. */
export function fragmentOf (indicatorJson: string, verdictMembers: string, actionTaken: string | null, actionSource: string | null): string {
  return `"indicator":${indicatorJson},${verdictMembers},"action_taken":${JSON.stringify(actionTaken)},"action_source":${JSON.stringify(actionSource)}`
}

/** Verdict members of a record for an invalid indicator. */
export const kInvalidVerdictMembers = '"risk":null,"scores":null,"labels":[],"label_count":0'

/** Expands one request's envelope and encoded parts into store rows (writer side). */
export function historyRows (envelope: HistoryEnvelope, parts: Uint8Array[], out: HistoryRow[]): void {
  const { count: _count, ...fields } = envelope
  const json = JSON.stringify(fields)
  // One uid per request: the store keeps the envelope once and the rows refer to it.
  const uid = randomUUID()
  const ts = Date.parse(envelope.date)
  const day = utcDayOf(ts)
  const tenant = column(envelope.tenant)
  const requestId = column(envelope.request_id)
  const bulkRequestId = optionalColumn(envelope.bulk_request_id)
  const authType = column(envelope.auth_type)
  const apikey = column(envelope.apikey)
  const userId = optionalColumn(envelope.user_id)
  for (const part of parts) {
    const flat = decodeStrings(part)
    for (let i = 0; i + kStride <= flat.length; i += kStride) {
      out.push({
        uid,
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
        envelope: json,
        item: flat[i + 3] as string
      })
    }
  }
}
