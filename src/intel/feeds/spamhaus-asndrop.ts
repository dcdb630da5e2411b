/**
 * Spamhaus ASN-DROP: autonomous systems run by or for criminals.
 * Reads the text form (`AS1234 ; XX | Org name`, `;` comments) and the JSON-lines form
 * (`{"asn":1234,"rir":"...","domain":"...","cc":"XX","asname":"..."}` lines and a final `{"type":"metadata",...}` line).
 * @see https://www.spamhaus.org/blocklists/do-not-route-or-peer/
 */
import type { FeedParseResult } from '../../engine/types.ts'
import { FeedResultBuilder, type EntrySink } from './feed-result.ts'
import { parseJsonLine } from './json-value.ts'
import { eachDataLine } from './text-lines.ts'

const kMaxAsn = 4294967295

/** `AS<n>` for an AS number given as a number or digit string (with or without `AS`), or null. */
function asnValue (raw: unknown): string | null {
  let digits: string
  if (typeof raw === 'number') {
    if (!Number.isInteger(raw) || raw < 0 || raw > kMaxAsn) return null
    return `AS${raw}`
  }
  if (typeof raw !== 'string') return null
  digits = raw.trim()
  if (digits.length > 2 && (digits[0] === 'A' || digits[0] === 'a') && (digits[1] === 'S' || digits[1] === 's')) digits = digits.slice(2)
  if (digits.length === 0 || digits.length > 10) return null
  for (let i = 0; i < digits.length; i++) {
    const c = digits.charCodeAt(i)
    if (c < 48 || c > 57) return null
  }
  return Number(digits) <= kMaxAsn ? `AS${Number(digits)}` : null
}

/** Parses a Spamhaus ASN-DROP file (text or JSON lines) into `asn` entries. */
export function parseSpamhausAsndrop (text: string, sink?: EntrySink): FeedParseResult {
  const out = new FeedResultBuilder(sink)
  eachDataLine(text, out, ';#', (line, lineNo) => {
    let raw: unknown
    if (line[0] === '{') {
      const record = parseJsonLine(line)
      if (record === null) {
        out.reject(lineNo, 'invalid JSON line')
        return
      }
      if (record.type === 'metadata') return
      raw = record.asn
    } else {
      const semicolon = line.indexOf(';')
      raw = (semicolon < 0 ? line : line.slice(0, semicolon)).trim()
    }
    const value = asnValue(raw)
    if (value === null) out.reject(lineNo, `not an AS number: ${JSON.stringify(String(raw).slice(0, 80))}`)
    else out.add('asn', value, lineNo)
  })
  return out.result()
}
