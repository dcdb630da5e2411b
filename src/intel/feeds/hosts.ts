/**
 * hosts(5) files used as blocklists: `0.0.0.0 evil.example`, several names per line allowed, `#` comments.
 * The address is the sinkhole the list redirects to, so only the names are indicators.
 * @see https://man7.org/linux/man-pages/man5/hosts.5.html
 */
import type { FeedParseResult } from '../../engine/types.ts'
import { FeedResultBuilder, type EntrySink } from './feed-result.ts'
import { isIpAddress } from './ip-literal.ts'
import { eachLine, stripInlineComment } from './text-lines.ts'

/** Names every hosts file carries for the machine itself; listing them would flag the local host. */
const kLocalNames = new Set(['localhost', 'localhost.localdomain', 'broadcasthost', 'local'])
const kWhitespace = /[ \t]+/

/** Whether a host name is one of the local-machine names (including `ip6-localhost`, `ip6-allnodes`, ...). */
function isLocalName (name: string): boolean {
  const lower = name.toLowerCase()
  return kLocalNames.has(lower) || lower.startsWith('ip6-')
}

/** Parses a hosts-format blocklist into domain entries. */
export function parseHosts (text: string, sink?: EntrySink): FeedParseResult {
  const out = new FeedResultBuilder(sink)
  out.lines = eachLine(text, (raw, lineNo) => {
    const line = raw.includes('#') ? stripInlineComment(raw, '#') : raw.trim()
    if (line === '') return
    const fields = line.split(kWhitespace)
    const address = fields[0] as string
    if (!isIpAddress(address)) {
      out.reject(lineNo, `expected an IP address before the host names, got ${JSON.stringify(address.slice(0, 80))}`)
      return
    }
    if (fields.length < 2) {
      out.reject(lineNo, 'no host name after the address')
      return
    }
    for (let f = 1; f < fields.length; f++) {
      const name = fields[f] as string
      // `0.0.0.0 0.0.0.0` appears in popular lists; an address is never a host name.
      if (isLocalName(name) || isIpAddress(name)) continue
      out.add('domain', name, lineNo)
    }
  })
  return out.result()
}
