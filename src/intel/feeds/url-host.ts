/**
 * Host extraction from feed URLs. Hand-rolled rather than `new URL()`: WHATWG parsing rewrites hosts (`0x7f.1` becomes
 * `127.0.0.1`, IDNs become punycode) and throws on inputs feeds do contain, while the compiler wants the raw host.
 */

/** Whether s[0, end) is an RFC 3986 scheme (ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )). */
function isScheme (s: string, end: number): boolean {
  if (end === 0) return false
  for (let i = 0; i < end; i++) {
    const c = s.charCodeAt(i) | 0x20
    const alpha = c >= 97 && c <= 122
    if (i === 0 ? !alpha : !(alpha || (c >= 48 && c <= 57) || c === 0x2b || c === 0x2d || c === 0x2e)) return false
  }
  return true
}

/** The host of a URL (port, userinfo and IPv6 brackets removed), or null when there is none. */
export function hostFromUrl (url: string): string | null {
  let s = url.trim()
  const sep = s.indexOf('://')
  if (sep >= 0 && isScheme(s, sep)) s = s.slice(sep + 3)
  else if (s.startsWith('//')) s = s.slice(2)
  let end = s.length
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    // Browsers treat "\" like "/" in http(s) URLs, and malware URLs use that to hide the real host.
    if (c === 0x2f || c === 0x3f || c === 0x23 || c === 0x5c) { end = i; break }
  }
  let authority = s.slice(0, end)
  const at = authority.lastIndexOf('@')
  if (at >= 0) authority = authority.slice(at + 1)
  let host: string
  if (authority.startsWith('[')) {
    const close = authority.indexOf(']')
    if (close < 0) return null
    host = authority.slice(1, close)
  } else {
    const colon = authority.indexOf(':')
    host = colon >= 0 ? authority.slice(0, colon) : authority
  }
  return host === '' ? null : host
}
