/**
 * abuse.ch Feodo Tracker IP blocklist (CSV): botnet C2 servers.
 * Columns `"first_seen_utc","dst_ip","dst_port","c2_status","last_online","malware"`; label = malware.
 * `last_online` is a day, read as its first moment; lastSeen is the later of it and first_seen_utc (a C2 first seen at
 * noon and last online "that day" was seen at noon), and first_seen_utc alone when last_online is empty.
 * @see https://feodotracker.abuse.ch/blocklist/
 */
import type { FeedParseResult } from '../../engine/types.ts'
import type { EntrySink } from './feed-result.ts'
import { dateColumn, readAbuseChCsv } from './abuse-ch-csv.ts'
import { cleanLabel } from './feed-label.ts'
import { isIpAddress } from './ip-literal.ts'

const kColumns = ['first_seen_utc', 'dst_ip', 'dst_port', 'c2_status', 'last_online', 'malware'] as const
const kWanted = ['first_seen_utc', 'dst_ip', 'last_online', 'malware'] as const

/** Parses a Feodo Tracker ipblocklist CSV. */
export function parseFeodoCsv (text: string, sink?: EntrySink): FeedParseResult {
  return readAbuseChCsv(text, kColumns, kWanted, sink, (row, line, out) => {
    if (!isIpAddress(row.dst_ip)) {
      out.reject(line, `dst_ip is not an IP address: ${JSON.stringify(row.dst_ip.slice(0, 80))}`)
      return
    }
    const first = dateColumn(row.first_seen_utc)
    const last = dateColumn(row.last_online)
    if (!first.ok) return out.reject(line, 'invalid first_seen_utc date')
    if (!last.ok) return out.reject(line, 'invalid last_online date')
    out.add('ip', row.dst_ip, line, {
      firstSeen: first.value,
      lastSeen: last.value === undefined || first.value === undefined ? last.value ?? first.value : Math.max(last.value, first.value),
      label: cleanLabel(row.malware)
    })
  })
}
