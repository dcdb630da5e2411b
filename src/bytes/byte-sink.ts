type Utf8Write = (this: Buffer, s: string, offset: number, length: number) => number
/**
 * Buffer's own UTF-8 writer, which `buf.write(s, offset, 'utf8')` calls after checking its arguments. Those checks
 * cost about as much as the write itself for the short strings of a verdict (0.17 against 0.09 us for 300 bytes,
 * measured), and the scoring hot path writes about ten per indicator with offsets it has already bounded. The
 * method is not part of Buffer's documented API, so when a Node.js version lacks it, `buf.write` takes over.
 */
const kUtf8Write = (Buffer.prototype as unknown as { utf8Write?: Utf8Write }).utf8Write

/**
 * Writes `s` as UTF-8 into `buf` at `at` and returns the bytes written. The caller guarantees `at <= buf.length`;
 * as with `buf.write`, what does not fit is cut at a character boundary.
 */
export function utf8Into (buf: Buffer, s: string, at: number): number {
  return kUtf8Write === undefined ? buf.write(s, at, 'utf8') : kUtf8Write.call(buf, s, at, buf.length - at)
}

/**
 * Writes `s` as UTF-8 into `buf` at `at` and returns the bytes written, as utf8Into does. Most strings a scoring
 * thread writes are short and ASCII (addresses, domains, hashes, cache keys): those are copied a byte at a time, which
 * for strings of a few dozen characters costs less than the native call; from the first other character on, the rest
 * goes through utf8Into. The caller has made room for 3 bytes per UTF-16 unit.
 */
export function textInto (buf: Buffer, s: string, at: number): number {
  const n = s.length
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i)
    if (c >= 0x80) return i + utf8Into(buf, i === 0 ? s : s.slice(i), at + i)
    buf[at + i] = c
  }
  return n
}

/**
 * Buffer's native copy, called on any Uint8Array: `kCopy.call(source, target, targetStart, sourceStart, sourceEnd)`.
 */
export const kCopy = Buffer.prototype.copy as (this: Uint8Array, target: Uint8Array, targetStart: number, sourceStart: number, sourceEnd: number) => number

/** Runs of bytes up to this long are appended with a loop (ByteSink.copy). */
const kLoopCopy = 32

/** Room a spare buffer may have beyond twice the output it takes. */
const kSpareSlack = 64 * 1024

/** Whether buffer `b` suits an output of `size` bytes: large enough, and not more than twice as large plus 64 KiB. */
function fitsOutput (b: ArrayBuffer, size: number): boolean {
  return b.byteLength >= size && b.byteLength <= 2 * size + kSpareSlack
}

/**
 * The buffer for an output of `size` bytes: `spare` when given and it suits (fitsOutput), else a new one with a
 * quarter to spare for the next output of about this size.
 */
export function outputBuffer (size: number, spare?: ArrayBuffer): ArrayBuffer {
  return spare !== undefined && fitsOutput(spare, size) ? spare : new ArrayBuffer(size + (size >> 2))
}

/**
 * Buffers whose bytes have been used up (merged, sent or stored), kept for the next outputs of the same kind.
 * A buffer outside the heap counts toward V8's heap limit of the thread that allocated or received it until a full
 * collection frees it; taken again, or transferred back to the thread that writes into it, it is counted once.
 * Keeps at most `keep` buffers of at most `maxBytes` each; a buffer is kept once however often it is handed back.
 */
export class SpareBuffers {
  private readonly free: ArrayBuffer[] = []
  private readonly keep: number
  private readonly maxBytes: number

  constructor (keep: number, maxBytes = 32 << 20) {
    this.keep = keep
    this.maxBytes = maxBytes
  }

  /** Buffers kept. */
  get size (): number {
    return this.free.length
  }

  /** Keeps `b` if there is room; the caller must not use it afterwards. */
  give (b: ArrayBufferLike): void {
    if (!(b instanceof ArrayBuffer) || b.byteLength === 0 || b.byteLength > this.maxBytes) return
    if (this.free.length >= this.keep || this.free.includes(b)) return
    this.free.push(b)
  }

  /** The most recently kept buffer, taken off the shelf. */
  pop (): ArrayBuffer | undefined {
    return this.free.pop()
  }

  /** A kept buffer that suits an output of `size` bytes (fitsOutput), taken off the shelf. */
  fit (size: number): ArrayBuffer | undefined {
    for (let i = this.free.length - 1; i >= 0; i--) {
      const b = this.free[i] as ArrayBuffer
      if (fitsOutput(b, size)) {
        this.free.splice(i, 1)
        return b
      }
    }
    return undefined
  }
}

/**
 * A growable byte buffer that strings are written into as UTF-8 as they are made, so that the text of a whole chunk
 * is never held as JavaScript strings (each of which the garbage collector would copy while the chunk is scored).
 */
export class ByteSink {
  buf: Buffer
  len = 0

  constructor (initialBytes = 64 * 1024) {
    this.buf = Buffer.allocUnsafe(Math.max(1024, initialBytes))
  }

  /** Makes room for `need` more bytes at `len` (the buffer may be replaced: read `buf` after calling). */
  reserve (need: number): void {
    if (this.len + need <= this.buf.length) return
    let size = this.buf.length * 2
    while (size < this.len + need) size *= 2
    const next = Buffer.allocUnsafe(size)
    this.buf.copy(next, 0, 0, this.len)
    this.buf = next
  }

  /** Appends `s` as UTF-8 (a lone surrogate becomes U+FFFD, as in any UTF-8 encoding of it). */
  write (s: string): void {
    this.reserve(s.length * 3)
    this.len += utf8Into(this.buf, s, this.len)
  }

  /** Appends the UTF-8 of `s`, as write() does, short ASCII strings a byte at a time (textInto). */
  text (s: string): void {
    this.reserve(s.length * 3)
    this.len += textInto(this.buf, s, this.len)
  }

  /**
   * Appends the JSON text of the string `s` (what JSON.stringify(s) returns) as UTF-8. Printable ASCII other than the
   * quote and the backslash needs no escaping and is copied as it is; anything else goes through JSON.stringify.
   */
  jsonString (s: string): void {
    const n = s.length
    this.reserve(n + 2)
    const buf = this.buf
    let p = this.len
    buf[p++] = 0x22
    for (let i = 0; i < n; i++) {
      const c = s.charCodeAt(i)
      if (c < 0x20 || c > 0x7e || c === 0x22 || c === 0x5c) {
        this.write(JSON.stringify(s))
        return
      }
      buf[p++] = c
    }
    buf[p++] = 0x22
    this.len = p
  }

  /** Appends the bytes of `b` (copy()). */
  bytes (b: Uint8Array): void {
    this.copy(b, 0, b.length)
  }

  /** Appends one byte. */
  byte (c: number): void {
    this.reserve(1)
    this.buf[this.len++] = c
  }

  /**
   * Appends bytes `start` to `end` of `from`. Most runs a scoring thread appends are short (a member's key, a tail's
   * head or end, a kept fact group): up to kLoopCopy bytes are copied in a loop, cheaper than any call; a longer run
   * with Buffer's native copy, which allocates nothing (a typed-array set() from a view of the run costs as much and
   * makes a view object per copy, the largest kind of garbage a scoring thread made per indicator).
   */
  copy (from: Uint8Array, start: number, end: number): void {
    const n = end - start
    this.reserve(n)
    if (n <= kLoopCopy) {
      const buf = this.buf
      let p = this.len
      for (let i = start; i < end; i++) buf[p++] = from[i] as number
      this.len = p
      return
    }
    kCopy.call(from, this.buf, this.len, start, end)
    this.len += n
  }

  /** Empties the sink for reuse; its buffer stays. */
  clear (): void {
    this.len = 0
  }

  /** Empties the sink and, if its buffer grew past `keepBytes`, lets it go for a buffer of `keepBytes`. */
  shrink (keepBytes: number): void {
    this.len = 0
    if (this.buf.length > keepBytes) this.buf = Buffer.allocUnsafe(Math.max(1024, keepBytes))
  }

  /**
   * A copy of the bytes in a buffer of their own (outputBuffer, over `spare` if it suits), so it can be transferred.
   * The view starts at 0 and ends at the last byte written.
   */
  take (spare?: ArrayBuffer): Uint8Array<ArrayBuffer> {
    const out = new Uint8Array(outputBuffer(this.len, spare), 0, this.len)
    out.set(this.buf.subarray(0, this.len))
    return out
  }
}
