/**
 * The history spool of versions before the journal (<data dir>/spool/history.spool): batches they could not write to
 * the store yet. The writer thread replays such a spool once at start, before the journal, and from then on it stays
 * empty; the same folder holds history.rejected, where the writer sets aside parts the store refuses.
 * Frames are [uint32 LE length][msgpack HistoryRow[]]; a sidecar file holds the offset already replayed,
 * so a restart resumes where the last replay stopped. Used only by the history worker thread (synchronous I/O
 * there blocks nothing but that thread).
 */
import { closeSync, existsSync, fstatSync, ftruncateSync, mkdirSync, openSync, readFileSync, readSync, renameSync, rmSync, writeFileSync, writeSync, fsyncSync } from 'node:fs'
import { join } from 'node:path'
import { Packr } from 'msgpackr'
import type { HistoryPart } from './block.ts'
import type { HistoryRow } from './rows.ts'

const kPackr = new Packr()

/** The legacy spool of one data directory, and its file of rejected parts. */
export class LegacySpool {
  private readonly file: string
  private readonly offsetFile: string
  private readonly rejectFile: string
  private fd: number
  private offset: number

  constructor (dir: string) {
    mkdirSync(dir, { recursive: true })
    this.file = join(dir, 'history.spool')
    this.offsetFile = join(dir, 'history.spool.offset')
    this.rejectFile = join(dir, 'history.rejected')
    this.fd = openSync(this.file, 'a+')
    this.offset = existsSync(this.offsetFile) ? Number(readFileSync(this.offsetFile, 'utf8')) || 0 : 0
    if (this.offset > this.size) this.offset = 0
    this.dropTornTail()
  }

  /**
   * Cuts a torn final frame (a crash mid-append) off the file. Left in place, the next append would land behind
   * it and the torn frame's length would swallow the new frame: replay would then decode garbage or stop forever.
   */
  private dropTornTail (): void {
    const size = this.size
    const head = Buffer.alloc(4)
    let pos = this.offset
    while (pos + 4 <= size) {
      readSync(this.fd, head, 0, 4, pos)
      const end = pos + 4 + head.readUInt32LE(0)
      if (end > size) break
      pos = end
    }
    if (pos < size) {
      ftruncateSync(this.fd, pos)
      fsyncSync(this.fd)
    }
  }

  /** Bytes on disk. */
  get size (): number {
    return fstatSync(this.fd).size
  }

  /** Bytes not yet replayed. */
  get backlog (): number {
    return this.size - this.offset
  }

  /** Appends one batch and syncs it to disk before returning, as versions before the journal did (tests make spools with it). */
  append (records: readonly HistoryRow[]): void {
    const body = kPackr.pack(records)
    const head = Buffer.alloc(4)
    head.writeUInt32LE(body.length)
    const before = this.size
    try {
      writeSync(this.fd, head)
      writeSync(this.fd, body)
      fsyncSync(this.fd)
    } catch (err) {
      // A partial frame (disk full) would corrupt every later frame: take it back before reporting the failure.
      try { ftruncateSync(this.fd, before) } catch {}
      throw err
    }
  }

  /**
   * Sets aside a batch the store refused as invalid (same frame format, in history.rejected), so one bad row
   * cannot block every record behind it; an operator can inspect or re-import it. A part that could not be decoded
   * into rows is set aside as it came (its request fields and encoded bytes).
   */
  reject (records: ReadonlyArray<HistoryRow | HistoryPart>): void {
    const body = kPackr.pack(records)
    const head = Buffer.alloc(4)
    head.writeUInt32LE(body.length)
    const fd = openSync(this.rejectFile, 'a')
    try {
      writeSync(fd, head)
      writeSync(fd, body)
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
  }

  /** The oldest batch not yet replayed, with the offset after it; null when the spool is drained. */
  peek (): { records: HistoryRow[], next: number } | null {
    if (this.backlog < 4) return null
    const head = Buffer.alloc(4)
    readSync(this.fd, head, 0, 4, this.offset)
    const len = head.readUInt32LE(0)
    if (this.offset + 4 + len > this.size) return null // a torn final frame (crash mid-append) is never replayed
    const body = Buffer.alloc(len)
    readSync(this.fd, body, 0, len, this.offset + 4)
    return { records: kPackr.unpack(body) as HistoryRow[], next: this.offset + 4 + len }
  }

  /** Marks the peeked batch as written. When everything is replayed the files are reset. */
  commit (next: number): void {
    this.offset = next
    if (this.offset >= this.size) {
      this.reset()
      return
    }
    const tmp = `${this.offsetFile}.tmp`
    writeFileSync(tmp, String(this.offset))
    renameSync(tmp, this.offsetFile)
  }

  private reset (): void {
    closeSync(this.fd)
    // Offset first: a crash between the two leaves a full spool with no offset, replayed again (duplicates), never
    // a stale offset that a new spool file could grow past (which would skip records).
    rmSync(this.offsetFile, { force: true })
    rmSync(this.file, { force: true })
    this.fd = openSync(this.file, 'a+')
    this.offset = 0
  }

  /** Closes the file (what is on disk stays for the next start). */
  close (): void {
    try {
      closeSync(this.fd)
    } catch {
      // Already closed.
    }
  }
}
