/**
 * History records as they travel from scoring workers to the history writer.
 *
 * A scoring worker knows each indicator's verdict, so it writes each record's per-indicator half as JSON text once
 * (cached with the verdict) plus the three indexed columns; the writer only prepends the request envelope. No thread
 * parses and re-serializes records on the way to the store.
 */
import { randomUUID } from 'node:crypto'
import { ByteSink } from './byte-sink.ts'
import { column, optionalColumn, utcDayOf, type HistoryRow } from '../store/index.ts'
import type { HistoryEnvelope } from './history-types.ts'

/** Strings per encoded item: type, value, normalized, JSON fragment. */
const kStride = 4
/** End offset marking a null string. */
const kNull = 0xffffffff

/** Collects one chunk's history items (worker side). */
export class HistoryItems {
  /** Every string so far, as UTF-8, back to back: written as each arrives, so none of them outlives its item. */
  private readonly text: ByteSink
  /** End offset of each string in UTF-16 code units (kNull for null). */
  private ends: Uint32Array
  private n = 0
  private end = 0

  /** `expected`: items the chunk will add, to size the buffers once (they grow past it). */
  constructor (expected = 1) {
    this.text = new ByteSink(expected * 384)
    this.ends = new Uint32Array(Math.max(1, expected) * kStride)
  }

  /**
   * Adds one record. `fragment` is the JSON members `"indicator":...,"risk":...,"scores":...,"labels":...,
   * "label_count":...,"action_taken":...,"action_source":...` without braces.
   */
  add (type: string | null, value: string, normalized: string | null, fragment: string): void {
    if (this.n + kStride > this.ends.length) {
      const next = new Uint32Array(this.ends.length * 2)
      next.set(this.ends)
      this.ends = next
    }
    this.push(type)
    this.push(value)
    this.push(normalized)
    this.push(fragment)
    // One native write for the four: offsets count UTF-16 units, so they hold for the joined text. Not where a string
    // ends in a high surrogate: joined, it could pair with the next string's low one (each half alone is replaced).
    if (endsHigh(type) || endsHigh(value) || endsHigh(normalized)) {
      for (const str of [type, value, normalized, fragment]) if (str !== null && str.length > 0) this.text.write(str)
    } else {
      this.text.write((type ?? '') + value + (normalized ?? '') + fragment)
    }
  }

  private push (str: string | null): void {
    if (str === null) {
      this.ends[this.n++] = kNull
      return
    }
    this.end += str.length
    this.ends[this.n++] = this.end
  }

  /**
   * The encoded items, in an owned buffer that can be transferred. Layout: uint32 string count n, n uint32 end
   * offsets in UTF-16 code units into the joined text (0xffffffff for null), then the joined text as UTF-8.
   * The reader decodes the text with one native call and slices it by the offsets: counting code units, the offsets
   * hold even where UTF-8 replaced a lone surrogate (one unit either way).
   */
  encode (): Uint8Array<ArrayBuffer> {
    const n = this.n
    const head = 4 + 4 * n
    const out = Buffer.allocUnsafeSlow(head + this.text.len)
    out.writeUInt32LE(n, 0)
    for (let i = 0; i < n; i++) out.writeUInt32LE(this.ends[i] as number, 4 + 4 * i)
    this.text.buf.copy(out, head, 0, this.text.len)
    return new Uint8Array(out.buffer, 0, head + this.text.len) as Uint8Array<ArrayBuffer>
  }
}

function endsHigh (s: string | null): boolean {
  if (s === null || s.length === 0) return false
  const c = s.charCodeAt(s.length - 1)
  return c >= 0xd800 && c <= 0xdbff
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
