/**
 * Feed loaders by format: each is pure, `(text) => FeedParseResult`, and never throws on feed content.
 * data/feeds/README.md describes every format and the shipped samples.
 */
import { FEED_FORMATS, type FeedFormat, type FeedParseResult } from '../../engine/types.ts'
import { parseAdblock } from './adblock.ts'
import { parseFeodoCsv } from './feodo-csv.ts'
import { parseHosts } from './hosts.ts'
import { parseMalwarebazaarCsv } from './malwarebazaar-csv.ts'
import { parseMispJson } from './misp-json.ts'
import { parseNetset } from './netset.ts'
import { parsePlain } from './plain.ts'
import { parseSpamhausAsndrop } from './spamhaus-asndrop.ts'
import { parseSpamhausDrop } from './spamhaus-drop.ts'
import { parseSslblCsv } from './sslbl-csv.ts'
import { parseStix2 } from './stix2.ts'
import { parseThreatfoxCsv } from './threatfox-csv.ts'
import { parseUrlhausCsv } from './urlhaus-csv.ts'

/** A feed loader: the text of one feed file in, entries and rejected lines out. */
export type FeedParser = (text: string) => FeedParseResult

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
  sslbl_csv: parseSslblCsv
})

/** Whether a string names a feed format. */
export function isFeedFormat (value: unknown): value is FeedFormat {
  return typeof value === 'string' && (FEED_FORMATS as readonly string[]).includes(value)
}

/** Parses the text of a feed file in the given format. */
export function parseFeed (format: FeedFormat, text: string): FeedParseResult {
  const parser = kFeedParsers[format]
  // The format comes from a manifest the loader validated, but JS callers can still pass anything.
  if (parser === undefined) throw new TypeError(`unknown feed format: ${String(format)}`)
  return parser(text)
}
