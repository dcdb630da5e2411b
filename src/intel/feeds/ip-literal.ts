/**
 * Syntax-only checks for the IP values feeds state. The snapshot compiler normalizes (and may still reject) them;
 * these checks only tell a line that holds an address or block apart from one that does not.
 */
import { isIP } from 'node:net'

/** 'ip' for an IPv4/IPv6 address, 'ip_block' for address/prefix with a prefix in range, null for anything else. */
export function classifyIp (token: string): 'ip' | 'ip_block' | null {
  const slash = token.indexOf('/')
  if (slash < 0) return isIP(token) === 0 ? null : 'ip'
  const version = isIP(token.slice(0, slash))
  if (version === 0) return null
  const prefix = token.slice(slash + 1)
  if (prefix.length === 0 || prefix.length > 3) return null
  for (let i = 0; i < prefix.length; i++) {
    const c = prefix.charCodeAt(i)
    if (c < 48 || c > 57) return null
  }
  return Number(prefix) <= (version === 4 ? 32 : 128) ? 'ip_block' : null
}

/** Whether the token is a bare IPv4 or IPv6 address. */
export function isIpAddress (token: string): boolean {
  return isIP(token) !== 0
}

/** 'ip' when the host is an address, else 'domain' (used where a format gives a host, not a typed value). */
export function hostType (host: string): 'ip' | 'domain' {
  return isIP(host) === 0 ? 'domain' : 'ip'
}
