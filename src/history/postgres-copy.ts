/**
 * PostgreSQL's binary COPY format, as the history writer sends its batches (postgres-history.ts): rows encoded here
 * and streamed with `COPY ... FROM STDIN (FORMAT binary)` through pg-copy-streams, which speaks the COPY protocol
 * for node-postgres.
 *
 * Layout (PostgreSQL documentation, COPY, "Binary Format"; big-endian):
 *   header  | "PGCOPY\n\xff\r\n\0" | int32 flags (0) | int32 header extension length (0)
 *   row     | int16 field count | per field: int32 byte length (-1 for NULL), then the value's binary form
 *   trailer | int16 -1
 * Binary forms written: int4 and int8 as two's complement; text as UTF-8; bytea as its bytes; boolean as one byte;
 * date as int4 days since 2000-01-01; timestamptz as int8 microseconds since 2000-01-01 00:00 UTC.
 *
 * Binary rather than text or CSV: history parts are bytea, which text COPY carries as hex (twice the bytes, encoded
 * here and decoded by the server), and large values go to the socket as they are, without a copy (see bytea()).
 * Written by hand because it is this short: pg-copy-streams-binary would build an object per field.
 * @see https://www.postgresql.org/docs/current/sql-copy.html#id-1.9.3.55.9.4
 */
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type pg from 'pg'
import { from as copyFrom } from 'pg-copy-streams'
import { ByteSink } from '../bytes/byte-sink.ts'

const kSignature = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1')
/** Epoch of PostgreSQL's date and timestamp binary forms (2000-01-01 UTC), in ms since 1970. */
const kPgEpochMs = 946_684_800_000
const kDayMs = 86_400_000
/** A bytea value at least this large is sent as its own chunk instead of being copied into the row buffer. */
const kOwnChunkBytes = 16 * 1024

/** Rows of one COPY, in binary format. */
export class CopyRows {
  readonly #chunks: Buffer[] = []
  readonly #sink = new ByteSink(64 * 1024)
  /** Rows written. */
  rows = 0

  constructor () {
    this.#sink.bytes(kSignature)
    this.#int32(0)
    this.#int32(0)
  }

  /** Starts a row of `fields` fields; write exactly that many values after it. */
  row (fields: number): this {
    this.#int16(fields)
    this.rows++
    return this
  }

  int4 (v: number): this {
    this.#int32(4)
    this.#int32(v)
    return this
  }

  int8 (v: number): this {
    this.#int32(8)
    this.#sink.reserve(8)
    this.#sink.buf.writeBigInt64BE(BigInt(v), this.#sink.len)
    this.#sink.len += 8
    return this
  }

  /** A text value (UTF-8; a lone surrogate becomes U+FFFD, as node-postgres sends text parameters), or NULL. */
  text (s: string | null): this {
    if (s === null) return this.#null()
    const sink = this.#sink
    sink.reserve(4)
    const at = sink.len
    sink.len += 4
    sink.write(s)
    sink.buf.writeInt32BE(sink.len - at - 4, at)
    return this
  }

  bytea (b: Uint8Array): this {
    this.#int32(b.byteLength)
    if (b.byteLength < kOwnChunkBytes) {
      this.#sink.bytes(b)
      return this
    }
    this.#cut()
    this.#chunks.push(Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength))
    return this
  }

  bool (v: boolean): this {
    this.#int32(1)
    this.#sink.byte(v ? 1 : 0)
    return this
  }

  /** A UTC day, `YYYY-MM-DD`. */
  date (day: string): this {
    this.#int32(4)
    this.#int32((Date.parse(`${day}T00:00:00.000Z`) - kPgEpochMs) / kDayMs)
    return this
  }

  /** A timestamp with time zone, from epoch ms. */
  timestamptz (ms: number): this {
    return this.int8((ms - kPgEpochMs) * 1000)
  }

  /** The encoded rows with the trailer, as chunks to send in order. */
  finish (): Buffer[] {
    this.#int16(-1)
    this.#cut()
    return this.#chunks
  }

  #null (): this {
    this.#int32(-1)
    return this
  }

  #int16 (v: number): void {
    const sink = this.#sink
    sink.reserve(2)
    sink.buf.writeInt16BE(v, sink.len)
    sink.len += 2
  }

  #int32 (v: number): void {
    const sink = this.#sink
    sink.reserve(4)
    sink.buf.writeInt32BE(v | 0, sink.len)
    sink.len += 4
  }

  /** Moves what the row buffer holds into a chunk of its own. */
  #cut (): void {
    if (this.#sink.len === 0) return
    this.#chunks.push(Buffer.from(this.#sink.buf.subarray(0, this.#sink.len)))
    this.#sink.clear()
  }
}

/** Sends `rows` with `COPY <target> FROM STDIN (FORMAT binary)` on a client (inside its transaction). */
export async function copyRows (client: pg.PoolClient, target: string, rows: CopyRows): Promise<void> {
  if (rows.rows === 0) return
  await pipeline(Readable.from(rows.finish()), client.query(copyFrom(`COPY ${target} FROM STDIN (FORMAT binary)`)))
}
