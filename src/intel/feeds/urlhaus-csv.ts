/**
 * abuse.ch URLhaus database dump (CSV): malware distribution URLs.
 * Columns `id,dateadded,url,url_status,last_online,threat,tags,urlhaus_link,reporter`; each row gives the URL's host
 * (IP or domain, port and brackets removed). label = threat; lastSeen = last_online, else dateadded.
 * @see https://urlhaus.abuse.ch/api/#csv
 */
import type { FeedParseResult } from '../../engine/types.ts'
import type { EntrySink } from './feed-result.ts'
import { dateColumn, readAbuseChCsv } from './abuse-ch-csv.ts'
import { cleanLabel } from './feed-label.ts'
import { hostType } from './ip-literal.ts'
import { hostFromUrl } from './url-host.ts'

const kColumns = ['id', 'dateadded', 'url', 'url_status', 'last_online', 'threat', 'tags', 'urlhaus_link', 'reporter'] as const
const kWanted = ['id', 'dateadded', 'url', 'last_online', 'threat'] as const

/** Parses a URLhaus CSV dump into host entries. */
export function parseUrlhausCsv (text: string, sink?: EntrySink): FeedParseResult {
  return readAbuseChCsv(text, kColumns, kWanted, sink, (row, line, out) => {
    const host = hostFromUrl(row.url)
    if (host === null) return out.reject(line, `url has no host: ${JSON.stringify(row.url.slice(0, 80))}`)
    const added = dateColumn(row.dateadded)
    const last = dateColumn(row.last_online)
    if (!added.ok) return out.reject(line, 'invalid dateadded date')
    if (!last.ok) return out.reject(line, 'invalid last_online date')
    out.add(hostType(host), host, line, {
      firstSeen: added.value,
      lastSeen: last.value ?? added.value,
      label: cleanLabel(row.threat)
    })
  })
}
