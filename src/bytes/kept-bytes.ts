import { kCopy, type ByteSink } from './byte-sink.ts'

/** Slots and arena bytes a KeptBytes starts with. */
const kFirstSlots = 16
const kFirstBytes = 4096

/**
 * Byte strings kept under integer keys (0 to 2^53 - 1), for writers that copy what they wrote once for a key: the
 * threat_context of a fact group (member-writers.ts), the whole none tail of an unlisted address (chunk-writers.ts).
 *
 * Kept in one arena buffer with an open-addressing table of typed arrays, not a Map of small Uint8Arrays: each kept
 * entry was a new typed array and, for keys past 2^31, a new heap number in the map; with most addresses of a cold
 * bulk seen once, keeping cost more than the copies it saved (a profile of the engine bench: 6% of a scoring thread's
 * time in the map and the copies). Here keeping allocates nothing. Bounded: past `maxEntries` keys or a full arena,
 * everything kept is dropped and the table starts again (the bytes are written again as they come).
 */
export class KeptBytes {
  private readonly maxEntries: number
  private readonly maxBytes: number
  private mask = kFirstSlots - 1
  /** Key + 1 per slot (0: empty slot), its bytes' start and end in the arena. */
  private keys = new Float64Array(kFirstSlots)
  private starts = new Int32Array(kFirstSlots)
  private ends = new Int32Array(kFirstSlots)
  private arena = new Uint8Array(kFirstBytes)
  private used = 0
  private count = 0

  /**
   * At most `maxEntries` keys of `maxBytes` bytes in all. The table and the arena start small and double as they
   * fill, so a writer that keeps little holds little.
   */
  constructor (maxEntries: number, maxBytes: number) {
    this.maxEntries = maxEntries
    this.maxBytes = maxBytes
  }

  /** Keys kept. */
  get size (): number {
    return this.count
  }

  /** The slot of `key`: where it is, or the empty slot where it would go. */
  private slot (key: number): number {
    const low = key >>> 0
    const high = (key - low) / 4294967296
    let i = (Math.imul(low ^ Math.imul(high, 0x9e3779b1), 0x85ebca6b) >>> 7) & this.mask
    const want = key + 1
    for (;;) {
      const k = this.keys[i] as number
      if (k === want || k === 0) return i
      i = (i + 1) & this.mask
    }
  }

  /** Appends the bytes kept under `key` to `sink`; false when there are none. */
  copyTo (key: number, sink: ByteSink): boolean {
    const i = this.slot(key)
    if (this.keys[i] === 0) return false
    sink.copy(this.arena, this.starts[i] as number, this.ends[i] as number)
    return true
  }

  /** Keeps `sink`'s bytes from `start` to its end under `key` (a key kept already keeps its first bytes). */
  keep (key: number, sink: ByteSink, start: number): void {
    const n = sink.len - start
    if (n > this.maxBytes) return
    if (this.count >= this.maxEntries || this.used + n > this.maxBytes) this.clear()
    if (this.used + n > this.arena.length) this.growArena(this.used + n)
    if (2 * (this.count + 1) > this.mask + 1) this.growTable()
    const i = this.slot(key)
    if (this.keys[i] !== 0) return
    sink.buf.copy(this.arena, this.used, start, sink.len)
    this.keys[i] = key + 1
    this.starts[i] = this.used
    this.ends[i] = this.used + n
    this.used += n
    this.count++
  }

  /** Drops everything kept (the table and the arena stay as large as they grew). */
  clear (): void {
    this.keys.fill(0)
    this.used = 0
    this.count = 0
  }

  private growArena (need: number): void {
    let size = this.arena.length * 2
    while (size < need) size *= 2
    const next = new Uint8Array(Math.min(size, this.maxBytes))
    kCopy.call(this.arena, next, 0, 0, this.used)
    this.arena = next
  }

  /** Doubles the table, placing every key again. */
  private growTable (): void {
    const { keys, starts, ends } = this
    const slots = keys.length * 2
    this.mask = slots - 1
    this.keys = new Float64Array(slots)
    this.starts = new Int32Array(slots)
    this.ends = new Int32Array(slots)
    for (let j = 0; j < keys.length; j++) {
      const k = keys[j] as number
      if (k === 0) continue
      const i = this.slot(k - 1)
      this.keys[i] = k
      this.starts[i] = starts[j] as number
      this.ends[i] = ends[j] as number
    }
  }
}
