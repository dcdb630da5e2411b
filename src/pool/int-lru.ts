/**
 * A least-recently-used map from small non-negative integers to small non-negative integers, in typed arrays: the
 * verdict cache's index (30-bit key hashes to ring offsets).
 *
 * Written by hand rather than taken from lru-cache, which the index used before: lru-cache is general (any key, TTLs,
 * fetches, disposal, status tracing) and a lookup went through an options object, a diagnostics-channel check and a
 * Map of 100,000 entries; on a bulk of cached verdicts the index took about 4% of a scoring thread's time. Here a
 * lookup is one probe sequence in an open-addressing table and two list links, with no allocation.
 *
 * Layout: entries live in slots 0..max-1 (keys, values, and a doubly linked recency list through prev/next, most
 * recent at `head`); `table` maps a key's home position (linear probing) to slot + 1 (0: empty). Deletion shifts later
 * entries of the probe run back, so no tombstones accumulate.
 */

const kNone = -1

/** An LRU map of up to `max` integer keys (0 <= key < 2^31) to integer values (0 <= value < 2^31). */
export class IntLru {
  readonly max: number
  private readonly keys: Int32Array
  private readonly values: Int32Array
  private readonly prev: Int32Array
  private readonly next: Int32Array
  private readonly table: Int32Array
  private readonly mask: number
  private head = kNone
  private tail = kNone
  private count = 0
  /** Slots never used yet start at `count`; freed ones (delete) are kept here. */
  private readonly free: Int32Array
  private freeTop = 0

  constructor (max: number) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError('max must be a positive integer')
    this.max = max
    this.keys = new Int32Array(max)
    this.values = new Int32Array(max)
    this.prev = new Int32Array(max)
    this.next = new Int32Array(max)
    this.free = new Int32Array(max)
    let size = 8
    while (size < 2 * max) size *= 2
    this.table = new Int32Array(size)
    this.mask = size - 1
  }

  /** Entries held. */
  get size (): number {
    return this.count
  }

  private home (key: number): number {
    return Math.imul(key, 0x9e3779b1) >>> 0 & this.mask
  }

  /** Table position of `key`, or -1. */
  private find (key: number): number {
    const table = this.table
    const mask = this.mask
    for (let i = this.home(key); ; i = (i + 1) & mask) {
      const slot = table[i] as number
      if (slot === 0) return kNone
      if (this.keys[slot - 1] === key) return i
    }
  }

  /** The value of `key`, made the most recent; -1 when absent. */
  get (key: number): number {
    const at = this.find(key)
    if (at === kNone) return kNone
    const slot = (this.table[at] as number) - 1
    this.touch(slot)
    return this.values[slot] as number
  }

  /** Sets `key` to `value`, made the most recent; the least recent entry goes when the map is full. */
  set (key: number, value: number): void {
    const at = this.find(key)
    if (at !== kNone) {
      const slot = (this.table[at] as number) - 1
      this.values[slot] = value
      this.touch(slot)
      return
    }
    if (this.count === this.max) this.delete(this.keys[this.tail] as number)
    const slot = this.freeTop > 0 ? this.free[--this.freeTop] as number : this.count
    this.count++
    this.keys[slot] = key
    this.values[slot] = value
    this.link(slot)
    const table = this.table
    let i = this.home(key)
    while (table[i] !== 0) i = (i + 1) & this.mask
    table[i] = slot + 1
  }

  /** Removes `key`; false when it was absent. */
  delete (key: number): boolean {
    let i = this.find(key)
    if (i === kNone) return false
    const slot = (this.table[i] as number) - 1
    this.unlink(slot)
    this.free[this.freeTop++] = slot
    this.count--
    // Backward-shift deletion: move each later entry of the run whose home is not between the hole and it.
    const table = this.table
    const mask = this.mask
    for (let j = (i + 1) & mask; table[j] !== 0; j = (j + 1) & mask) {
      const h = this.home(this.keys[(table[j] as number) - 1] as number)
      if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
        table[i] = table[j] as number
        i = j
      }
    }
    table[i] = 0
    return true
  }

  private link (slot: number): void {
    this.prev[slot] = kNone
    this.next[slot] = this.head
    if (this.head !== kNone) this.prev[this.head] = slot
    this.head = slot
    if (this.tail === kNone) this.tail = slot
  }

  private unlink (slot: number): void {
    const p = this.prev[slot] as number
    const n = this.next[slot] as number
    if (p !== kNone) this.next[p] = n
    else this.head = n
    if (n !== kNone) this.prev[n] = p
    else this.tail = p
  }

  private touch (slot: number): void {
    if (this.head === slot) return
    this.unlink(slot)
    this.link(slot)
  }
}
