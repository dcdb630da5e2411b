/**
 * Refanging of defanged indicators, as analysts paste them from reports and tickets.
 * Recognized (letters in any case): `[.]` `(.)` `{.}` `[dot]` `(dot)` `{dot}` -> `.`, `[:]` -> `:`,
 * `[://]` -> `://`, and a leading `hxxp`/`hxxps` scheme -> `http`/`https`. Spaced forms such as
 * `example . com` and `example dot com` are NOT refanged: spaces also separate values, so guessing
 * would turn typos and lists into indicators.
 */

/** Warning text added (once) when any defanged token was replaced. */
export const kWarnRefanged = 'refanged defanged input'

/** Lowercased char code at i (ASCII letters only; other codes pass through). */
function lowerAt (s: string, i: number): number {
  const c = s.charCodeAt(i)
  return c >= 65 && c <= 90 ? c + 32 : c
}

/** The defang token starting at s[i] (an opening bracket) as [length, replacement], or null. */
function tokenAt (s: string, i: number, open: number): [number, string] | null {
  const close = open === 91 ? 93 : open === 40 ? 41 : 125
  const c1 = s.charCodeAt(i + 1)
  if (c1 === 46 && s.charCodeAt(i + 2) === close) return [3, '.']
  if (lowerAt(s, i + 1) === 100 && lowerAt(s, i + 2) === 111 && lowerAt(s, i + 3) === 116 &&
    s.charCodeAt(i + 4) === close) return [5, '.']
  if (open === 91 && c1 === 58) {
    if (s.charCodeAt(i + 2) === 93) return [3, ':']
    if (s.charCodeAt(i + 2) === 47 && s.charCodeAt(i + 3) === 47 && s.charCodeAt(i + 4) === 93) return [5, '://']
  }
  return null
}

/** Returns s with defanged tokens replaced; the very same string when there was nothing to replace. */
export function refang (s: string): string {
  const n = s.length
  let out = ''
  let last = 0
  let i = 0
  // hxxp only counts as a scheme at the very start and followed by ':' or '[' (for `hxxp[://]`).
  if (n >= 5 && lowerAt(s, 0) === 104 && lowerAt(s, 1) === 120 && lowerAt(s, 2) === 120 && lowerAt(s, 3) === 112) {
    const j = lowerAt(s, 4) === 115 ? 5 : 4
    const c = s.charCodeAt(j)
    if (c === 58 || c === 91) {
      out = j === 5 ? 'https' : 'http'
      last = j
      i = j
    }
  }
  for (; i < n; i++) {
    const c = s.charCodeAt(i)
    if (c !== 91 && c !== 40 && c !== 123) continue
    const t = tokenAt(s, i, c)
    if (t === null) continue
    out += s.slice(last, i) + t[1]
    i += t[0] - 1
    last = i + 1
  }
  if (last === 0) return s
  return out + s.slice(last)
}
