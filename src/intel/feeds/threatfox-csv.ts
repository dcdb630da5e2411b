/**
 * abuse.ch ThreatFox IOC export (CSV). Columns `"first_seen_utc","ioc_id","ioc_value","ioc_type","threat_type",
 * "fk_malware","malware_alias","malware_printable","last_seen_utc","confidence_level",...` (found by header name).
 * ioc_type `ip:port` gives the IP, `domain` the domain, `url` the URL's host, `sha256_hash` the hash; MD5 and SHA-1
 * are rejected (the contract has no type for them). label = malware_printable; lastSeen = last_seen_utc, else
 * first_seen_utc.
 * @see https://threatfox.abuse.ch/export/
 */
import type { FeedParseResult, IndicatorType } from '../../engine/types.ts'
import { dateColumn, readAbuseChCsv } from './abuse-ch-csv.ts'
import type { EntrySink } from './feed-result.ts'
import { cleanLabel } from './feed-label.ts'
import { hostType, isIpAddress } from './ip-literal.ts'
import { hostFromUrl } from './url-host.ts'

const kColumns = [
  'first_seen_utc', 'ioc_id', 'ioc_value', 'ioc_type', 'threat_type', 'fk_malware', 'malware_alias',
  'malware_printable', 'last_seen_utc', 'confidence_level', 'reference', 'tags', 'anonymous', 'reporter'
] as const
const kWanted = ['first_seen_utc', 'ioc_value', 'ioc_type', 'malware_printable', 'last_seen_utc'] as const

/** The address of `a.b.c.d:port` or `[v6]:port` (a bare address passes through), or null. */
function ipOfIpPort (value: string): string | null {
  if (value.startsWith('[')) {
    const close = value.indexOf(']')
    const ip = close < 0 ? '' : value.slice(1, close)
    return isIpAddress(ip) ? ip : null
  }
  if (isIpAddress(value)) return value
  const colon = value.lastIndexOf(':')
  const ip = colon < 0 ? '' : value.slice(0, colon)
  return isIpAddress(ip) ? ip : null
}

/** Parses a ThreatFox CSV export. */
export function parseThreatfoxCsv (text: string, sink?: EntrySink): FeedParseResult {
  return readAbuseChCsv(text, kColumns, kWanted, sink, (row, line, out) => {
    let type: IndicatorType
    let value: string
    switch (row.ioc_type) {
      case 'ip:port': {
        const ip = ipOfIpPort(row.ioc_value)
        if (ip === null) return out.reject(line, `ioc_value is not ip:port: ${JSON.stringify(row.ioc_value.slice(0, 80))}`)
        type = 'ip'
        value = ip
        break
      }
      case 'domain':
        type = 'domain'
        value = row.ioc_value
        break
      case 'url': {
        const host = hostFromUrl(row.ioc_value)
        if (host === null) return out.reject(line, 'url has no host')
        type = hostType(host)
        value = host
        break
      }
      case 'sha256_hash':
        type = 'file_hash_sha256'
        value = row.ioc_value
        break
      case 'md5_hash':
      case 'sha1_hash':
        return out.reject(line, 'unsupported hash type')
      default:
        return out.reject(line, `unsupported ioc_type ${JSON.stringify(row.ioc_type.slice(0, 40))}`)
    }
    if (value === '') return out.reject(line, 'empty ioc_value')
    const first = dateColumn(row.first_seen_utc)
    const last = dateColumn(row.last_seen_utc)
    if (!first.ok) return out.reject(line, 'invalid first_seen_utc date')
    if (!last.ok) return out.reject(line, 'invalid last_seen_utc date')
    out.add(type, value, line, {
      firstSeen: first.value,
      lastSeen: last.value ?? first.value,
      label: cleanLabel(row.malware_printable)
    })
  })
}
