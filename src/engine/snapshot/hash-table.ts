/**
 * Open-addressing hash table over 64-bit keys (two 32-bit lanes) with linear probing.
 * Values are uint32 and 0 means "empty", so callers store index + 1.
 */

/** Read side: works on views of a shared buffer. */
export class HashTableView {
  readonly keys: Uint32Array
  readonly vals: Uint32Array
  readonly mask: number

  constructor (keys: Uint32Array, vals: Uint32Array) {
    this.keys = keys
    this.vals = vals
    this.mask = vals.length - 1
  }

  /** Value stored for the key, or 0. */
  get (h1: number, h2: number): number {
    const { keys, vals, mask } = this
    let slot = h1 & mask
    for (;;) {
      const v = vals[slot] as number
      if (v === 0) return 0
      if (keys[slot * 2] === h1 && keys[slot * 2 + 1] === h2) return v
      slot = (slot + 1) & mask
    }
  }
}

/** Slots of a table sized for at most `maxEntries` keys (a power of two, load factor <= 0.5). */
export function tableCapacity (maxEntries: number): number {
  let cap = 16
  while (cap < maxEntries * 2) cap *= 2
  return cap
}

/**
 * Build side: sized once for a known maximum count (load factor <= 0.5). Given `arrays` (zeroed, of the sizes
 * tableCapacity gives), it fills them in place, so a compiler can build the table inside the snapshot's own buffer.
 */
export class HashTableBuilder extends HashTableView {
  size = 0

  constructor (maxEntries: number, arrays?: { keys: Uint32Array, vals: Uint32Array }) {
    const cap = tableCapacity(maxEntries)
    if (arrays !== undefined && (arrays.vals.length !== cap || arrays.keys.length !== cap * 2)) throw new Error('hash table arrays of the wrong size')
    super(arrays?.keys ?? new Uint32Array(cap * 2), arrays?.vals ?? new Uint32Array(cap))
  }

  /** Stores a non-zero value for the key and returns the value it replaced (0 when the key is new). */
  swap (h1: number, h2: number, value: number): number {
    if (value === 0) throw new Error('hash table values must be non-zero')
    const { keys, vals, mask } = this
    let slot = h1 & mask
    for (;;) {
      const v = vals[slot] as number
      if (v === 0) break
      if (keys[slot * 2] === h1 && keys[slot * 2 + 1] === h2) {
        vals[slot] = value
        return v
      }
      slot = (slot + 1) & mask
    }
    if (++this.size * 2 > vals.length) throw new Error('hash table over capacity')
    keys[slot * 2] = h1
    keys[slot * 2 + 1] = h2
    vals[slot] = value
    return 0
  }

  /** Stores a non-zero value for the key, replacing any previous one. */
  set (h1: number, h2: number, value: number): void {
    if (value === 0) throw new Error('hash table values must be non-zero')
    const { keys, vals, mask } = this
    let slot = h1 & mask
    while (vals[slot] !== 0 && !(keys[slot * 2] === h1 && keys[slot * 2 + 1] === h2)) slot = (slot + 1) & mask
    if (vals[slot] === 0) {
      if (++this.size * 2 > vals.length) throw new Error('hash table over capacity')
      keys[slot * 2] = h1
      keys[slot * 2 + 1] = h2
    }
    vals[slot] = value
  }
}
