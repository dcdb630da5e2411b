/**
 * CIDR blocks. Host bits are cleared (with a warning) rather than rejected, because feeds routinely
 * write `1.2.3.4/24` meaning the /24 that holds it. IPv4-mapped IPv6 blocks with prefix >= 96
 * (`::ffff:1.2.3.0/120`) become IPv4 blocks (`1.2.3.0/24`) so they match the IPv4 keys, exactly as
 * mapped addresses do; shorter prefixes cover more than the mapped range and stay IPv6.
 */
import type { ParsedIp } from '../types.ts'
import { fail, isFailure, type Failure } from './failure.ts'
import { formatIPv4, formatIPv6, ipv4Range, isMappedV4, parseIpRange } from './ip.ts'

/** The parts of a normalized ip_block indicator. */
export interface NormalizedIpBlock {
  normalized: string
  /** Network address (host bits cleared). */
  ip: ParsedIp
  prefix: number
}

const kErrBare = 'invalid IP block: a bare address is not a block'
const kErrShape = 'invalid IP block: expected address/prefix'
const kErrPrefix = 'invalid IP block: malformed prefix length'
const kErrPrefixRange = 'invalid IP block: prefix length out of range'
/** Warning text when host bits were set and cleared. */
export const kWarnHostBits = 'host bits cleared'
/** Warning text when an IPv4-mapped IPv6 block is reported as an IPv4 block. */
export const kWarnMappedBlock = 'IPv4-mapped IPv6 block converted to IPv4'

/** Strict decimal prefix in s[start, end) (no sign, no leading zeros), or -1. */
function prefixRange (s: string, start: number, end: number): number {
  const len = end - start
  if (len < 1 || len > 3) return -1
  if (len > 1 && s.charCodeAt(start) === 48) return -1
  let v = 0
  for (let i = start; i < end; i++) {
    const c = s.charCodeAt(i)
    if (c < 48 || c > 57) return -1
    v = v * 10 + (c - 48)
  }
  return v
}

/** Netmask word for `bits` leading one bits (0..32). */
function maskWord (bits: number): number {
  if (bits <= 0) return 0
  if (bits >= 32) return 0xffffffff
  return (0xffffffff << (32 - bits)) >>> 0
}

/** Normalizes an ip_block value (trimmed, refanged) to `<network>/<prefix>`. */
export function normalizeIpBlock (s: string, warnings: string[]): NormalizedIpBlock | Failure {
  const slash = s.indexOf('/')
  if (slash < 0) return isFailure(parseIpRange(s, 0, s.length)) ? fail(kErrShape) : fail(kErrBare)
  const end = s.length
  // Hot path: a strict dotted quad with an aligned prefix is already canonical.
  const fast = ipv4Range(s, 0, slash)
  if (fast >= 0) {
    const prefix = prefixRange(s, slash + 1, end)
    if (prefix < 0) return fail(kErrPrefix)
    if (prefix > 32) return fail(kErrPrefixRange)
    const net = (fast & maskWord(prefix)) >>> 0
    if (net === fast) return { normalized: s, ip: { version: 4, words: [net] }, prefix }
    warnings.push(kWarnHostBits)
    return { normalized: `${formatIPv4(net)}/${prefix}`, ip: { version: 4, words: [net] }, prefix }
  }
  const p = parseIpRange(s, 0, slash)
  if (isFailure(p)) return p
  let prefix = prefixRange(s, slash + 1, end)
  if (prefix < 0) return fail(kErrPrefix)
  const w = p.words
  if (p.version === 4) {
    if (prefix > 32) return fail(kErrPrefixRange)
  } else {
    if (prefix > 128) return fail(kErrPrefixRange)
    if (prefix >= 96 && isMappedV4(w)) {
      warnings.push(kWarnMappedBlock)
      prefix -= 96
      const addr = w[3] ?? 0
      const net = (addr & maskWord(prefix)) >>> 0
      if (net !== addr) warnings.push(kWarnHostBits)
      return { normalized: `${formatIPv4(net)}/${prefix}`, ip: { version: 4, words: [net] }, prefix }
    }
  }
  const net = new Array<number>(w.length)
  let changed = false
  for (let k = 0; k < w.length; k++) {
    const word = w[k] ?? 0
    net[k] = (word & maskWord(prefix - 32 * k)) >>> 0
    if (net[k] !== word) changed = true
  }
  if (changed) warnings.push(kWarnHostBits)
  const text = p.version === 4 ? formatIPv4(net[0] ?? 0) : formatIPv6(net)
  return { normalized: `${text}/${prefix}`, ip: { version: p.version, words: net }, prefix }
}

/** Parses `addr/prefix` to the network address and prefix (host bits cleared); null when invalid. */
export function parseIpBlock (s: string): { ip: ParsedIp, prefix: number } | null {
  const r = normalizeIpBlock(s, [])
  return isFailure(r) ? null : { ip: r.ip, prefix: r.prefix }
}
