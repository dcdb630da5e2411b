/**
 * Types shared by the engine: indicators, normalization results, feed entries and verdicts.
 * Plain data only, so every value here crosses thread boundaries and encodes with msgpack.
 */

/** The indicator types of the interface (docs/API.md "Indicators and normalization"), in inference order for display. */
export const INDICATOR_TYPES = ['ip', 'domain', 'ip_block', 'file_hash_sha256', 'asn'] as const
/** One of the contract's indicator types. */
export type IndicatorType = typeof INDICATOR_TYPES[number]

/** Signal directions (docs/API.md "Verdicts"). */
export type Direction = 'safe' | 'malicious'

/**
 * A parsed IP address. IPv4 has one 32-bit word; IPv6 has four big-endian 32-bit words.
 * Words are unsigned (0..2^32-1).
 */
export interface ParsedIp {
  version: 4 | 6
  words: number[]
}

/** A valid indicator in canonical form. */
export interface NormalizedIndicator {
  type: IndicatorType
  /** Canonical text form (API.md "Indicators"). */
  normalized: string
  /** True when the caller sent no type and it was inferred from the value. */
  inferred: boolean
  /** Human-readable warnings (refanged, host bits cleared, type inferred, ...). */
  warnings: string[]
  /** ip: the address; ip_block: the network address (host bits cleared). */
  ip?: ParsedIp
  /** ip_block: prefix length. */
  prefix?: number
  /** asn: the AS number. */
  asn?: number
}

/** Outcome of normalizing one indicator: never thrown, always returned. */
export type NormalizeResult =
  | { ok: true, indicator: NormalizedIndicator }
  | { ok: false, type: IndicatorType | null, errors: string[], warnings: string[] }

/** Feed formats the loaders read (data/feeds/README.md describes each). */
export const FEED_FORMATS = [
  'plain', 'netset', 'spamhaus_drop', 'spamhaus_asndrop', 'feodo_csv', 'threatfox_csv', 'urlhaus_csv',
  'malwarebazaar_csv', 'hosts', 'adblock', 'misp_json', 'stix2', 'sslbl_csv', 'rank_csv', 'aws_ip_ranges',
  'google_ip_ranges', 'azure_service_tags', 'oracle_ip_ranges', 'github_meta', 'fastly_ip_list'
] as const
/** A feed format name as written in a manifest. */
export type FeedFormat = typeof FEED_FORMATS[number]

/** One indicator read from a feed file, before normalization. */
export interface FeedEntry {
  /** Type the format states, or null when the value's type must be inferred. */
  type: IndicatorType | null
  /** Raw value (the snapshot compiler normalizes it). */
  value: string
  /** 1-based line number (or item number for JSON formats) where the entry was found. */
  line: number
  /** Epoch milliseconds, when the feed says when it was first/last seen. */
  firstSeen?: number
  lastSeen?: number
  /** Threat label from the feed (malware family, threat type), if any. */
  label?: string
}

/** A line or item a loader could not use. */
export interface RejectedLine {
  line: number
  reason: string
}

/** What a loader returns for one feed file. */
export interface FeedParseResult {
  entries: FeedEntry[]
  rejected: RejectedLine[]
  /** Number of lines (or items) examined, comments and blanks included. */
  lines: number
}

/** A feed as described by the operator's manifest. */
export interface FeedSpec {
  name: string
  format: FeedFormat
  /** Absolute path (the manifest loader resolves relative paths against the manifest's folder). */
  path: string
  direction: Direction
  group: string
  subgroup: string
  category: string
  /** 0..1: how much one listing in this feed is trusted. */
  confidence: number
  /** Evidence halves in weight every this many days since last seen; 0 = no decay. */
  halfLifeDays: number
  /**
   * The upstream data this feed is a copy or a view of, when another feed carries the same (manifest `origin`);
   * absent: the feed's own name. Feeds of one origin count as one source.
   */
  origin?: string
  /** Set for a feed fetched over HTTP(S): `path` is then its last good copy in the data directory. */
  remote?: RemoteFeed
}

/** How a fetched feed is downloaded and refreshed (manifest keys url, refresh_seconds, headers, max_bytes, timeout_seconds, zip_member). */
export interface RemoteFeed {
  url: string
  refreshSeconds: number
  /** Header templates: `${NAME}` is replaced by the environment variable NAME at fetch time. */
  headers: Record<string, string>
  maxBytes: number
  timeoutSeconds: number
  /** The member to read when the body is a zip archive; null: the archive must hold exactly one file. */
  zipMember: string | null
}

/** Signal detail levels (`signal_details`, docs/API.md "Request bodies"). */
export type SignalDetails = 'none' | 'top' | 'all'
/** Evidence detail levels (`evidence_details`, docs/API.md "Request bodies"). */
export type EvidenceDetails = 'none' | 'summary' | 'full'
/** Evidence saturation bands (docs/API.md "Verdicts"), ordered. */
export const SATURATION_BANDS = ['none', 'sparse', 'limited', 'moderate', 'strong', 'full'] as const
export type EvidenceSaturation = typeof SATURATION_BANDS[number]
/** Risk strength bands (docs/API.md "Verdicts"). */
export type Strength = 'weak' | 'medium' | 'strong' | 'very_strong'

/** A signal in a verdict (docs/API.md "Verdicts"). */
export interface ThreatSignal {
  signal_id: string
  direction: Direction
  signal_subgroup: string
  signal_group: string
  signal_name: string
  evidence?: Record<string, unknown>
}

/** Per group / subgroup score entry. */
export interface ScoreEntry {
  /** Signed sum of contributions after caps, in score points. */
  contribution: number
  /** Number of signals in this group. */
  signal_count: number
  malicious: number
  safe: number
}

/** A single call's verdict (docs/API.md "Verdicts") without `meta` (the service adds meta). */
export interface Verdict {
  indicator: { type: IndicatorType, value: string, normalized: string }
  risk: {
    score: number
    strength: Strength
    category: string
    evidence_saturation: EvidenceSaturation
  }
  signals: ThreatSignal[]
  signal_count: number
  scores: { signal_groups: Record<string, ScoreEntry>, signal_subgroups: Record<string, ScoreEntry> }
  threat_context: Record<string, unknown>
  flags: string[]
  recommended_actions: Array<{ action: string, order: number }>
  /** Normalization warnings for this indicator. */
  warnings: string[]
}
