/**
 * Host extraction from full URLs (`scheme://[userinfo@]host[:port][/path]`), so a pasted URL can be
 * judged by its host. Only values with `://` count as URLs: `evil.com/path` stays an invalid domain
 * rather than being guessed at. Any syntactically valid scheme is accepted (http, ftp, ...).
 */
import { fail, type Failure } from './failure.ts'

const kErrScheme = 'invalid URL: bad scheme'
const kErrHost = 'invalid URL: missing host'
const kErrPort = 'invalid URL: bad port'
/** Warning text when the host was taken from a URL. */
export const kWarnUrlHost = 'host extracted from URL'

/** True when s looks like a URL (contains `://`). */
export function isUrl (s: string): boolean {
  return s.indexOf('://') >= 0
}

/** True when c is an ASCII letter. */
function isLetter (c: number): boolean {
  return (c | 32) >= 97 && (c | 32) <= 122
}

/** The host of a URL (IPv6 literals keep their brackets), or a Failure. */
export function urlHost (s: string): string | Failure {
  const sep = s.indexOf('://')
  if (sep <= 0 || !isLetter(s.charCodeAt(0))) return fail(kErrScheme)
  for (let i = 1; i < sep; i++) {
    const c = s.charCodeAt(i)
    if (!isLetter(c) && !(c >= 48 && c <= 57) && c !== 43 && c !== 45 && c !== 46) return fail(kErrScheme)
  }
  const start = sep + 3
  let end = start
  while (end < s.length) {
    const c = s.charCodeAt(end)
    if (c === 47 || c === 63 || c === 35 || c === 92) break
    end++
  }
  const at = s.lastIndexOf('@', end - 1)
  const hostStart = at >= start ? at + 1 : start
  let hostEnd = end
  if (s.charCodeAt(hostStart) === 91) {
    const close = s.indexOf(']', hostStart)
    if (close < 0 || close >= end) return fail(kErrHost)
    hostEnd = close + 1
  } else {
    const colon = s.indexOf(':', hostStart)
    if (colon >= 0 && colon < end) hostEnd = colon
  }
  if (hostEnd === hostStart) return fail(kErrHost)
  if (hostEnd < end) {
    if (s.charCodeAt(hostEnd) !== 58) return fail(kErrHost)
    let port = 0
    for (let i = hostEnd + 1; i < end; i++) {
      const c = s.charCodeAt(i)
      if (c < 48 || c > 57) return fail(kErrPort)
      port = port * 10 + (c - 48)
      if (port > 65535) return fail(kErrPort)
    }
  }
  return s.slice(hostStart, hostEnd)
}
