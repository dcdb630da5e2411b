/**
 * Guarded JSON access for the JSON loaders: feeds are untrusted input, so every member is checked before use.
 */

/** A JSON object (not an array, not null). */
export type JsonRecord = Record<string, unknown>

/** Whether a parsed JSON value is an object. */
export function isRecord (value: unknown): value is JsonRecord {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Parses a whole JSON document; `{ ok: false }` with the parser's message instead of throwing. */
export function parseJsonDocument (text: string): { ok: true, value: unknown } | { ok: false, reason: string } {
  const body = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text
  try {
    return { ok: true, value: JSON.parse(body) }
  } catch (err) {
    return { ok: false, reason: `not valid JSON: ${(err as Error).message}` }
  }
}

/** Parses one JSON-lines record that must be an object; null when it is not valid JSON or not an object. */
export function parseJsonLine (line: string): JsonRecord | null {
  try {
    const value: unknown = JSON.parse(line)
    return isRecord(value) ? value : null
  } catch {
    return null
  }
}

/** The member as an array, or an empty array when it is absent; null when present but not an array. */
export function arrayMember (record: JsonRecord, key: string): unknown[] | null {
  const value = record[key]
  if (value === undefined || value === null) return []
  return Array.isArray(value) ? value : null
}
