/**
 * FireHOL netset / ipset files: one IPv4 or IPv6 address or CIDR block per line, `#` comment header.
 * @see https://iplists.firehol.org/
 */
import type { FeedParseResult } from '../../types.ts'
import { FeedResultBuilder } from './feed-result.ts'
import { classifyIp } from './ip-literal.ts'
import { firstToken, splitLines } from './text-lines.ts'

/** Parses a FireHOL netset. */
export function parseNetset (text: string): FeedParseResult {
  const out = new FeedResultBuilder()
  const lines = splitLines(text)
  out.lines = lines.length
  for (let i = 0; i < lines.length; i++) {
    const line = (lines[i] as string).trim()
    if (line === '' || line[0] === '#') continue
    const value = firstToken(line)
    const type = classifyIp(value)
    if (type === null) out.reject(i + 1, `not an IP address or CIDR block: ${JSON.stringify(value.slice(0, 80))}`)
    else out.add(type, value, i + 1)
  }
  return out.result()
}
