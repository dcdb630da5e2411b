/**
 * The history journal: an append-only log of each request's history (its envelope and the scoring threads' encoded
 * parts, as they are) in the data directory, written on the main thread with group commit. Requests that finish
 * scoring while a write is in progress queue their frames; the next write appends them all with one writev to a file
 * opened with O_DSYNC (on libuv's thread pool, so the event loop keeps serving; it returns once the bytes are synced),
 * then releases every waiting answer.
 *
 * Positions are byte offsets that only grow, across files: the journal is a sequence of segment files named by the
 * position of their first byte. The history writer thread reads frames from the files (journal-reader.ts), writes
 * them to the store with the position after them in the same transaction, and reports that position; files wholly
 * below it are deleted here. On start, a torn last frame (a crash mid-write: never acknowledged) is cut off and a new
 * segment begins, so the writer replays exactly what is not in the store yet.
 *
 * Frame: [u32 LE payload length][u32 LE crc32(payload)][payload]; payload: [u32 envelope length][envelope JSON]
 * [u32 part count] then per part [u32 length][bytes].
 *
 * Preallocation: a segment's file is filled ahead of its frames with 0xFF bytes (in the background, in steps that grow
 * from 64 KiB to `preallocateBytes`), and groups are written over the fill at their offsets. An O_DSYNC write that
 * grows the file must also commit the file system's record of the new size; one within bytes already written and
 * synced commits only its data, which measured about a third less time and system CPU per group on ext4
 * (docs/PERFORMANCE.md). PostgreSQL zero-fills its WAL segments for the same reason. The fill ends a segment's frames:
 * a header of fill bytes gives a length past any file, where every version's scan stops (zeros would read as an
 * empty frame with a matching checksum to a version that checks lengths only against the file's size).
 */
import { randomUUID } from 'node:crypto'
import {
  closeSync, constants, existsSync, fstatSync, fsyncSync, ftruncateSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, renameSync,
  writeFileSync, writev
} from 'node:fs'
import { open, unlink, type FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import { crc32 } from 'node:zlib'
import { JournalRefusedError } from '../errors.ts'
import type { HistoryEnvelope } from './types.ts'

/** How the answer waits for its history (IOC_HISTORY_DURABILITY). */
export type Durability = 'sync' | 'async'

/** Settings of the journal. */
export interface JournalOptions {
  dir: string
  /** Bytes not yet in the store at which appends are refused (the request path answers 503 before scoring). */
  limit: number
  /** A segment file is closed and a new one begun past this size. */
  segmentBytes: number
  durability: Durability
  /** async: longest time a frame waits before its group is written and synced, in ms. */
  asyncWindowMs: number
  /** async: bytes waiting for a write beyond which new appends wait for the write, as in sync mode. */
  asyncWindowBytes: number
  /** Most fill bytes written ahead of a segment's frames at a time; 0 writes none (default kPreallocateBytes). */
  preallocateBytes?: number | undefined
}

/** Frame header bytes. */
export const kFrameHead = 8
/** Parts of a frame up to this many bytes in all are copied into its first buffer (encodeFrame). */
const kInlinePartBytes = 4096
/** Most fill bytes written ahead of a segment's frames at a time (JournalOptions.preallocateBytes). */
export const kPreallocateBytes = 4 * 1024 * 1024
/** The first step of a segment's fill: a new segment's first group waits for it (preallocate). */
const kFirstFill = 64 * 1024
/** The byte the fill is made of. */
export const kFillByte = 0xff
/** The shortest payload: its envelope's length and its part count. */
const kMinPayload = 8
/** Bytes of the fill buffer that preallocation writes several times over. */
const kFillChunk = 1024 * 1024
const kSegmentSuffix = '.journal'
const kIdFile = 'journal.id'

/** A segment file's name for its first position. */
export function segmentName (start: number): string {
  return `${start.toString(16).padStart(16, '0')}${kSegmentSuffix}`
}

/** Segment start positions found in a journal directory, ascending. */
export function listSegments (dir: string): number[] {
  const starts: number[] = []
  for (const name of readdirSync(dir)) {
    if (!name.endsWith(kSegmentSuffix)) continue
    const start = Number.parseInt(name.slice(0, -kSegmentSuffix.length), 16)
    if (Number.isSafeInteger(start) && segmentName(start) === name) starts.push(start)
  }
  return starts.sort((a, b) => a - b)
}

/** The journal directory's id (created once): the store keeps its position under it. */
export function journalId (dir: string): string {
  mkdirSync(dir, { recursive: true })
  const file = join(dir, kIdFile)
  if (existsSync(file)) {
    const id = readFileSync(file, 'utf8').trim()
    if (/^[0-9a-f-]{36}$/.test(id)) return id
  }
  const id = randomUUID()
  writeFileSync(`${file}.tmp`, id)
  renameSync(`${file}.tmp`, file)
  syncDir(dir)
  return id
}

function syncDir (dir: string): void {
  const fd = openSync(dir, 'r')
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/** Length of the valid frames at the start of a file (the rest is a torn write, never acknowledged). */
export function validLength (fd: number, size: number): number {
  const head = Buffer.alloc(kFrameHead)
  let pos = 0
  while (pos + kFrameHead <= size) {
    readSync(fd, head, 0, kFrameHead, pos)
    const len = head.readUInt32LE(0)
    if (!payloadFits(len, size - pos)) break
    const body = Buffer.allocUnsafe(len)
    readSync(fd, body, 0, len, pos + kFrameHead)
    if (crc32(body) !== head.readUInt32LE(4)) break
    pos += kFrameHead + len
  }
  return pos
}

/**
 * Whether a frame header's payload length can be a frame's in `room` bytes (header included): not the fill (a length
 * past any file), not zeros, not a length shorter than any payload. validLength and the reader both ask it.
 */
export function payloadFits (len: number, room: number): boolean {
  return len >= kMinPayload && kFrameHead + len <= room
}

/** Bytes of the next fill after `allocated` bytes of a segment: kFirstFill, then doubling, `most` at most. */
export function fillStep (allocated: number, most: number): number {
  return Math.min(most, Math.max(kFirstFill, allocated))
}

/**
 * One request's history as a frame's buffers (header first). The frame header, the envelope and the part lengths share
 * one buffer: a single call's frame is that buffer and its one part.
 */
export function encodeFrame (envelope: HistoryEnvelope, parts: readonly Uint8Array[]): { buffers: Uint8Array[], bytes: number } {
  const text = JSON.stringify(envelope)
  const envMax = 3 * text.length
  let partBytes = 0
  for (const p of parts) partBytes += p.byteLength
  // Small parts (a single call's, a few hundred bytes) are copied behind the envelope: one buffer and one checksum
  // call per frame cost less than the views and the checksum calls of each part.
  const inline = partBytes <= kInlinePartBytes
  const meta = Buffer.allocUnsafe(kFrameHead + 8 + envMax + 4 * parts.length + (inline ? partBytes : 0))
  const envLen = meta.write(text, kFrameHead + 4, envMax, 'utf8')
  meta.writeUInt32LE(envLen, kFrameHead)
  meta.writeUInt32LE(parts.length, kFrameHead + 4 + envLen)
  let at = kFrameHead + 8 + envLen
  if (inline) {
    for (const p of parts) {
      meta.writeUInt32LE(p.byteLength, at)
      meta.set(p, at + 4)
      at += 4 + p.byteLength
    }
    meta.writeUInt32LE(at - kFrameHead, 0)
    meta.writeUInt32LE(crc32(meta.subarray(kFrameHead, at)), 4)
    return { buffers: [meta.subarray(0, at)], bytes: at }
  }
  // Part lengths are interleaved with the parts: their headers are slices of meta, so no extra allocation per part.
  const buffers: Uint8Array[] = [meta.subarray(0, at)]
  let len = 8 + envLen
  let crc = crc32(meta.subarray(kFrameHead, at))
  for (const p of parts) {
    const h = meta.subarray(at, at + 4)
    h.writeUInt32LE(p.byteLength, 0)
    at += 4
    crc = crc32(p, crc32(h, crc))
    buffers.push(h, p)
    len += 4 + p.byteLength
  }
  meta.writeUInt32LE(len, 0)
  meta.writeUInt32LE(crc, 4)
  return { buffers, bytes: kFrameHead + len }
}

/** A frame's payload decoded: the envelope and views of its parts (into `payload`). */
export function decodeFrame (payload: Buffer): { envelope: HistoryEnvelope, parts: Uint8Array[] } {
  const envLen = payload.readUInt32LE(0)
  const envelope = JSON.parse(payload.toString('utf8', 4, 4 + envLen)) as HistoryEnvelope
  const n = payload.readUInt32LE(4 + envLen)
  const parts: Uint8Array[] = []
  let at = 8 + envLen
  for (let i = 0; i < n; i++) {
    const len = payload.readUInt32LE(at)
    parts.push(payload.subarray(at + 4, at + 4 + len))
    at += 4 + len
  }
  return { envelope, parts }
}

/** Appends waiting for the next group write. */
interface Group {
  buffers: Uint8Array[]
  bytes: number
  records: number
  waiters: Array<{ resolve: () => void, reject: (err: Error) => void }>
  /** Called once the group is on disk (or failed), whatever the mode: hands buffers back. */
  done: Array<() => void>
}

function emptyGroup (): Group {
  return { buffers: [], bytes: 0, records: 0, waiters: [], done: [] }
}

/** The main thread's journal. */
export class Journal {
  readonly id: string
  readonly dir: string
  private readonly options: JournalOptions
  private fh: FileHandle | null = null
  /** Start of the segment being appended to, and the segments before it (ascending). */
  private active: number
  private readonly older: number[]
  /** Position after the last synced frame: the writer may read up to here. */
  private durableEnd: number
  /** Position after the last queued frame. */
  private queuedEnd: number
  /** How far the store has it (the writer's last report). */
  private committedAt = 0
  private group: Group = emptyGroup()
  private writing: Promise<void> | null = null
  private timer: NodeJS.Timeout | null = null
  private failure: Error | null = null
  /** When the last group write failed (Date.now()) and its error code; 0 after a write succeeds. */
  private failedAt = 0
  private failedCode = ''
  private closed = false
  /** Bytes at the start of the active segment's file that are written and synced (frames, then fill). */
  private allocated = 0
  /** The fill being written after `allocated`, or null. */
  private filling: Promise<void> | null = null
  private fill: Buffer | null = null
  /** Groups synced but not yet in the store: their end positions and record counts, oldest first. */
  private readonly unstored: Array<{ end: number, records: number }> = []
  private unstoredRecords = 0
  /** Called with the new durable end after every group write. */
  onDurable: (end: number) => void = () => {}

  private constructor (options: JournalOptions, id: string, older: number[], start: number) {
    this.options = options
    this.dir = options.dir
    this.id = id
    this.older = older
    this.active = start
    this.durableEnd = start
    this.queuedEnd = start
  }

  /**
   * Opens the journal of a directory: cuts a torn frame off the last segment, then begins a new segment after it.
   * It runs once at startup, before the service listens (the scan is synchronous).
   */
  static async open (options: JournalOptions): Promise<Journal> {
    const id = journalId(options.dir)
    const starts = listSegments(options.dir)
    let next = 0
    const last = starts.at(-1)
    if (last !== undefined) {
      const fd = openSync(join(options.dir, segmentName(last)), 'r+')
      try {
        const size = fstatSync(fd).size
        const valid = validLength(fd, size)
        if (valid < size) {
          ftruncateSync(fd, valid)
          fsyncSync(fd)
        }
        next = last + valid
      } finally {
        closeSync(fd)
      }
    }
    // An empty last segment (nothing valid in it) is where the new one begins: it keeps its name.
    const journal = new Journal(options, id, last !== undefined && last === next ? starts.slice(0, -1) : starts, next)
    await journal.openSegment(next)
    return journal
  }

  private async openSegment (start: number): Promise<void> {
    const fh = await open(join(this.dir, segmentName(start)), kSegmentFlags)
    syncDir(this.dir)
    this.fh = fh
    this.active = start
    this.allocated = 0
    this.preallocate()
  }

  /**
   * Starts writing fill after the allocated bytes when fewer than half a step remain ahead of the frames, up to the
   * segment's size at most. Steps grow with the segment (the bytes allocated so far, from kFirstFill up to
   * `preallocateBytes`), so a new segment's first group waits for a small write, not a whole step. A group whose end
   * passes the allocated bytes waits for the fill being written (writeGroup), so fill never lands on a frame.
   */
  private preallocate (): void {
    const most = this.options.preallocateBytes ?? kPreallocateBytes
    if (most <= 0 || this.filling !== null || this.fh === null || this.failure !== null || this.closed) return
    const from = this.allocated
    const step = fillStep(from, most)
    if (from - (this.durableEnd - this.active) >= step / 2) return
    const to = Math.min(from + step, this.options.segmentBytes)
    if (to <= from) return
    this.fill ??= Buffer.alloc(Math.min(most, kFillChunk), kFillByte)
    const fill = this.fill
    const buffers: Buffer[] = []
    for (let left = to - from; left > 0; left -= fill.length) buffers.push(left >= fill.length ? fill : fill.subarray(0, left))
    const fd = this.fh.fd
    this.filling = (async () => {
      try {
        let written = 0
        while (written < to - from) written += await writevFd(fd, written === 0 ? buffers : remaining(buffers, written), from + written)
        this.allocated = Math.max(this.allocated, to)
      } catch {
        // No room for the fill (a full disk): groups grow the file as they are written, and report the error themselves.
      } finally {
        this.filling = null
      }
    })()
  }

  /** Where the writer may read up to. */
  get durable (): number {
    return this.durableEnd
  }

  /** Bytes journalled (or queued) and not yet in the store. */
  get bytes (): number {
    return this.queuedEnd - Math.max(this.committedAt, this.older[0] ?? this.active)
  }

  /** Records synced and not yet in the store, of this run (a replay of an earlier run's journal is not counted). */
  get pendingRecords (): number {
    return this.unstoredRecords + this.group.records
  }

  /**
   * Why the last write failed (`ENOSPC` ...) when one failed within `windowMs` and none succeeded since, else null.
   * Appends are still taken (each tries the disk again), so a freed disk serves again at once; health and readiness
   * report the failure meanwhile. A window, not a latch: a probe that took an instance out of rotation must see it
   * ready again once the disk is back, though no request has written since.
   */
  writeFailure (windowMs = 5_000, now = Date.now()): string | null {
    if (this.failure !== null) return (this.failure as NodeJS.ErrnoException).code ?? 'write error'
    return this.failedAt !== 0 && now - this.failedAt < windowMs ? this.failedCode : null
  }

  /** Why appends are refused now, or null. */
  refusal (): string | null {
    if (this.closed) return 'service is shutting down'
    if (this.failure !== null) return 'history journal cannot be written; retry later'
    if (this.bytes >= this.options.limit) return 'history journal is full; retry later'
    return null
  }

  /**
   * Queues one request's history. Resolves once it is synced to disk (sync), or at once (async, unless the window's
   * bytes are full). `done` runs once the bytes are written or failed: the parts' buffers may be reused from then.
   */
  async append (envelope: HistoryEnvelope, parts: readonly Uint8Array[], done: () => void): Promise<void> {
    if (this.closed) throw new JournalRefusedError('service is shutting down')
    if (this.failure !== null) throw new JournalRefusedError('history journal cannot be written', { cause: this.failure })
    const frame = encodeFrame(envelope, parts)
    const g = this.group
    for (const b of frame.buffers) g.buffers.push(b)
    g.bytes += frame.bytes
    g.records += envelope.count
    g.done.push(done)
    this.queuedEnd += frame.bytes
    const wait = this.options.durability === 'sync' || g.bytes >= this.options.asyncWindowBytes
    const durable = wait ? new Promise<void>((resolve, reject) => { g.waiters.push({ resolve, reject }) }) : null
    this.schedule(wait)
    if (durable !== null) await durable
  }

  /** Starts a group write now (sync) or within the window (async). */
  private schedule (now: boolean): void {
    if (this.writing !== null) return // the running write starts the next group when it ends
    if (now) {
      if (this.timer !== null) clearTimeout(this.timer)
      this.timer = null
      this.writing = this.writeGroups()
    } else if (this.timer === null) {
      this.timer = setTimeout(() => {
        this.timer = null
        if (this.writing === null) this.writing = this.writeGroups()
      }, this.options.asyncWindowMs)
    }
  }

  /** Writes queued groups one after another until none is left. */
  private async writeGroups (): Promise<void> {
    // One turn of the event loop first, so answers finishing together share the write.
    await new Promise<void>((resolve) => setImmediate(resolve))
    try {
      while (this.group.bytes > 0) {
        const g = this.group
        this.group = emptyGroup()
        await this.writeGroup(g)
      }
    } finally {
      this.writing = null
    }
  }

  private async writeGroup (g: Group): Promise<void> {
    const fh = this.fh as FileHandle
    const before = this.durableEnd - this.active
    try {
      if (this.failure !== null) throw this.failure
      // Fill being written where this group goes: it lands first (else the group grows the file itself).
      if (before + g.bytes > this.allocated && this.filling !== null) await this.filling
      let written = 0
      // O_DSYNC: each writev returns once its bytes (and the file size that reaches them) are on the disk.
      while (written < g.bytes) written += await writevFd(fh.fd, written === 0 ? g.buffers : remaining(g.buffers, written), before + written)
      this.allocated = Math.max(this.allocated, before + g.bytes)
    } catch (err) {
      this.failedAt = Date.now()
      this.failedCode = (err as NodeJS.ErrnoException).code ?? 'write error'
      // A partial group would break every later frame: take it back; if even that fails, refuse appends from now on.
      try {
        if (this.filling !== null) await this.filling
        await fh.truncate(before)
        this.allocated = before
      } catch (e) {
        this.failure = e as Error
      }
      this.queuedEnd -= g.bytes + this.group.bytes
      const pending = this.group
      this.group = emptyGroup()
      for (const x of [g, pending]) {
        for (const w of x.waiters) w.reject(new JournalRefusedError('history journal write failed', { cause: err }))
        for (const d of x.done) d()
      }
      return
    }
    this.failedAt = 0
    this.durableEnd += g.bytes
    this.unstored.push({ end: this.durableEnd, records: g.records })
    this.unstoredRecords += g.records
    for (const w of g.waiters) w.resolve()
    for (const d of g.done) d()
    this.onDurable(this.durableEnd)
    if (this.durableEnd - this.active >= this.options.segmentBytes && this.group.bytes === 0) await this.rotate()
    else this.preallocate()
  }

  /**
   * Begins a new segment after the current one. The closed segment joins `older` only once the new one is active, in
   * the same turn: collect() bounds each older segment by the next one's start (or the active one's), and a commit
   * report handled while the new file opens would otherwise bound the closed segment by its own start and delete it
   * with frames the writer has not read.
   */
  private async rotate (): Promise<void> {
    const fh = this.fh as FileHandle
    if (this.filling !== null) await this.filling
    await fh.close()
    const closed = this.active
    await this.openSegment(this.durableEnd)
    this.older.push(closed)
    this.collect()
  }

  /** The writer has stored everything before `position`: segments wholly before it go. */
  committed (position: number): void {
    if (position <= this.committedAt) return
    this.committedAt = position
    while (this.unstored.length > 0 && (this.unstored[0] as { end: number }).end <= position) {
      this.unstoredRecords -= (this.unstored.shift() as { records: number }).records
    }
    this.collect()
  }

  private collect (): void {
    while (this.older.length > 0) {
      const start = this.older[0] as number
      const end = this.older[1] ?? this.active
      if (end > this.committedAt) return
      this.older.shift()
      unlink(join(this.dir, segmentName(start))).catch(() => {})
    }
  }

  /** Resolves once everything queued so far is synced (or failed). */
  async settle (): Promise<void> {
    if (this.group.bytes > 0 && this.writing === null) {
      if (this.timer !== null) clearTimeout(this.timer)
      this.timer = null
      this.writing = this.writeGroups()
    }
    while (this.writing !== null) await this.writing
  }

  /** Writes what is queued (async mode's window), then closes the file; idempotent. */
  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    await this.settle()
    if (this.filling !== null) await this.filling
    await this.fh?.close()
  }
}

/**
 * A segment is opened with O_DSYNC, so a group's writev is also its sync: one trip to libuv's thread pool per group
 * instead of a writev and an fdatasync. Each trip wakes a pool thread and, when it ends, the event loop; on a virtual
 * machine where every system call and wake-up is dear, the second trip cost the main thread more than encoding a group
 * of single calls' frames. The durability is the same: POSIX's synchronized I/O data integrity completion, which is
 * what fdatasync gives the bytes it covers. Not O_APPEND: groups are written at their offsets, over the fill written
 * ahead of them (preallocate).
 */
const kSegmentFlags = constants.O_WRONLY | constants.O_CREAT | constants.O_DSYNC

/**
 * writev on the file's descriptor through the callback API: FileHandle's promise methods added more main-thread work
 * per trip than a group of single calls' frames costs to encode. The FileHandle still owns the descriptor (opened,
 * truncated and closed through it).
 */
async function writevFd (fd: number, buffers: Uint8Array[], position: number): Promise<number> {
  return await new Promise((resolve, reject) => {
    writev(fd, buffers, position, (err, n) => { if (err === null || err === undefined) resolve(n); else reject(err) })
  })
}

/** The buffers after the first `skip` bytes (a short writev). */
function remaining (buffers: readonly Uint8Array[], skip: number): Uint8Array[] {
  const out: Uint8Array[] = []
  for (const b of buffers) {
    if (skip >= b.byteLength) {
      skip -= b.byteLength
      continue
    }
    out.push(skip > 0 ? b.subarray(skip) : b)
    skip = 0
  }
  return out
}
