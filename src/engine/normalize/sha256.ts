/**
 * SHA-256 file hashes. A `sha256:` prefix (any case) is accepted and removed with a warning, because
 * container digests and several feed formats write hashes that way and the prefix is unambiguous.
 * Other digest lengths get an error naming what they look like, so an MD5 is never looked up (or
 * inferred as something else) by mistake.
 */
import { fail, type Failure } from './failure.ts'

const kErrShape = 'invalid SHA-256 hash: expected 64 hex digits'
const kErrMd5 = 'invalid SHA-256 hash: 32 hex digits look like an MD5 hash'
const kErrSha1 = 'invalid SHA-256 hash: 40 hex digits look like a SHA-1 hash'
const kErrSha384 = 'invalid SHA-256 hash: 96 hex digits look like a SHA-384 hash'
const kErrSha512 = 'invalid SHA-256 hash: 128 hex digits look like a SHA-512 hash'
/** Warning text when a `sha256:` prefix was removed. */
export const kWarnPrefix = 'removed sha256: prefix'

/** Length of the `sha256:` prefix at the start of s (any case), or 0. */
export function sha256PrefixLength (s: string): number {
  if (s.length < 7 || s.charCodeAt(6) !== 58) return 0
  return (s.charCodeAt(0) | 32) === 115 && (s.charCodeAt(1) | 32) === 104 && (s.charCodeAt(2) | 32) === 97 &&
    s.charCodeAt(3) === 50 && s.charCodeAt(4) === 53 && s.charCodeAt(5) === 54
    ? 7
    : 0
}

/** Hex scan of s[start, end): 0 = not all hex, 1 = lowercase hex only, 2 = hex with uppercase. */
export function hexKind (s: string, start: number, end: number): number {
  let upper = false
  for (let i = start; i < end; i++) {
    const c = s.charCodeAt(i)
    if ((c >= 48 && c <= 57) || (c >= 97 && c <= 102)) continue
    if (c >= 65 && c <= 70) {
      upper = true
      continue
    }
    return 0
  }
  return upper ? 2 : 1
}

/** The error for a hex digest of the given length that is not SHA-256, or null for other lengths. */
export function otherDigestError (length: number): string | null {
  switch (length) {
    case 32: return kErrMd5
    case 40: return kErrSha1
    case 96: return kErrSha384
    case 128: return kErrSha512
    default: return null
  }
}

/** Normalizes a file_hash_sha256 value (trimmed, refanged) to 64 lowercase hex digits. */
export function normalizeSha256 (s: string, warnings: string[]): string | Failure {
  const start = sha256PrefixLength(s)
  const len = s.length - start
  const kind = hexKind(s, start, s.length)
  if (kind === 0 || len !== 64) {
    const named = kind === 0 ? null : otherDigestError(len)
    return fail(named ?? kErrShape)
  }
  if (start > 0) warnings.push(kWarnPrefix)
  const hex = start > 0 ? s.slice(start) : s
  return kind === 2 ? hex.toLowerCase() : hex
}
