/**
 * Reads the history journal (journal.ts) for the history writer thread: whole frames from a position up to the
 * durable end the main thread reported, across segment files. Synchronous I/O: it blocks only the writer's thread.
 * A read lists the segment files and takes each one's size once, and reads ahead in blocks: a single verdict's frame
 * is a few hundred bytes, and a directory listing, a stat and two reads per frame had cost the writer more than the
 * store's own work for it.
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs'
import { join } from 'node:path'
import { crc32 } from 'node:zlib'
import { decodeFrame, kFrameHead, listSegments, payloadFits, segmentName } from './journal.ts'
import type { HistoryEnvelope } from './types.ts'

/** One journalled request. */
export interface JournalFrame { envelope: HistoryEnvelope, parts: Uint8Array[] }

/** What read() found. */
export interface JournalRead {
  frames: JournalFrame[]
  /** Position after the last frame read (where the next read starts). */
  next: number
  records: number
  /** Bytes skipped as unreadable (a damaged frame: the rest of its segment is skipped). */
  skipped: number
}

/** Bytes read ahead at once (a frame larger than this is read whole). */
/** Journal bytes waiting at which the writer writes a batch without waiting for its flush interval. */
export const kEagerBytes = 4 * 1024 * 1024

/**
 * What the main thread and the writer share of the journal's state, in one SharedArrayBuffer: the durable end (a
 * BigInt64 at byte 0) and the writer's wake flag (an Int32 at byte 8: 1 while it is idle with nothing scheduled, so
 * that the next synced group must tell it; 0 while a pass or a flush is scheduled, which reads the end from here).
 * A group's message (postMessage and its event on the writer) then goes out once per flush interval, not per group.
 */
export class SharedDurable {
  readonly buffer: SharedArrayBuffer
  private readonly end: BigInt64Array
  private readonly wake: Int32Array

  constructor (buffer = new SharedArrayBuffer(16)) {
    this.buffer = buffer
    this.end = new BigInt64Array(buffer, 0, 1)
    this.wake = new Int32Array(buffer, 8, 1)
  }

  /** The durable end the main thread published last. */
  get durable (): number {
    return Number(Atomics.load(this.end, 0))
  }

  /** Main thread: publishes a new durable end; true when the writer must be told (it asked to be woken). */
  publish (end: number): boolean {
    Atomics.store(this.end, 0, BigInt(end))
    return Atomics.exchange(this.wake, 0, 0) === 1
  }

  /** Writer: asks to be told of the next synced group. */
  sleep (): void {
    Atomics.store(this.wake, 0, 1)
  }

  /** Writer: takes its wake request back; true when it was still up (no message is on its way for it). */
  wakeTaken (): boolean {
    return Atomics.exchange(this.wake, 0, 0) === 1
  }
}

const kReadAhead = 1 << 20

/** The frame of a payload whose checksum matched, or null when it does not decode (damaged). */
function decoded (payload: Buffer): JournalFrame | null {
  try {
    return decodeFrame(payload)
  } catch {
    return null
  }
}

/** Sequential reader of one journal directory. */
export class JournalReader {
  private readonly dir: string
  private fd: number | null = null
  private segStart = -1

  constructor (dir: string) {
    this.dir = dir
  }

  /** The segment holding `pos` among `starts`: its start and the next segment's start (Infinity for the last). */
  private locate (starts: readonly number[], pos: number): { start: number, end: number } | null {
    let start: number | undefined
    let end = Number.POSITIVE_INFINITY
    for (const s of starts) {
      if (s <= pos) start = s
      else { end = s; break }
    }
    if (start === undefined) {
      // Everything before the oldest file is in the store already (its files were deleted).
      const first = starts[0]
      return first === undefined ? null : { start: first, end: starts[1] ?? Number.POSITIVE_INFINITY }
    }
    return { start, end }
  }

  private file (start: number): number {
    if (this.segStart !== start || this.fd === null) {
      this.close()
      this.fd = openSync(join(this.dir, segmentName(start)), 'r')
      this.segStart = start
    }
    return this.fd
  }

  /** Frames from `from` up to `until`, stopping after `maxRecords` records or `maxBytes` bytes (whole frames). */
  read (from: number, until: number, maxRecords: number, maxBytes: number): JournalRead {
    const out: JournalRead = { frames: [], next: from, records: 0, skipped: 0 }
    // A segment begun after this listing is read by the next call (the last one listed ends at its own size).
    const starts = listSegments(this.dir)
    const sizes = new Map<number, number>()
    /** Bytes of one segment read ahead: `block` holds the segment's bytes from offset `blockAt`. */
    let block = Buffer.alloc(0)
    let blockSeg = -1
    let blockAt = 0
    /** A view of `len` bytes at offset `off` of the segment, from the block, reading ahead when it lacks them. */
    const view = (fd: number, seg: number, off: number, len: number, size: number): Buffer => {
      if (blockSeg !== seg || off < blockAt || off + len > blockAt + block.length) {
        const want = Math.min(size - off, Math.max(len, kReadAhead))
        block = Buffer.allocUnsafe(want)
        let got = 0
        while (got < want) {
          const n = readSync(fd, block, got, want - got, off + got)
          if (n === 0) break
          got += n
        }
        block = block.subarray(0, got)
        blockSeg = seg
        blockAt = off
      }
      return block.subarray(off - blockAt, off - blockAt + len)
    }
    let bytes = 0
    while (out.next < until && out.records < maxRecords && bytes < maxBytes) {
      const seg = this.locate(starts, out.next)
      if (seg === null) break
      if (out.next < seg.start) out.next = seg.start
      if (out.next >= seg.end) continue
      const fd = this.file(seg.start)
      const off = out.next - seg.start
      let size = sizes.get(seg.start)
      // Bounded by `until`: the active segment's file holds fill written ahead of its frames (journal.ts), which
      // neither the checks below nor the read-ahead must take for bytes to read.
      if (size === undefined) sizes.set(seg.start, size = Math.min(fstatSync(fd).size, until - seg.start))
      if (off + kFrameHead > size) {
        // The end of an older segment (or of the active one, not written yet): go on with the next, if any.
        if (seg.end === Number.POSITIVE_INFINITY) break
        out.skipped += Math.max(0, seg.end - out.next)
        out.next = seg.end
        continue
      }
      const head = view(fd, seg.start, off, kFrameHead, size)
      const len = head.readUInt32LE(0)
      const crc = head.readUInt32LE(4)
      const payload = payloadFits(len, size - off) ? view(fd, seg.start, off + kFrameHead, len, size) : null
      // A payload that decodes: zeros where a frame was (a block lost on disk) pass the checksum as an empty payload.
      const frame = payload === null || payload.length < len || crc32(payload) !== crc ? null : decoded(payload)
      if (frame === null) {
        // Damaged on disk after it was synced (it was whole when written): the rest of this segment cannot be framed.
        if (seg.end === Number.POSITIVE_INFINITY) {
          out.skipped += until - out.next
          out.next = until
          break
        }
        out.skipped += seg.end - out.next
        out.next = seg.end
        continue
      }
      out.frames.push(frame)
      out.records += frame.envelope.count
      out.next += kFrameHead + len
      bytes += kFrameHead + len
    }
    return out
  }

  close (): void {
    if (this.fd !== null) closeSync(this.fd)
    this.fd = null
    this.segStart = -1
  }
}
