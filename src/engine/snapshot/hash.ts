/**
 * 64-bit keys for the snapshot's hash tables, as two independent 32-bit lanes.
 *
 * Keys are never stored as strings: a table slot holds only the two lanes. Two independent 32-bit
 * hashes make a false match between distinct keys about 1 in 2^64 per probe pair, far below any
 * feed's own error rate, and keep every table a flat Uint32Array that threads share without copying.
 */
import { fmix32, kFnvOffset, kFnvPrime } from '../../bytes/fnv.ts'

/** Key namespaces, mixed into both lanes so a domain and a hash with equal text never collide. */
export const KeyTag = {
  domain: 0x64,
  sha256: 0x68,
  asn: 0x61,
  net4: 0x34,
  net6: 0x36,
  asnInfo: 0x49
} as const

/** Result holder reused by callers to avoid allocating a pair per lookup. */
export interface KeyPair { h1: number, h2: number }

const kSeed1 = kFnvOffset
const kSeed2 = 0x9747b28c

/** Hashes a tagged string (UTF-16 code units) into `out`. */
export function hashString (tag: number, s: string, out: KeyPair): KeyPair {
  let a = kSeed1 ^ tag
  let b = kSeed2 ^ Math.imul(tag, 0x9e3779b1)
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    a = Math.imul(a ^ c, kFnvPrime)
    b = Math.imul(b ^ c, 0x5bd1e995)
    b ^= b >>> 15
  }
  out.h1 = fmix32(a ^ s.length)
  out.h2 = fmix32(b ^ Math.imul(s.length, 0xcc9e2d51))
  return out
}

/** Hashes a tagged sequence of 32-bit words (IP networks, AS numbers) into `out`. */
export function hashWords (tag: number, w0: number, w1: number, w2: number, w3: number, extra: number, out: KeyPair): KeyPair {
  let a = kSeed1 ^ tag
  let b = kSeed2 ^ Math.imul(tag, 0x9e3779b1)
  a = Math.imul(a ^ w0, kFnvPrime); b = fmix32(b ^ w0)
  a = Math.imul(a ^ w1, kFnvPrime); b = fmix32(b + w1)
  a = Math.imul(a ^ w2, kFnvPrime); b = fmix32(b ^ w2)
  a = Math.imul(a ^ w3, kFnvPrime); b = fmix32(b + w3)
  a = Math.imul(a ^ extra, kFnvPrime); b = fmix32(b ^ Math.imul(extra, 0xcc9e2d51))
  out.h1 = fmix32(a)
  out.h2 = b
  return out
}
