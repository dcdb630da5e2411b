/**
 * FNV-1a (32-bit) and murmur3's final mix: the string hashes every room uses (shard choice, verdict cache keys,
 * history block filters, snapshot hash tables). Each caller keeps its own seeds and mixing order, because those
 * decide stored layouts (snapshot files, history blocks); the arithmetic is written here once.
 * @see http://www.isthe.com/chongo/tech/comp/fnv/ (FNV-1a)
 */

/** FNV-1a 32-bit offset basis. */
export const kFnvOffset = 0x811c9dc5
/** FNV-1a 32-bit prime. */
export const kFnvPrime = 0x01000193

/** 32-bit FNV-1a of a string's UTF-16 units, unsigned. */
export function fnv1a (s: string): number {
  let h = kFnvOffset
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), kFnvPrime)
  return h >>> 0
}

/** 32-bit FNV-1a of bytes `start` to `end` of `buf`, unsigned. */
export function fnv1aBytes (buf: Uint8Array, start: number, end: number): number {
  let h = kFnvOffset
  for (let i = start; i < end; i++) h = Math.imul(h ^ (buf[i] as number), kFnvPrime)
  return h >>> 0
}

/** fnv1a of the string with ASCII A-Z folded to a-z, without allocating the lowercased copy. */
export function fnv1aFolded (s: string): number {
  let h = kFnvOffset
  for (let i = 0; i < s.length; i++) {
    let c = s.charCodeAt(i)
    if (c >= 65 && c <= 90) c += 32
    h = Math.imul(h ^ c, kFnvPrime)
  }
  return h >>> 0
}

/** murmur3's fmix32 avalanche: spreads every input bit over the word (FNV's low bits alone are weak for short keys). */
export function fmix32 (h: number): number {
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}
