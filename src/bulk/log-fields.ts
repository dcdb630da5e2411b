/**
 * Log-only fields of an indicator (docs/API.md "Request bodies"): `action_taken` and `action_source`. They never change a verdict or a
 * cache key; they are validated at the edge and recorded in history.
 */
import { InvalidActionSourceError } from '../errors.ts'

/** Longest action_source after trimming and lowercasing: 64 characters, as the interface's limits say. */
export const kMaxActionSource = 64

/**
 * Trimmed, lowercased action_source, or null when empty; throws INVALID_ACTION_SOURCE past 64 characters. `where`
 * prefixes the field's name in the error: a string, or a bulk item's index (`indicators[i].`), whose prefix is built
 * only when there is an error to name.
 */
export function normalizeActionSource (raw: string | null | undefined, where: string | number): string | null {
  if (raw === undefined || raw === null) return null
  const v = raw.trim().toLowerCase()
  if (v === '') return null
  // Length in characters (code points), as a user counts them. It is never more than the UTF-16 length, so it is
  // counted only when that is over the limit.
  if (v.length > kMaxActionSource) {
    const n = [...v].length
    if (n > kMaxActionSource) throw new InvalidActionSourceError(`${typeof where === 'number' ? `indicators[${where}].` : where}action_source is ${n} characters after trimming and lowercasing; the limit is ${kMaxActionSource}`)
  }
  return v
}

/** action_taken with empty meaning "not provided". */
export function normalizeActionTaken (raw: string | null | undefined): string | null {
  return raw === undefined || raw === null || raw === '' ? null : raw
}
