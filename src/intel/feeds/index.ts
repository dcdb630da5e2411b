/**
 * Feed loaders by format: each is pure, `(text) => FeedParseResult`, and never throws on feed content.
 * data/feeds/README.md describes every format and the shipped samples.
 */
import { FEED_FORMATS, type FeedFormat, type FeedParseResult } from '../../engine/types.ts'
import { parseAdblock } from './adblock.ts'
import type { EntrySink } from './feed-result.ts'
import { parseFeodoCsv } from './feodo-csv.ts'
import { parseHosts } from './hosts.ts'
import { parseMalwarebazaarCsv } from './malwarebazaar-csv.ts'
import { parseMispJson } from './misp-json.ts'
import { parseNetset } from './netset.ts'
import { parsePlain } from './plain.ts'
import {
  parseAwsIpRanges, parseAzureServiceTags, parseFastlyIpList, parseGithubMeta, parseGoogleIpRanges, parseOracleIpRanges
} from './provider-ranges.ts'
import { parseRankCsv } from './rank-csv.ts'
import { parseSpamhausAsndrop } from './spamhaus-asndrop.ts'
import { parseSpamhausDrop } from './spamhaus-drop.ts'
import { parseSslblCsv } from './sslbl-csv.ts'
import { parseStix2 } from './stix2.ts'
import { parseThreatfoxCsv } from './threatfox-csv.ts'
import { parseUrlhausCsv } from './urlhaus-csv.ts'

/**
 * A feed loader: the text of one feed file in, entries and rejected lines out. Given a sink, a loader hands each entry
 * to it as found instead of returning it in `entries` (a loader that ignores the sink still works: its caller reads
 * `entries` as well).
 */
export type FeedParser = (text: string, sink?: EntrySink) => FeedParseResult
export type { EntrySink, EntryFacts } from './feed-result.ts'

/** The loader of every feed format (FEED_FORMATS), by format name. */
export const kFeedParsers: Readonly<Record<FeedFormat, FeedParser>> = Object.freeze({
  plain: parsePlain,
  netset: parseNetset,
  spamhaus_drop: parseSpamhausDrop,
  spamhaus_asndrop: parseSpamhausAsndrop,
  feodo_csv: parseFeodoCsv,
  threatfox_csv: parseThreatfoxCsv,
  urlhaus_csv: parseUrlhausCsv,
  malwarebazaar_csv: parseMalwarebazaarCsv,
  hosts: parseHosts,
  adblock: parseAdblock,
  misp_json: parseMispJson,
  stix2: parseStix2,
  sslbl_csv: parseSslblCsv,
  rank_csv: parseRankCsv,
  aws_ip_ranges: parseAwsIpRanges,
  google_ip_ranges: parseGoogleIpRanges,
  azure_service_tags: parseAzureServiceTags,
  oracle_ip_ranges: parseOracleIpRanges,
  github_meta: parseGithubMeta,
  fastly_ip_list: parseFastlyIpList
})

/** Whether a string names a feed format. */
export function isFeedFormat (value: unknown): value is FeedFormat {
  return typeof value === 'string' && (FEED_FORMATS as readonly string[]).includes(value)
}

/** Parses the text of a feed file in the given format; entries go to `sink` when one is given. */
export function parseFeed (format: FeedFormat, text: string, sink?: EntrySink): FeedParseResult {
  const parser = kFeedParsers[format]
  // The format comes from a manifest the loader validated, but JS callers can still pass anything.
  if (parser === undefined) throw new TypeError(`unknown feed format: ${String(format)}`)
  return parser(text, sink)
}
