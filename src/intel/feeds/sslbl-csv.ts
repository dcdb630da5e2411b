/**
 * abuse.ch SSLBL Botnet C2 IP Blacklist (CSV): servers seen using an SSL certificate that SSLBL lists as a botnet C2's.
 * A `#` banner, the commented header `# Firstseen,DstIP,DstPort`, then one unquoted row per line
 * (`2025-10-20 14:02:11,192.0.2.50,443`). The file carries no family name and no last-seen column: lastSeen is
 * Firstseen (abuse.ch keeps only hosts seen in the last 30 days, so a host that is no longer seen drops out of the next
 * download rather than ageing in it).
 * @see https://sslbl.abuse.ch/blacklist/
 */
import type { FeedParseResult } from '../../engine/types.ts'
import type { EntrySink } from './feed-result.ts'
import { dateColumn, readAbuseChCsv } from './abuse-ch-csv.ts'
import { isIpAddress } from './ip-literal.ts'

const kColumns = ['Firstseen', 'DstIP', 'DstPort'] as const
const kWanted = ['Firstseen', 'DstIP'] as const

/** Parses an SSLBL IP blacklist CSV (sslipblacklist.csv or its _aggressive variant). */
export function parseSslblCsv (text: string, sink?: EntrySink): FeedParseResult {
  return readAbuseChCsv(text, kColumns, kWanted, sink, (row, line, out) => {
    if (!isIpAddress(row.DstIP)) return out.reject(line, `DstIP is not an IP address: ${JSON.stringify(row.DstIP.slice(0, 80))}`)
    const first = dateColumn(row.Firstseen)
    if (!first.ok) return out.reject(line, 'invalid Firstseen date')
    out.add('ip', row.DstIP, line, { firstSeen: first.value })
  })
}
