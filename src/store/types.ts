/**
 * Contract of the persistence layer: API keys, query history and usage counters.
 * Every method is async so SQLite (synchronous underneath) and PostgreSQL implement the same interface,
 * and the same contract tests (test/store/store.test.ts) run against both.
 */

/** A stored API key, without its secret (the secret exists only in the key string handed out once). */
export interface ApiKeyRecord {
  /** Public key id: the part of the key that history records and `apikey` filters show. */
  id: string
  tenant: string
  /** Subset of PERMISSIONS, in PERMISSIONS order. */
  permissions: string[]
  /** Indicators per UTC day; null means unlimited. */
  quota: number | null
  /** ISO 8601, UTC, millisecond precision. */
  createdAt: string
  /** ISO 8601 when revoked, else null. */
  revokedAt: string | null
  /** Requests per minute (short-window rate limit); null means the operator's default. */
  rateLimit: number | null
  /** ISO 8601 after which the key is refused, or null for never. */
  expiresAt: string | null
  /** Networks (CIDR) the key may be used from, or null for anywhere. */
  allowedCidrs: string[] | null
  /** ISO 8601 of the last successful authentication (updated at most once a minute), or null. */
  lastUsedAt: string | null
}

/** Options for a new key. */
export interface CreateKeyOptions {
  tenant: string
  permissions: string[]
  /** Indicators per UTC day; null or omitted means unlimited. */
  quota?: number | null
  /** Requests per minute; null or omitted means the operator's default (none unless configured). */
  rateLimit?: number | null
  /** ISO 8601 date-time in the future; null or omitted means the key does not expire. */
  expiresAt?: string | null
  /** CIDR blocks or addresses the key may be used from; null or omitted means anywhere. */
  allowedCidrs?: string[] | null
}

/** A freshly created key: `key` is the only copy of the secret and is never stored. */
export interface CreatedKey {
  key: string
  record: ApiKeyRecord
}

/** Usage of one key on one day. */
export interface KeyUsage {
  apikey: string
  count: number
}

/** Usage of a tenant (or one of its keys) on one UTC day. */
export interface UsageReport {
  tenant: string
  /** YYYY-MM-DD (UTC). */
  day: string
  /** Keys with a non-zero count, ordered by key id. */
  keys: KeyUsage[]
  total: number
}

/** A tenant allowlist entry as stored (docs/API.md "Tenant allowlist"). */
export interface AllowEntry {
  /** `al_` + a time-ordered id: listing order. */
  id: string
  tenant: string
  /** ip, domain, file_hash_sha256, asn, ip_block or domain_suffix. */
  kind: string
  /** Normalized by the engine's normalizer before it is stored. */
  value: string
  reason: string
  /** Key id that added it. */
  createdBy: string
  /** ISO 8601, UTC. */
  createdAt: string
  /** ISO 8601, UTC, or null (never expires). */
  expiresAt: string | null
}

/** A new entry; the store assigns id and createdAt. */
export type NewAllowEntry = Omit<AllowEntry, 'id' | 'createdAt'>

/** One page of entries, oldest first; `nextCursor` continues after the last one. */
export interface AllowPage { entries: AllowEntry[], nextCursor: string | null }

/** What an analyst says of a verdict: it was wrong to flag (false_positive) or right (true_positive). */
export type FeedbackVerdict = 'false_positive' | 'true_positive'

/**
 * An analyst's feedback on a verdict (docs/API.md "Feedback"). score, category and signalIds are the verdict the
 * service itself gave the tenant when the feedback was recorded, never what the client claimed.
 */
export interface FeedbackEntry {
  /** `fb_` + a time-ordered id: listing order. */
  id: string
  tenant: string
  verdict: FeedbackVerdict
  /** The indicator's type (as sent or inferred). */
  indicatorType: string
  /** The value as sent. */
  indicatorValue: string
  /** Normalized by the engine. */
  indicatorNormalized: string
  /** The analyst's note, trimmed; may be empty. */
  note: string
  score: number
  category: string
  /** Every signal of the verdict, in the verdict's order (largest contribution first). */
  signalIds: string[]
  engineVersion: string
  /** data_timestamp of the intel snapshot that scored it. */
  dataTimestamp: string
  /** Key id, or user:<name> for a dashboard session. */
  createdBy: string
  /** ISO 8601, UTC. */
  createdAt: string
}

/** A new entry; the store assigns id and createdAt. */
export type NewFeedback = Omit<FeedbackEntry, 'id' | 'createdAt'>

/** Filters of the summary: createdAt in [since, until). Dates: ISO 8601 with an offset, or a date (UTC midnight). */
export interface FeedbackSummaryFilters { since?: string, until?: string }

/** Filters of a listing; every given filter must hold. */
export interface FeedbackFilters extends FeedbackSummaryFilters {
  verdict?: FeedbackVerdict
  /** Normalized indicator value (exact). */
  indicator?: string
  /** The verdict had this signal. */
  signalId?: string
  createdBy?: string
}

/** One page of entries, newest first; `nextCursor` continues after the last one. */
export interface FeedbackPage { entries: FeedbackEntry[], nextCursor: string | null }

/** Feedback counts of one signal id. */
export interface SignalFeedback { signalId: string, falsePositive: number, truePositive: number }

/** Per-signal counts, most false positives first, and the totals of entries (an entry counts once per signal it had). */
export interface FeedbackSummary {
  /** The range applied, as canonical ISO 8601 UTC, or null when open. */
  since: string | null
  until: string | null
  falsePositive: number
  truePositive: number
  signals: SignalFeedback[]
}

/** What deleteFeedback did: removed it, found none of the tenant's with that id, or found one by someone else. */
export type FeedbackDeletion = 'deleted' | 'missing' | 'not_owner'

import type { HistoryRow } from '../history/rows.ts'
import type { HistoryPart } from '../history/block.ts'
import type { HistoryRecord, SearchFilters, SearchPage } from '../history/types.ts'
import type { Accounts } from './accounts.ts'
import type { RetroHuntStore } from './retro-hunt.ts'
import type { WebhookStore } from './webhooks.ts'

export type { HistoryIndicator, HistoryRecord, HistorySource, SearchFilters, SearchPage } from '../history/types.ts'

/** A history journal's position after a batch: saved with the batch, in its transaction. */
export interface JournalMark {
  /** The journal's id (one per data directory). */
  journal: string
  /** Journal byte position (monotonic across its files) just after the batch's last record. */
  position: number
}

/** Persistence of keys, history and usage counters. */
export interface Store {
  /** Dashboard users and sessions. */
  readonly accounts: Accounts
  /** Retro-hunt hits, and the reads of history blocks a pass makes (retro-hunt.ts). */
  readonly retroHunt: RetroHuntStore
  /** Retro-hunt webhooks and their deliveries (webhooks.ts). */
  readonly webhooks: WebhookStore
  /** Creates or upgrades the schema; safe to run concurrently from several processes. */
  migrate (): Promise<void>
  /** Creates a key; throws INVALID_KEY_OPTIONS for an unknown permission, a bad tenant or a bad quota. */
  createKey (options: CreateKeyOptions): Promise<CreatedKey>
  /** Creates a key only when the store holds none (a first start's bootstrap key), whatever starts at the same moment; null when one exists. */
  createFirstKey (options: CreateKeyOptions): Promise<CreatedKey | null>
  /** Every key, revoked ones included, oldest first; never secrets. */
  listKeys (): Promise<ApiKeyRecord[]>
  /** Revokes an active key: true when this call revoked it, false for an unknown or already revoked id. */
  revokeKey (id: string): Promise<boolean>
  /** Records a successful use of a key at `at` (ISO 8601); the service calls it at most once a minute per key. */
  touchKey (id: string, at: string): Promise<void>
  /** The record of an active key matching the presented key string, or null (unknown, revoked, expired, wrong secret, malformed). */
  verifyKey (presented: string): Promise<ApiKeyRecord | null>
  /** Number of keys ever created (revoked ones included). */
  countKeys (): Promise<number>
  /** Inserts all records and adds them to the usage counters, in one transaction. */
  writeHistory (records: HistoryRecord[]): Promise<void>
  /**
   * The same for rows the service built itself (history-rows.ts shape, columns already sanitized with column()):
   * the history writer uses it to skip per-record validation and re-serialization on its hot path.
   */
  writeHistoryRows (rows: readonly HistoryRow[]): Promise<void>
  /**
   * The same for items as the scoring workers encoded them (history/block.ts): the history writer's hot path. SQLite
   * stores the parts as they are; PostgreSQL expands them into its rows.
   *
   * `meanwhile`, when given, is called at most once while the write waits on the database for its transaction's last
   * step (PostgreSQL: once the commit is sent), so that the caller's own work overlaps the server's; a store that
   * writes on the caller's thread (SQLite) does not call it. It must not throw.
   */
  writeHistoryParts (parts: readonly HistoryPart[], mark?: JournalMark, meanwhile?: () => void): Promise<void>
  /**
   * How far the history journal named `journal` is written into this store (JournalMark.position), 0 when never.
   * writeHistoryParts with a mark stores it in the same transaction as the parts, so a replay after a crash writes
   * each journalled record exactly once.
   */
  journalPosition (journal: string): Promise<number>
  /**
   * One page of a tenant's history, newest first by (date, id); throws INVALID_REQUEST for a bad cursor, date or
   * limit. Only rows of `tenant` are read, whatever the filters or cursor. `indicator_value` matches the value
   * exactly as sent, not the normalized form: the interface withdrew the `indicator_normalized` filter from this
   * endpoint, and matching normalized forms through `indicator_value` would bring it back under another name.
   */
  searchHistory (tenant: string, filters: SearchFilters, limit: number, cursor: string | null): Promise<SearchPage>
  /** Usage counters of a tenant, or of one of its keys, on one UTC day. */
  usage (tenant: string, keyId: string | null, day: string): Promise<UsageReport>
  /** Counter of one key on one UTC day (0 when none). */
  usageForKey (keyId: string, day: string): Promise<number>
  /**
   * Deletes history rows dated before `before`; returns how many. Usage counters are not decremented: they are
   * billing records with their own retention, so after a purge they count more than the remaining rows.
   */
  purgeHistory (before: Date): Promise<number>
  /**
   * Stores a tenant allowlist entry; with `most`, null (nothing stored) when the tenant would then hold more than
   * `most` active entries, whatever other adds run at the same time.
   */
  addAllowEntry (entry: NewAllowEntry, most?: number): Promise<AllowEntry | null>
  /**
   * A page of a tenant's entries, oldest first; throws INVALID_REQUEST for a bad cursor. Only `tenant`'s rows; with
   * `activeAt` (ISO 8601), only those that have not expired by then.
   */
  listAllowEntries (tenant: string, limit: number, cursor: string | null, activeAt?: string): Promise<AllowPage>
  /** Deletes one of a tenant's entries: false when the id is unknown or another tenant's. */
  deleteAllowEntry (tenant: string, id: string): Promise<boolean>
  /** Stores an analyst's feedback (and its per-signal rows) in one transaction. */
  addFeedback (entry: NewFeedback): Promise<FeedbackEntry>
  /** A page of a tenant's feedback, newest first; throws INVALID_REQUEST for a bad cursor, filter or limit. Only `tenant`'s rows. */
  listFeedback (tenant: string, filters: FeedbackFilters, limit: number, cursor: string | null): Promise<FeedbackPage>
  /** Per-signal false/true positive counts of a tenant's feedback created in the range; throws INVALID_REQUEST for a bad date. */
  feedbackSummary (tenant: string, filters: FeedbackSummaryFilters): Promise<FeedbackSummary>
  /**
   * Deletes one of a tenant's entries; with `onlyBy`, only if that principal created it. Another tenant's id is
   * `missing`, never `not_owner`.
   */
  deleteFeedback (tenant: string, id: string, onlyBy: string | null): Promise<FeedbackDeletion>
  /** Throws when the store cannot serve queries (health check). */
  ping (): Promise<void>
  /** Releases connections; idempotent. Later calls reject with STORE_CLOSED. */
  close (): Promise<void>
}
