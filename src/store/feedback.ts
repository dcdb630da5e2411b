/**
 * Shared by both stores: analysts' false-positive / true-positive feedback on verdicts (docs/API.md "Feedback"):
 * entry ids, listing cursors, filter validation and the per-signal summary's shape.
 */
import { StoreError } from '../errors.ts'
import { parseTimestamp } from '../history/utc-day.ts'
import { SortableIds } from './sortable-id.ts'
import type { FeedbackEntry, FeedbackFilters, FeedbackSummaryFilters, FeedbackVerdict } from './types.ts'

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

/** A feedback row as both stores read it; the stores differ only in how signal ids and the time are stored. */
export interface FeedbackRow<SignalIds, Time> {
  id: string
  tenant: string
  verdict: string
  indicator_type: string
  indicator_value: string
  indicator_normalized: string
  note: string
  score: number
  category: string
  signal_ids: SignalIds
  engine_version: string
  data_timestamp: string
  created_by: string
  created_at: Time
}

/** A stored row as an entry; `signalIds` and `createdAt` are already decoded by the store. */
export function feedbackEntryOf (r: FeedbackRow<unknown, unknown>, signalIds: string[], createdAt: string): FeedbackEntry {
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
    signalIds,
    engineVersion: r.engine_version,
    dataTimestamp: r.data_timestamp,
    createdBy: r.created_by,
    createdAt
  }
}
