/**
 * Date parsing for feed timestamps. Hand-rolled because `Date.parse('2024-01-01 12:00:00')` reads a space-separated
 * date-time as local time, while every feed here means UTC.
 */

const kMaxOffsetMinutes = 18 * 60

/** Two ASCII digits at `at` as a number, or -1. */
function digits2 (s: string, at: number): number {
  const a = s.charCodeAt(at) - 48
  const b = s.charCodeAt(at + 1) - 48
  return a >= 0 && a <= 9 && b >= 0 && b <= 9 ? a * 10 + b : -1
}

/** Whether every character of s[from, to) is an ASCII digit. */
function allDigits (s: string, from: number, to: number): boolean {
  if (to <= from) return false
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i)
    if (c < 48 || c > 57) return false
  }
  return true
}

/** Epoch ms of a feed date (UTC unless it carries an offset), or undefined when it is not a real date. */
// Accepted: `YYYY-MM-DD`, then optionally ` HH:MM[:SS[.fraction]]` (or with `T`), then nothing, `Z`, ` UTC`, `±HH:MM`
// or `±HHMM`. Nothing else: a guess at an unknown format would date evidence wrongly.
export function parseFeedDate (text: string): number | undefined {
  const s = text.trim()
  if (s.length < 10 || s.charCodeAt(4) !== 45 || s.charCodeAt(7) !== 45 || !allDigits(s, 0, 4)) return undefined
  const year = Number(s.slice(0, 4))
  const month = digits2(s, 5)
  const day = digits2(s, 8)
  if (month < 1 || month > 12 || day < 1 || day > 31) return undefined
  let hour = 0
  let minute = 0
  let second = 0
  let ms = 0
  let i = 10
  if (i < s.length && (s[i] === ' ' || s[i] === 'T' || s[i] === 't')) {
    hour = digits2(s, i + 1)
    minute = s.charCodeAt(i + 3) === 58 ? digits2(s, i + 4) : -1
    if (hour < 0 || hour > 23 || minute < 0 || minute > 59) return undefined
    i += 6
    if (s.charCodeAt(i) === 58) {
      second = digits2(s, i + 1)
      if (second < 0 || second > 60) return undefined
      i += 3
      if (s.charCodeAt(i) === 46) {
        let end = i + 1
        while (end < s.length && s.charCodeAt(end) >= 48 && s.charCodeAt(end) <= 57) end++
        if (end === i + 1) return undefined
        // Feeds write 3 (STIX) to 6 (MISP) fraction digits; milliseconds are all the precision evidence needs.
        ms = Number((s.slice(i + 1, Math.min(end, i + 4)) + '00').slice(0, 3))
        i = end
      }
    }
  }
  let offsetMinutes = 0
  const zone = s.slice(i).trim()
  if (zone !== '' && zone !== 'Z' && zone !== 'z' && zone !== 'UTC') {
    const sign = zone[0] === '+' ? 1 : zone[0] === '-' ? -1 : 0
    const hh = digits2(zone, 1)
    const mm = zone.length === 6 && zone[3] === ':' ? digits2(zone, 4) : zone.length === 5 ? digits2(zone, 3) : -1
    if (sign === 0 || hh < 0 || mm < 0) return undefined
    offsetMinutes = sign * (hh * 60 + mm)
    if (Math.abs(offsetMinutes) > kMaxOffsetMinutes) return undefined
  }
  const epoch = Date.UTC(year, month - 1, day, hour, minute, second, ms)
  // Date.UTC rolls 2024-02-31 over to March; a date that does not round-trip is not a real date.
  if (new Date(epoch).getUTCDate() !== day) return undefined
  return epoch - offsetMinutes * 60_000
}

/** Epoch ms of a Unix-seconds value given as a number or a digit string (MISP writes both); undefined otherwise. */
export function parseEpochSeconds (value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) && value >= 0 ? Math.round(value * 1000) : undefined
  if (typeof value === 'string' && allDigits(value, 0, value.length) && value.length <= 12) return Number(value) * 1000
  return undefined
}
