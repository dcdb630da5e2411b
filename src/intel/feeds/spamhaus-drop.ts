/**
 * Spamhaus DROP / EDROP (and DROPv6): hijacked or criminal-operated netblocks.
 * Reads the text form (`1.10.16.0/20 ; SBL256894`, `;` comments) and the JSON-lines form
 * (`{"cidr":"1.10.16.0/20","sblid":"SBL256894","rir":"apnic"}` lines and a final `{"type":"metadata",...}` line),
 * line by line, so a file mixing both still reads. label = the SBL id.
 * @see https://www.spamhaus.org/blocklists/do-not-route-or-peer/
 */
import type { FeedParseResult } from '../../engine/types.ts'
import { cleanLabel } from './feed-label.ts'
import { FeedResultBuilder, type EntrySink } from './feed-result.ts'
import { classifyIp } from './ip-literal.ts'
import { parseJsonLine } from './json-value.ts'
import { eachDataLine } from './text-lines.ts'

/** Parses a Spamhaus DROP / EDROP / DROPv6 file (text or JSON lines). */
export function parseSpamhausDrop (text: string, sink?: EntrySink): FeedParseResult {
  const out = new FeedResultBuilder(sink)
  eachDataLine(text, out, ';#', (line, lineNo) => {
    let value: string
    let label: string | undefined
    if (line[0] === '{') {
      const record = parseJsonLine(line)
      if (record === null) {
        out.reject(lineNo, 'invalid JSON line')
        return
      }
      if (record.type === 'metadata') return
      if (typeof record.cidr !== 'string') {
        out.reject(lineNo, 'JSON line has no "cidr" string')
        return
      }
      value = record.cidr.trim()
      label = cleanLabel(record.sblid)
    } else {
      const semicolon = line.indexOf(';')
      value = (semicolon < 0 ? line : line.slice(0, semicolon)).trim()
      label = semicolon < 0 ? undefined : cleanLabel(line.slice(semicolon + 1))
    }
    const type = classifyIp(value)
    if (type === null) out.reject(lineNo, `not a CIDR block: ${JSON.stringify(value.slice(0, 80))}`)
    else out.add(type, value, lineNo, { label })
  })
  return out.result()
}
