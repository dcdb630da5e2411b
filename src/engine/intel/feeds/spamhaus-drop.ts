/**
 * Spamhaus DROP / EDROP (and DROPv6): hijacked or criminal-operated netblocks.
 * Reads the text form (`1.10.16.0/20 ; SBL256894`, `;` comments) and the JSON-lines form
 * (`{"cidr":"1.10.16.0/20","sblid":"SBL256894","rir":"apnic"}` lines and a final `{"type":"metadata",...}` line),
 * line by line, so a file mixing both still reads. label = the SBL id.
 * @see https://www.spamhaus.org/blocklists/do-not-route-or-peer/
 */
import type { FeedParseResult } from '../../types.ts'
import { cleanLabel } from './feed-label.ts'
import { FeedResultBuilder } from './feed-result.ts'
import { classifyIp } from './ip-literal.ts'
import { parseJsonLine } from './json-value.ts'
import { splitLines } from './text-lines.ts'

/** Parses a Spamhaus DROP / EDROP / DROPv6 file (text or JSON lines). */
export function parseSpamhausDrop (text: string): FeedParseResult {
  const out = new FeedResultBuilder()
  const lines = splitLines(text)
  out.lines = lines.length
  for (let i = 0; i < lines.length; i++) {
    const line = (lines[i] as string).trim()
    if (line === '' || line[0] === ';' || line[0] === '#') continue
    let value: string
    let label: string | undefined
    if (line[0] === '{') {
      const record = parseJsonLine(line)
      if (record === null) {
        out.reject(i + 1, 'invalid JSON line')
        continue
      }
      if (record.type === 'metadata') continue
      if (typeof record.cidr !== 'string') {
        out.reject(i + 1, 'JSON line has no "cidr" string')
        continue
      }
      value = record.cidr.trim()
      label = cleanLabel(record.sblid)
    } else {
      const semicolon = line.indexOf(';')
      value = (semicolon < 0 ? line : line.slice(0, semicolon)).trim()
      label = semicolon < 0 ? undefined : cleanLabel(line.slice(semicolon + 1))
    }
    const type = classifyIp(value)
    if (type === null) out.reject(i + 1, `not a CIDR block: ${JSON.stringify(value.slice(0, 80))}`)
    else out.add(type, value, i + 1, { label })
  }
  return out.result()
}
