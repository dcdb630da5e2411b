/**
 * FireHOL netset / ipset files: one IPv4 or IPv6 address or CIDR block per line, `#` comment header.
 * @see https://iplists.firehol.org/
 */
import type { FeedParseResult } from '../../engine/types.ts'
import { FeedResultBuilder, type EntrySink } from './feed-result.ts'
import { classifyIp } from './ip-literal.ts'
import { eachDataLine, firstToken } from './text-lines.ts'

/** Parses a FireHOL netset. */
export function parseNetset (text: string, sink?: EntrySink): FeedParseResult {
  const out = new FeedResultBuilder(sink)
  eachDataLine(text, out, '#', (line, lineNo) => {
    const value = firstToken(line)
    const type = classifyIp(value)
    if (type === null) out.reject(lineNo, `not an IP address or CIDR block: ${JSON.stringify(value.slice(0, 80))}`)
    else out.add(type, value, lineNo)
  })
  return out.result()
}
