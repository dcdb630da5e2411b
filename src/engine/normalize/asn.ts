/**
 * Autonomous system numbers. Accepted: `AS13335`, `as13335`, `ASN13335`, `AS 13335` (one space, as
 * whois prints it) and `13335`. asdot (`AS1.10`, RFC 5396) is converted to asplain (65546) with a
 * warning; a bare `1.10` is asdot only when the caller said type asn, since untyped it reads as a
 * broken IPv4 address. Leading zeros are rejected for the same reason as in IPv4.
 */
import { fail, type Failure } from './failure.ts'

const kErrShape = 'invalid ASN: expected AS<number>'
const kErrLeading = 'invalid ASN: leading zeros are ambiguous'
const kErrRange = 'invalid ASN: out of range (max 4294967295)'
const kErrDotRange = 'invalid ASN: asdot part out of range (max 65535)'
const kMaxAsn = 4294967295
/** Warning text when asdot notation was converted. */
export const kWarnAsdot = 'asdot notation converted to asplain'

/** Length of an `AS`, `ASN`, `AS ` or `ASN ` prefix (any case) at the start of s, or 0. */
export function asnPrefixLength (s: string): number {
  if (s.length < 3 || (s.charCodeAt(0) | 32) !== 97 || (s.charCodeAt(1) | 32) !== 115) return 0
  let i = 2
  if ((s.charCodeAt(i) | 32) === 110) i++
  if (s.charCodeAt(i) === 32) i++
  return i
}

/** Strict decimal in s[start, end): the value, -1 when not digits, -2 on leading zeros, -3 when over max. */
function decimalRange (s: string, start: number, end: number, max: number): number {
  const len = end - start
  if (len === 0) return -1
  let v = 0
  for (let i = start; i < end; i++) {
    const c = s.charCodeAt(i)
    if (c < 48 || c > 57) return -1
    // Cap the accumulator so a huge digit run neither loses precision nor scans forever needlessly.
    if (v <= max) v = v * 10 + (c - 48)
  }
  if (len > 1 && s.charCodeAt(start) === 48) return -2
  return v > max ? -3 : v
}

/** True when s has the shape of an ASN (optional prefix, digits, asdot only with a prefix). */
export function looksLikeAsn (s: string): boolean {
  const start = asnPrefixLength(s)
  let dot = -1
  for (let i = start; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c === 46 && dot < 0 && start > 0 && i > start) {
      dot = i
    } else if (c < 48 || c > 57) {
      return false
    }
  }
  return s.length > start && dot !== s.length - 1
}

/** Normalizes an asn value (trimmed, refanged) to its number; bareAsdot allows `1.10` without a prefix. */
export function normalizeAsn (s: string, warnings: string[], bareAsdot: boolean): number | Failure {
  const start = asnPrefixLength(s)
  const end = s.length
  const dot = s.indexOf('.', start)
  if (dot < 0) {
    const v = decimalRange(s, start, end, kMaxAsn)
    if (v >= 0) return v
    return fail(v === -2 ? kErrLeading : v === -3 ? kErrRange : kErrShape)
  }
  if (start === 0 && !bareAsdot) return fail(kErrShape)
  const hi = decimalRange(s, start, dot, 65535)
  const lo = decimalRange(s, dot + 1, end, 65535)
  if (hi === -1 || lo === -1) return fail(kErrShape)
  if (hi === -2 || lo === -2) return fail(kErrLeading)
  if (hi === -3 || lo === -3) return fail(kErrDotRange)
  warnings.push(kWarnAsdot)
  return hi * 65536 + lo
}
