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

  private grow (need: number): void {
    if (this.len + need <= this.buf.length) return
    let size = this.buf.length * 2
    while (size < this.len + need) size *= 2
    const next = Buffer.allocUnsafe(size)
    this.buf.copy(next, 0, 0, this.len)
    this.buf = next
  }

  /** Appends `s` as UTF-8 (a lone surrogate becomes U+FFFD, as in any UTF-8 encoding of it). */
  write (s: string): void {
    this.grow(s.length * 3)
    this.len += this.buf.write(s, this.len, 'utf8')
  }

  bytes (b: Uint8Array): void {
    this.grow(b.length)
    this.buf.set(b, this.len)
    this.len += b.length
  }

  /** Appends one byte. */
  byte (c: number): void {
    this.grow(1)
    this.buf[this.len++] = c
  }

  /** Appends bytes `start` to `end` of `from` (one native copy, no view allocated). */
  copy (from: Buffer, start: number, end: number): void {
    this.grow(end - start)
    this.len += from.copy(this.buf, this.len, start, end)
  }

  /** A fresh, exactly sized copy (its own ArrayBuffer, so it can be transferred). */
  take (): Uint8Array {
    const out = new Uint8Array(this.len)
    out.set(this.buf.subarray(0, this.len))
    return out
  }
}
