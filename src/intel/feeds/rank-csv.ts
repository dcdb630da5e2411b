/**
 * Popularity rank lists: `rank,domain` per line (Tranco, Cisco Umbrella and Majestic-style top lists), or
 * `origin,rank` (the Chrome UX Report top lists, where the rank is a bucket such as 1000 and the origin a URL).
 * Each entry is a `domain` whose label is its rank in decimal, which the popularity signal reads back. A first line
 * without a number (a header such as `rank,domain` or `origin,rank`) is skipped; `#` starts a comment line.
 * @see https://tranco-list.eu/ (format of the top-1m.csv download)
 * @see ../../../../data/feeds/README.md ("rank_csv")
 */
import type { FeedParseResult } from '../../engine/types.ts'
import { FeedResultBuilder, type EntrySink } from './feed-result.ts'
import { eachDataLine } from './text-lines.ts'
import { hostFromUrl } from './url-host.ts'

/** Ranks past this are not ranks (the Tranco full list has ~5 million; leave room, reject absurd values). */
const kMaxRank = 1_000_000_000

/** The field as a rank (a positive integer of digits only), or null. */
function rankOf (field: string): number | null {
  if (field.length === 0 || field.length > 10) return null
  for (let i = 0; i < field.length; i++) {
    const c = field.charCodeAt(i)
    if (c < 48 || c > 57) return null
  }
  const n = Number(field)
  return n >= 1 && n <= kMaxRank ? n : null
}

/** The host of a list's name field: a bare name, or the host of an origin URL. */
function hostOf (field: string): string | null {
  if (field.length === 0) return null
  const host = field.includes('/') ? hostFromUrl(field) : field
  if (host === null || host.length === 0 || host.length > 253) return null
  for (let i = 0; i < host.length; i++) {
    const c = host.charCodeAt(i)
    // Names only: a space, quote or comma means the line is not `rank,domain`.
    if (c <= 32 || c === 34 || c === 39 || c === 44 || c === 60 || c === 62) return null
  }
  return host
}

/** Parses a rank list into `domain` entries labelled with their rank. */
export function parseRankCsv (text: string, sink?: EntrySink): FeedParseResult {
  const out = new FeedResultBuilder(sink)
  let first = true
  eachDataLine(text, out, '#', (line, lineNo) => {
    const isFirst = first
    first = false
    const comma = line.indexOf(',')
    if (comma < 0) {
      out.reject(lineNo, 'expected "rank,domain" or "origin,rank"')
      return
    }
    const a = line.slice(0, comma).trim()
    const rest = line.slice(comma + 1)
    const comma2 = rest.indexOf(',')
    // Extra columns after the second are ignored (some exports add a score or a category).
    const b = (comma2 < 0 ? rest : rest.slice(0, comma2)).trim()
    const rankA = rankOf(a)
    const rankB = rankA === null ? rankOf(b) : null
    if (rankA === null && rankB === null) {
      if (!isFirst) out.reject(lineNo, `no rank in ${JSON.stringify(line.slice(0, 80))}`)
      return
    }
    const host = hostOf(rankA !== null ? b : a)
    if (host === null) out.reject(lineNo, `no domain in ${JSON.stringify(line.slice(0, 80))}`)
    else out.add('domain', host, lineNo, { label: String(rankA ?? rankB) })
  })
  return out.result()
}
