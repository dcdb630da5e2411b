/**
 * What a request body may hold, checked in one pass linear in its size before any route sees it (docs/API.md
 * "Request bodies"): at most kMaxDepth levels of nesting, at most kMaxElements elements (every value and every map
 * key, at any depth), and no key that could pollute a prototype (`__proto__`, `constructor`, `prototype`).
 *
 * JSON is parsed by JSON.parse (iterative, linear; every key an own data property) and the parsed tree is walked once.
 * MessagePack is scanned as bytes before it is decoded: only the standard types that have a JSON form (nil, booleans,
 * integers, floats, strings, arrays, maps with string keys) pass, so none of msgpackr's extensions is ever decoded
 * from a client (shared references and structured clones, records, timestamps, typed arrays, sets, errors, regular
 * expressions, bigints, bundled strings), nor bin. A shared reference is what made the earlier post-decode walk
 * exponential: a body of a few hundred bytes decoded into a graph with 2^n paths. Decoding is then the same
 * linear work msgpackr does for any standard message.
 *
 * Hand-written rather than taken from a library: the scan reads the token headers of the MessagePack spec and nothing
 * else, and no maintained package validates standard MessagePack without decoding it.
 * @see https://github.com/msgpack/msgpack/blob/master/spec.md
 */
import { isUtf8 } from 'node:buffer'
import { InvalidRequestError } from '../errors.ts'

/** Deepest nesting of arrays and objects a body may have (the outermost counts as 1). */
export const kMaxDepth = 64
/** Most elements a body may hold: every value and every object key, at any depth (a full 10,000-item bulk holds about 90,000). */
export const kMaxElements = 250_000

const kForbiddenKeys = ['__proto__', 'constructor', 'prototype'] as const
const [kProto, kConstructor, kPrototype] = kForbiddenKeys
const kForbiddenKeyBytes = kForbiddenKeys.map((k) => Buffer.from(k))

function tooDeep (): Error {
  return new InvalidRequestError(`body is nested deeper than ${kMaxDepth} levels`)
}

function tooMany (): Error {
  return new InvalidRequestError(`body holds more than ${kMaxElements} elements`)
}

function forbidden (key: string): Error {
  return new InvalidRequestError(`forbidden key "${key}" in body`)
}

/**
 * A top-level array member whose items a route counts itself, with an error of its own (the bulk route's
 * `indicators`: TOO_MANY_INDICATORS past 10,000). The guard counts it first, so that an array far past its bound is
 * refused with that error and not with the body's element limit, which such an array reaches first.
 */
export interface CountedMember {
  name: string
  most: number
  error: (n: number) => Error
}

/**
 * Throws INVALID_REQUEST when a parsed JSON body is nested too deep, holds too many elements or has a forbidden key;
 * `counted`'s error when its member has too many items. One walk: JSON.parse makes a tree (no value is reached
 * twice), so the walk visits each element once.
 */
export function checkJsonBody (value: unknown, counted?: CountedMember): void {
  if (counted !== undefined && value !== null && typeof value === 'object' && !Array.isArray(value) &&
    Object.hasOwn(value, counted.name)) {
    const member = (value as Record<string, unknown>)[counted.name]
    if (Array.isArray(member) && member.length > counted.most) throw counted.error(member.length)
  }
  let elements = 0
  const walk = (v: unknown, depth: number): void => {
    if (++elements > kMaxElements) throw tooMany()
    if (v === null || typeof v !== 'object') return
    if (depth >= kMaxDepth) throw tooDeep()
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) walk(v[i], depth + 1)
      return
    }
    // for...in, not Object.keys: no array of keys per object (10,000 of them in a full bulk). A parsed object's keys
    // are all own data properties (JSON.parse makes even `__proto__` one), and a plain object inherits no enumerable
    // key, so the two visit the same keys.
    for (const key in v) {
      if (forbiddenKey(key)) throw forbidden(key)
      if (++elements > kMaxElements) throw tooMany()
      walk((v as Record<string, unknown>)[key], depth + 1)
    }
  }
  walk(value, 0)
}

/**
 * Throws INVALID_REQUEST when JSON text opens arrays and objects deeper than kMaxDepth, or (`countElements`) holds
 * more than kMaxElements elements by its separators, before JSON.parse builds anything: parsing 16 MiB of `[` takes
 * seconds of the main thread, and a flat array of millions of numbers a large part of one. One pass over the
 * characters, strings skipped; text that is not JSON passes and JSON.parse refuses it. Elements are counted from
 * commas (each separates two values, or two members of two elements each), a lower bound of what the walk counts.
 * A route that counts a member of its own (the bulk route's indicators) leaves `countElements` off, so that its own
 * error comes first (CountedMember).
 */
export function checkJsonText (text: string, countElements: boolean): void {
  const n = text.length
  let depth = 0
  let commas = 0
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      // Skip the string: up to the next quote that no backslash escapes.
      for (i++; i < n; i++) {
        const d = text.charCodeAt(i)
        if (d === 0x5c) i++
        else if (d === 0x22) break
      }
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > kMaxDepth) throw tooDeep()
    } else if (c === 0x5d || c === 0x7d) {
      depth--
    } else if (c === 0x2c && countElements && ++commas >= kMaxElements) {
      throw tooMany()
    }
  }
}

/** Whether `key` is one of kForbiddenKeys (compared directly: cheaper than a Set lookup per key). */
function forbiddenKey (key: string): boolean {
  return key === kProto || key === kConstructor || key === kPrototype
}

function truncated (): Error {
  return new InvalidRequestError('body is not valid MessagePack: it ends inside a value')
}

/** The bytes' MessagePack type that has no JSON form, named for the error message. */
function refusedType (b: number): string | null {
  if (b === 0xc1) return 'the reserved byte 0xc1'
  if (b >= 0xc4 && b <= 0xc6) return 'bin'
  if ((b >= 0xc7 && b <= 0xc9) || (b >= 0xd4 && b <= 0xd8)) return 'an extension type'
  return null
}

/** Bytes of each fixed-size scalar's payload by its first byte (floats, integers); 0 where not one. */
const kScalarBytes = new Uint8Array(256)
for (const [b, n] of [[0xca, 4], [0xcb, 8], [0xcc, 1], [0xcd, 2], [0xce, 4], [0xcf, 8], [0xd0, 1], [0xd1, 2], [0xd2, 4], [0xd3, 8]]) {
  kScalarBytes[b as number] = n as number
}

/**
 * Throws INVALID_REQUEST unless `buf` is exactly one standard MessagePack value with a JSON form, nested at most
 * kMaxDepth levels, of at most kMaxElements elements, whose maps have string keys, none of them forbidden; throws
 * `counted`'s error as soon as its member's array header says too many items, or when a string is not UTF-8. Reads
 * each byte once; keeps one count per open array or map.
 */
export function checkMsgpackBody (buf: Uint8Array, counted?: CountedMember): void {
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength)
  const end = buf.length
  const countedName = counted === undefined ? null : Buffer.from(counted.name)
  /** True while the next value is the top-level map's member named counted.name. */
  let countedNext = false
  /** Items still to come in each open array or map (a map's keys and values both count). */
  const left: number[] = []
  const isMap: boolean[] = []
  let p = 0
  let elements = 0
  for (;;) {
    if (p >= end) throw truncated()
    const top = left.length - 1
    // In a map of n pairs, 2n items come: keys when an even number is left.
    const isKey = top >= 0 && isMap[top] === true && ((left[top] as number) & 1) === 0
    if (top >= 0) left[top] = (left[top] as number) - 1
    if (++elements > kMaxElements) throw tooMany()
    const b = buf[p++] as number
    let str = -1
    let count = -1
    let map = false
    if (b <= 0x7f || b >= 0xe0 || b === 0xc0 || b === 0xc2 || b === 0xc3) {
      // fixints, nil, booleans: the byte is the value
    } else if (b >= 0xa0 && b <= 0xbf) {
      str = b & 0x1f
    } else if (b >= 0x80 && b <= 0x8f) {
      count = b & 0x0f
      map = true
    } else if (b >= 0x90 && b <= 0x9f) {
      count = b & 0x0f
    } else if (kScalarBytes[b] !== 0) {
      p += kScalarBytes[b] as number
    } else {
      const refused = refusedType(b)
      if (refused !== null) throw new InvalidRequestError(`body holds ${refused} (byte 0x${b.toString(16)} at ${p - 1}): send standard MessagePack with JSON types only`)
      // str 8/16/32, array 16/32, map 16/32: a length of 1, 2 or 4 bytes follows
      const width = b === 0xd9 ? 1 : b === 0xda || b === 0xdc || b === 0xde ? 2 : 4
      if (p + width > end) throw truncated()
      const n = width === 1 ? buf[p] as number : width === 2 ? dv.getUint16(p) : dv.getUint32(p)
      p += width
      if (b <= 0xdb) str = n
      else {
        count = n
        map = b >= 0xde
      }
    }
    if (isKey && str === -1) throw new InvalidRequestError('body is not accepted: MessagePack map keys must be strings')
    if (countedNext) {
      countedNext = false
      // A header the rest of the body cannot hold is refused below as truncated, not believed here.
      if (count > (counted as CountedMember).most && !map && count <= end - p) throw (counted as CountedMember).error(count)
    }
    if (str >= 0) {
      if (p + str > end) throw truncated()
      if (isKey && top === 0 && countedName !== null && str === countedName.length && countedName.equals(buf.subarray(p, p + str))) countedNext = true
      if (isKey && (str === 9 || str === 11)) {
        for (const k of kForbiddenKeyBytes) {
          if (k.length === str && k.equals(buf.subarray(p, p + str))) throw forbidden(k.toString())
        }
      }
      // A str is UTF-8 (the MessagePack spec): other bytes would be decoded to U+FFFD, and an answer and its history
      // record would show a value other than the one sent. ASCII is scanned here, anything else checked natively.
      for (let i = p; i < p + str; i++) {
        if ((buf[i] as number) < 0x80) continue
        if (!isUtf8(buf.subarray(p, p + str))) throw new InvalidRequestError(`body holds a string that is not valid UTF-8 (at byte ${p})`)
        break
      }
      p += str
    } else if (count > 0) {
      if (left.length >= kMaxDepth) throw tooDeep()
      const items = map ? count * 2 : count
      // Every item takes a byte at least: a count the rest of the body cannot hold is refused before it is trusted.
      if (items > end - p) throw truncated()
      left.push(items)
      isMap.push(map)
      continue
    } else if (p > end) {
      throw truncated()
    }
    if (count === 0 && left.length >= kMaxDepth) throw tooDeep()
    // The value is complete: close every container it completes.
    while (left.length > 0 && left[left.length - 1] === 0) {
      left.pop()
      isMap.pop()
    }
    if (left.length === 0) break
  }
  if (p !== end) throw new InvalidRequestError('body is not valid MessagePack: bytes follow the value')
}
