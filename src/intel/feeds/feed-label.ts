/**
 * Threat labels as feeds write them, with their "no value" spellings removed.
 */

const kNoValue = new Set(['', 'none', 'n/a', 'null', '-', 'unknown'])
const kMaxLabelLength = 200

/** The trimmed label, or undefined for empty and placeholder values (`None`, `n/a`, `null`, `-`, `unknown`). */
export function cleanLabel (value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined
  const label = value.trim()
  if (kNoValue.has(label.toLowerCase())) return undefined
  // Labels end up in every verdict that cites the feed; a paragraph-long MISP event title is cut, not carried.
  return label.length > kMaxLabelLength ? label.slice(0, kMaxLabelLength) : label
}
