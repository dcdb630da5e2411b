/**
 * UTC day and timestamp helpers shared by the stores and the quota counters.
 * Days are UTC so that every instance, whatever its local time zone, counts the same day.
 */
import { StoreError } from '../errors.ts'

const kDayMs = 24 * 60 * 60 * 1000
const kDayPattern = /^(\d{4})-(\d{2})-(\d{2})$/
// RFC 3339 date-time with a mandatory offset, or a plain date. A date-time without offset is refused because
// JavaScript would read it in the server's local time zone, so the same filter would mean different instants.
const kTimestampPattern = /^(\d{4}-\d{2}-\d{2})(?:[Tt ](\d{2}:\d{2}(?::\d{2})?)(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2}))?$/
const kCanonicalIso = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

/** True when `day` is a real calendar day written YYYY-MM-DD. */
export function isUtcDay (day: unknown): day is string {
  if (typeof day !== 'string') return false
  const m = kDayPattern.exec(day)
  if (m === null) return false
  const ms = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]))
  return new Date(ms).toISOString().slice(0, 10) === day
}

/** Throws INVALID_REQUEST unless `day` is a YYYY-MM-DD calendar day. */
export function assertUtcDay (day: unknown): asserts day is string {
  if (!isUtcDay(day)) throw new StoreError('INVALID_REQUEST', 'day must be a calendar day written YYYY-MM-DD')
}

/** The day utcDayOf answered last, and where it starts (epoch ms): most calls ask for the day of now. */
let lastDayStart = Number.NaN
let lastDay = ''

/**
 * The UTC day (YYYY-MM-DD) of an instant given in epoch milliseconds. Every request asks for today (quota, history):
 * the day answered last is kept with its bounds, so that a Date and its ISO text are made once a day, not per call.
 */
export function utcDayOf (ms: number): string {
  if (ms >= lastDayStart && ms < lastDayStart + kDayMs) return lastDay
  const day = new Date(ms).toISOString().slice(0, 10)
  lastDayStart = Math.floor(ms / kDayMs) * kDayMs
  lastDay = day
  return day
}

/** Epoch milliseconds of 00:00 UTC on `day`. */
export function utcDayStartMs (day: string): number {
  return Date.parse(`${day}T00:00:00.000Z`)
}

/** Whole seconds from `nowMs` until the next UTC midnight, at least 1 (a Retry-After of 0 invites a retry storm). */
export function secondsUntilNextUtcMidnight (nowMs: number): number {
  const next = (Math.floor(nowMs / kDayMs) + 1) * kDayMs
  return Math.max(1, Math.ceil((next - nowMs) / 1000))
}

/**
 * Parses an RFC 3339 timestamp (offset required) or a plain date (UTC midnight) into epoch milliseconds,
 * or returns null. Fractions beyond milliseconds are truncated, since records are stored with millisecond precision.
 */
export function parseTimestamp (text: unknown): number | null {
  if (typeof text !== 'string' || text.length > 64) return null
  const m = kTimestampPattern.exec(text)
  if (m === null) return null
  const [, date, time, fraction, offset] = m
  if (!isUtcDay(date)) return null
  if (time === undefined) return utcDayStartMs(date as string)
  // Hours, minutes and seconds in range (Date.parse reads 24:00 as the next day), an offset within a day.
  const [h = 0, min = 0, sec = 0] = time.split(':').map(Number)
  if (h > 23 || min > 59 || sec > 59) return null
  if (offset !== 'Z' && offset !== 'z' && (Number(offset?.slice(1, 3)) > 23 || Number(offset?.slice(4, 6)) > 59)) return null
  const hms = time.length === 5 ? `${time}:00` : time
  const ms = (fraction ?? '').slice(0, 3).padEnd(3, '0')
  const parsed = Date.parse(`${date}T${hms}.${ms}${(offset as string).toUpperCase()}`)
  return Number.isFinite(parsed) ? parsed : null
}

/**
 * Parses an RFC 3339 date-time with its offset (a date alone is refused: an expiry names its instant) into epoch
 * milliseconds, or null: a day that is not in the calendar (2027-02-30) or a time out of range is refused, not moved.
 */
export function parseDateTime (text: unknown): number | null {
  return typeof text === 'string' && text.length > 10 ? parseTimestamp(text) : null
}

/** True when `text` is exactly what Date#toISOString produces (the stored form of history dates). */
export function isCanonicalIso (text: unknown): text is string {
  if (typeof text !== 'string' || !kCanonicalIso.test(text)) return false
  const ms = Date.parse(text)
  return Number.isFinite(ms) && new Date(ms).toISOString() === text
}
