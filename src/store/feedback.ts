/**
 * Analysts' false-positive / true-positive feedback on verdicts (docs/API.md "Feedback"): entry ids, listing cursors,
 * filter validation, and the entries over one store's SQL port.
 */
import { StoreError } from '../errors.ts'
import { parseTimestamp } from '../history/utc-day.ts'
import { SortableIds } from './sortable-id.ts'
import { isoOf, listOf, type SqlPort } from './sql-port.ts'
import type {
  FeedbackDeletion, FeedbackEntry, FeedbackFilters, FeedbackPage, FeedbackSummary, FeedbackSummaryFilters, FeedbackVerdict, NewFeedback
} from './types.ts'

/** What an analyst says of a verdict. */
export const FEEDBACK_VERDICTS = ['false_positive', 'true_positive'] as const satisfies readonly FeedbackVerdict[]

/** Largest page of a feedback listing. */
export const kMaxFeedbackLimit = 500

/** Most signal rows one summary returns (signal ids are bounded by sources x match kinds, far below this). */
export const kMaxSummarySignals = 1_000

/** Feedback entry ids (`fb_...`) and listing cursors. */
export const kFeedbackIds = new SortableIds('fb')

/** Filters as the stores apply them: every member present or null, dates as canonical ISO 8601 UTC. */
export interface ValidFeedbackFilters {
  verdict: FeedbackVerdict | null
  indicator: string | null
  signalId: string | null
  createdBy: string | null
  since: string | null
  until: string | null
}

function text (value: unknown, name: string): string | null {
  if (value === undefined || value === null) return null
  if (typeof value !== 'string' || value === '' || value.length > 8192) throw new StoreError('INVALID_REQUEST', `${name} must be a non-empty string`)
  return value
}

function date (value: unknown, name: string): string | null {
  if (value === undefined || value === null) return null
  const ms = parseTimestamp(value)
  if (ms === null) throw new StoreError('INVALID_REQUEST', `${name} must be an ISO 8601 date-time with offset, or a date`)
  return new Date(ms).toISOString()
}

/** Validates the summary's date range; throws INVALID_REQUEST. */
export function validateSummaryFilters (filters: FeedbackSummaryFilters): Pick<ValidFeedbackFilters, 'since' | 'until'> {
  if (filters === null || typeof filters !== 'object') throw new StoreError('INVALID_REQUEST', 'filters must be an object')
  return { since: date(filters.since, 'since'), until: date(filters.until, 'until') }
}

/** Validates list filters; throws INVALID_REQUEST. */
export function validateFeedbackFilters (filters: FeedbackFilters): ValidFeedbackFilters {
  const range = validateSummaryFilters(filters)
  const verdict = filters.verdict ?? null
  if (verdict !== null && !(FEEDBACK_VERDICTS as readonly string[]).includes(verdict)) {
    throw new StoreError('INVALID_REQUEST', `verdict must be one of ${FEEDBACK_VERDICTS.join(', ')}`)
  }
  return {
    verdict,
    indicator: text(filters.indicator, 'indicator'),
    signalId: text(filters.signalId, 'signal_id'),
    createdBy: text(filters.createdBy, 'created_by'),
    ...range
  }
}

/** Validates a page size; throws INVALID_REQUEST. */
export function validateFeedbackLimit (limit: unknown): number {
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > kMaxFeedbackLimit) {
    throw new StoreError('INVALID_REQUEST', `limit must be an integer from 1 to ${kMaxFeedbackLimit}`)
  }
  return limit
}

/** A feedback row as either store returns it (sql-port.ts: the signal list and the time in either form). */
interface FeedbackRow {
  id: string
  tenant: string
  verdict: string
  indicator_type: string
  indicator_value: string
  indicator_normalized: string
  note: string
  score: number
  category: string
  signal_ids: unknown
  engine_version: string
  data_timestamp: string
  created_by: string
  created_at: unknown
}

function feedbackEntry (r: FeedbackRow): FeedbackEntry {
  return {
    id: r.id,
    tenant: r.tenant,
    verdict: r.verdict as FeedbackVerdict,
    indicatorType: r.indicator_type,
    indicatorValue: r.indicator_value,
    indicatorNormalized: r.indicator_normalized,
    note: r.note,
    score: r.score,
    category: r.category,
    signalIds: listOf(r.signal_ids),
    engineVersion: r.engine_version,
    dataTimestamp: r.data_timestamp,
    createdBy: r.created_by,
    createdAt: isoOf(r.created_at)
  }
}

/**
 * Feedback entries over one store's SQL port (the Store methods addFeedback, listFeedback, feedbackSummary and
 * deleteFeedback). Each entry has one row per signal of its verdict in feedback_signals (verdict and date copied), so
 * the per-signal summary and the signal filter read one tenant-prefixed index with no join.
 */
export class Feedback {
  readonly #db: SqlPort

  constructor (db: SqlPort) {
    this.#db = db
  }

  /** Stores an entry and its per-signal rows in one transaction. */
  async add (entry: NewFeedback): Promise<FeedbackEntry> {
    const now = Date.now()
    const stored: FeedbackEntry = { ...entry, signalIds: [...new Set(entry.signalIds)], id: kFeedbackIds.next(now), createdAt: new Date(now).toISOString() }
    await this.#db.transaction(async (tx) => {
      await tx.run('INSERT INTO {feedback} (id, tenant, verdict, indicator_type, indicator_value, indicator_normalized, note, score, category, ' +
        'signal_ids, engine_version, data_timestamp, created_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
      [stored.id, stored.tenant, stored.verdict, stored.indicatorType, stored.indicatorValue, stored.indicatorNormalized, stored.note,
        stored.score, stored.category, tx.list(stored.signalIds), stored.engineVersion, stored.dataTimestamp, stored.createdBy, stored.createdAt])
      if (stored.signalIds.length === 0) return
      // One statement for every signal (a verdict has a few); one text per count, so a handful of prepared statements.
      await tx.run(`INSERT INTO {feedback_signals} (tenant, signal_id, feedback_id, verdict, created_at) VALUES ${stored.signalIds.map(() => '(?, ?, ?, ?, ?)').join(', ')}`,
        stored.signalIds.flatMap((signal) => [stored.tenant, signal, stored.id, stored.verdict, stored.createdAt]))
    })
    return stored
  }

  /** A page of a tenant's entries, newest first; INVALID_REQUEST for a bad cursor, filter or limit. */
  async list (tenant: string, filters: FeedbackFilters, limit: number, cursor: string | null): Promise<FeedbackPage> {
    this.#db.assertOpen()
    const f = validateFeedbackFilters(filters)
    const n = validateFeedbackLimit(limit)
    const where = ['f.tenant = ?']
    const params: unknown[] = [tenant]
    if (cursor !== null) { where.push('f.id COLLATE {bytes} < ?'); params.push(kFeedbackIds.afterCursor(cursor)) }
    if (f.verdict !== null) { where.push('f.verdict = ?'); params.push(f.verdict) }
    if (f.indicator !== null) { where.push('f.indicator_normalized = ?'); params.push(f.indicator) }
    if (f.createdBy !== null) { where.push('f.created_by = ?'); params.push(f.createdBy) }
    if (f.since !== null) { where.push('f.created_at >= ?'); params.push(f.since) }
    if (f.until !== null) { where.push('f.created_at < ?'); params.push(f.until) }
    if (f.signalId !== null) {
      where.push('EXISTS (SELECT 1 FROM {feedback_signals} s WHERE s.tenant = f.tenant AND s.signal_id = ? AND s.feedback_id = f.id)')
      params.push(f.signalId)
    }
    const rows = await this.#db.all<FeedbackRow>(`SELECT f.* FROM {feedback} f WHERE ${where.join(' AND ')} ORDER BY f.id COLLATE {bytes} DESC LIMIT ?`, [...params, n + 1])
    const entries = rows.slice(0, n).map(feedbackEntry)
    return { entries, nextCursor: rows.length > n ? kFeedbackIds.cursorOf(entries[entries.length - 1]!.id) : null }
  }

  /** Per-signal counts and totals of a tenant's entries created in the range; INVALID_REQUEST for a bad date. */
  async summary (tenant: string, filters: FeedbackSummaryFilters): Promise<FeedbackSummary> {
    this.#db.assertOpen()
    const f = validateSummaryFilters(filters)
    const range: string[] = []
    const params: unknown[] = [tenant]
    if (f.since !== null) { range.push('AND created_at >= ?'); params.push(f.since) }
    if (f.until !== null) { range.push('AND created_at < ?'); params.push(f.until) }
    // One snapshot: the totals and the per-signal counts see the same entries.
    return await this.#db.transaction(async (tx) => {
      const totals = await tx.all<{ verdict: string, n: number | string }>(
        `SELECT verdict, count(*) AS n FROM {feedback} WHERE tenant = ? ${range.join(' ')} GROUP BY verdict`, params)
      const signals = await tx.all<{ signal_id: string, fp: number | string, tp: number | string }>(
        'SELECT signal_id, sum(CASE WHEN verdict = \'false_positive\' THEN 1 ELSE 0 END) AS fp, sum(CASE WHEN verdict = \'true_positive\' THEN 1 ELSE 0 END) AS tp ' +
        `FROM {feedback_signals} WHERE tenant = ? ${range.join(' ')} GROUP BY signal_id ORDER BY fp DESC, signal_id COLLATE {bytes} LIMIT ${kMaxSummarySignals}`, params)
      return {
        ...f,
        falsePositive: Number(totals.find((t) => t.verdict === 'false_positive')?.n ?? 0),
        truePositive: Number(totals.find((t) => t.verdict === 'true_positive')?.n ?? 0),
        signals: signals.map((r) => ({ signalId: r.signal_id, falsePositive: Number(r.fp), truePositive: Number(r.tp) }))
      }
    }, 'snapshot')
  }

  /**
   * Deletes one of a tenant's entries; with `onlyBy`, only if that principal created it. Another tenant's id is
   * `missing`, never `not_owner`.
   */
  async delete (tenant: string, id: string, onlyBy: string | null): Promise<FeedbackDeletion> {
    this.#db.assertOpen()
    if (!kFeedbackIds.valid(id)) return 'missing'
    return await this.#db.transaction(async (tx): Promise<FeedbackDeletion> => {
      // The DELETE locks the row (PostgreSQL) or runs under the write lock (SQLite): a concurrent delete finds none.
      const deleted = onlyBy === null
        ? await tx.run('DELETE FROM {feedback} WHERE tenant = ? AND id = ?', [tenant, id])
        : await tx.run('DELETE FROM {feedback} WHERE tenant = ? AND id = ? AND created_by = ?', [tenant, id, onlyBy])
      if (deleted === 0) return (await tx.all('SELECT 1 AS x FROM {feedback} WHERE tenant = ? AND id = ?', [tenant, id])).length > 0 ? 'not_owner' : 'missing'
      await tx.run('DELETE FROM {feedback_signals} WHERE feedback_id = ? AND tenant = ?', [id, tenant])
      return 'deleted'
    })
  }
}
