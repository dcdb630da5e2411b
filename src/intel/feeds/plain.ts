/**
 * Plain indicator lists: one IP, CIDR, domain, SHA-256 or ASN per line, type inferred from the value.
 * `#` and `;` start comments, at the start of a line or after whitespace; anything after the first token is ignored.
 * @see ../../../../data/feeds/README.md ("plain")
 */
import type { FeedParseResult } from '../../engine/types.ts'
import { FeedResultBuilder, type EntrySink } from './feed-result.ts'
import { eachDataLine, firstToken } from './text-lines.ts'

/**
 * ASCII characters an indicator of any type (or its defanged form: `1.2.3[.]4`, `example(.)com`) can hold.
 * Everything else in ASCII means the line is not an indicator; non-ASCII passes, for IDNs.
 */
const kAllowedAscii = (() => {
  const allowed = new Uint8Array(128)
  for (const c of '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-_:/[]()') allowed[c.charCodeAt(0)] = 1
  return allowed
})()

/** The first character no indicator can contain, or undefined. */
function unexpectedCharacter (token: string): string | undefined {
  for (let i = 0; i < token.length; i++) {
    const c = token.charCodeAt(i)
    if (c < 128 && kAllowedAscii[c] === 0) return token[i]
  }
  return undefined
}

/** Parses a plain indicator list. */
export function parsePlain (text: string, sink?: EntrySink): FeedParseResult {
  const out = new FeedResultBuilder(sink)
  eachDataLine(text, out, '#;', (line, lineNo) => {
    const value = firstToken(line)
    const bad = unexpectedCharacter(value)
    if (bad !== undefined) out.reject(lineNo, `unexpected character ${JSON.stringify(bad)} in ${JSON.stringify(value.slice(0, 80))}`)
    else out.add(null, value, lineNo)
  })
  return out.result()
}
