/**
 * Indicator normalization (API.md "Indicators"): pure, allocation-light, and never throws on user
 * input. Order of work: type check, trim, refang, infer the type when none was given, then the
 * per-type normalizer. Warnings come in that order too: refang, inference, then type-specific ones.
 */
import type { IndicatorType, NormalizeResult, NormalizedIndicator } from '../types.ts'
import { normalizeAsn, looksLikeAsn } from './asn.ts'
import { kWarnRefanged, refang } from './defang.ts'
import { normalizeDomain } from './domain.ts'
import { isFailure, type Failure } from './failure.ts'
import { normalizeIpBlock, parseIpBlock } from './ip-block.ts'
import { ipv4Range, normalizeIp, parseIp } from './ip.ts'
import { hexKind, normalizeSha256, otherDigestError, sha256PrefixLength } from './sha256.ts'
import { isUrl, kWarnUrlHost, urlHost } from './url.ts'

export { formatIp, parseIPv4, parseIp } from './ip.ts'
export { parseIpBlock } from './ip-block.ts'
export { refang } from './defang.ts'
export type { Failure } from './failure.ts'

/** Inputs longer than this are rejected before any parsing; the longest valid value is a long URL. */
const kMaxValueLength = 8192
const kErrTypeNotString = 'type must be a string'
const kErrUnknownType = 'unknown indicator type: must be one of ip, domain, ip_block, file_hash_sha256, asn'
const kErrNotString = 'value must be a string'
const kErrEmpty = 'value is empty'
const kErrTooLong = `value is too long (max ${kMaxValueLength} characters)`
const kErrCannotInfer = 'cannot infer indicator type'
const kErrDomainIsIp = 'invalid domain: value is an IP address (use type ip)'
const kErrDomainIsBlock = 'invalid domain: value is an IP block (use type ip_block)'
const kErrUrlHostIsIp = 'invalid domain: URL host is an IP address (use type ip)'
const kErrBlockIsUrl = 'invalid ip_block: a URL is not a CIDR block (send the block itself, as 192.0.2.0/24)'

/** Maps a type string to an IndicatorType, or null when it is not one of the contract's five. */
function asIndicatorType (t: string): IndicatorType | null {
  switch (t) {
    case 'ip':
    case 'domain':
    case 'ip_block':
    case 'file_hash_sha256':
    case 'asn':
      return t
    default:
      return null
  }
}

/** The failure result. */
function failed (type: IndicatorType | null, error: string, warnings: string[]): NormalizeResult {
  return { ok: false, type, errors: [error], warnings }
}

/** Normalizes s as the given (or inferred) type; `inferred` selects inference wording. */
function byType (type: IndicatorType, s: string, warnings: string[], inferred: boolean): NormalizeResult {
  let indicator: NormalizedIndicator
  switch (type) {
    case 'ip': {
      let host = s
      if (isUrl(s)) {
        const h = urlHost(s)
        if (isFailure(h)) return failed(inferred ? null : type, h.error, warnings)
        warnings.push(kWarnUrlHost)
        host = h
      }
      const r = normalizeIp(host, warnings)
      if (isFailure(r)) return failed(inferred ? null : type, r.error, warnings)
      indicator = { type, normalized: r.normalized, inferred, warnings, ip: r.ip }
      break
    }
    case 'domain': {
      let host = s
      if (isUrl(s)) {
        const h = urlHost(s)
        if (isFailure(h)) return failed(inferred ? null : type, h.error, warnings)
        warnings.push(kWarnUrlHost)
        if (h.charCodeAt(0) === 91 || parseIp(h) !== null) return failed(inferred ? null : type, kErrUrlHostIsIp, warnings)
        host = h
      }
      const r = normalizeDomain(host)
      if (isFailure(r)) return failed(inferred ? null : type, domainError(host, r), warnings)
      indicator = { type, normalized: r, inferred, warnings }
      break
    }
    case 'ip_block': {
      // Inference never takes a URL for a block; a caller who says ip_block gets the reason, not an address error.
      if (isUrl(s)) return failed(type, kErrBlockIsUrl, warnings)
      const r = normalizeIpBlock(s, warnings)
      if (isFailure(r)) return failed(inferred ? null : type, r.error, warnings)
      indicator = { type, normalized: r.normalized, inferred, warnings, ip: r.ip, prefix: r.prefix }
      break
    }
    case 'file_hash_sha256': {
      const r = normalizeSha256(s, warnings)
      if (isFailure(r)) return failed(inferred ? null : type, r.error, warnings)
      indicator = { type, normalized: r, inferred, warnings }
      break
    }
    case 'asn': {
      const r = normalizeAsn(s, warnings, !inferred)
      if (isFailure(r)) return failed(inferred ? null : type, r.error, warnings)
      indicator = { type, normalized: `AS${r}`, inferred, warnings, asn: r }
      break
    }
  }
  return { ok: true, indicator }
}

/** A domain failure, reworded when the value is really an address or a block (checked only on failure). */
function domainError (s: string, f: Failure): string {
  if (parseIp(s) !== null || (s.charCodeAt(0) === 91 && parseIp(s.slice(1, -1)) !== null)) return kErrDomainIsIp
  if (s.indexOf('/') > 0 && parseIpBlock(s) !== null) return kErrDomainIsBlock
  return f.error
}

/** True when s is only ASCII digits and dots, with at least one dot: an IPv4 attempt, never a domain. */
function isDigitsDots (s: string): boolean {
  let dot = false
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c === 46) dot = true
    else if (c < 48 || c > 57) return false
  }
  return dot
}

/** Picks the type for an untyped value by shape; null when nothing fits (see API.md inference order). */
function inferShape (s: string): IndicatorType | null {
  if (ipv4Range(s, 0, s.length) >= 0) return 'ip'
  if (isUrl(s)) {
    const h = urlHost(s)
    if (isFailure(h)) return 'domain'
    return h.charCodeAt(0) === 91 || isDigitsDots(h) || parseIp(h) !== null ? 'ip' : 'domain'
  }
  let colons = 0
  let slash = false
  let dot = false
  let nonAscii = false
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c === 58) colons++
    else if (c === 47) slash = true
    else if (c === 46) dot = true
    else if (c >= 128) nonAscii = true
  }
  const c0 = s.charCodeAt(0)
  const startsIpLike = (c0 >= 48 && c0 <= 57) || c0 === 58 || c0 === 91
  if (slash) return colons >= 2 || startsIpLike ? 'ip_block' : dot || nonAscii ? 'domain' : null
  if (colons >= 2 || c0 === 91 || (colons === 1 && startsIpLike)) return 'ip'
  if (dot && isDigitsDots(s)) return 'ip'
  const hashStart = sha256PrefixLength(s)
  if (hashStart > 0 || (hexKind(s, 0, s.length) !== 0 && (s.length === 64 || otherDigestError(s.length) !== null))) {
    return 'file_hash_sha256'
  }
  if (looksLikeAsn(s)) return 'asn'
  if (dot || nonAscii) return 'domain'
  return null
}

/**
 * Normalizes one indicator. `type` may be omitted (undefined or null) to infer it; never throws.
 * Errors for untyped values carry `type: null`, since no type was given or could be settled on.
 */
export function normalize (value: unknown, type?: unknown): NormalizeResult {
  let given: IndicatorType | null = null
  if (type !== undefined && type !== null) {
    if (typeof type !== 'string') return failed(null, kErrTypeNotString, [])
    given = asIndicatorType(type)
    if (given === null) return failed(null, kErrUnknownType, [])
  }
  if (typeof value !== 'string') return failed(given, kErrNotString, [])
  if (value.length > kMaxValueLength) return failed(given, kErrTooLong, [])
  let s = value.trim()
  if (s.length === 0) return failed(given, kErrEmpty, [])
  const warnings: string[] = []
  const r = refang(s)
  if (r !== s) {
    warnings.push(kWarnRefanged)
    s = r
  }
  if (given !== null) return byType(given, s, warnings, false)
  const inferred = inferShape(s)
  if (inferred === null) return failed(null, kErrCannotInfer, warnings)
  const mark = warnings.length
  warnings.push(`type inferred as ${inferred}`)
  const out = byType(inferred, s, warnings, true)
  // The inference warning only makes sense next to a result of that type.
  if (!out.ok) warnings.splice(mark, 1)
  return out
}

/** The type normalize() would infer for value, or null when it is not a valid indicator of any type. */
export function inferType (value: string): IndicatorType | null {
  const r = normalize(value)
  return r.ok ? r.indicator.type : null
}
