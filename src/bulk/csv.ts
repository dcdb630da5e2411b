/**
 * The CSV form of bulk result items (RFC 4180): one row per indicator with the columns of kCsvColumns. The bulk route
 * (Accept: text/csv) and the CLI's `score --format csv` write the same rows.
 * @see https://www.rfc-editor.org/rfc/rfc4180
 */

/** Columns of a CSV answer, in order. `top_signals` is the signal ids of up to three signals, space-separated. */
export const kCsvColumns = ['value', 'type', 'normalized', 'score', 'strength', 'category', 'top_signals', 'error'] as const

/** The header line, with its line break. */
export const kCsvHeader = kCsvColumns.join(',') + '\r\n'

/** Signals named in the top_signals column (the bulk API's `top`). */
const kCsvSignals = 3

/** A field, quoted when it holds a comma, quote or line break; a leading =, +, - or @ is neutralized for spreadsheets. */
export function csvField (v: string): string {
  // A value such as =HYPERLINK(...) would be a formula in a spreadsheet opening the file (CSV injection).
  const safe = /^[=+\-@\t\r]/.test(v) ? `'${v}` : v
  return /[",\r\n']/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe
}

/** What a row reads of a result item (the bulk result item's JSON form); `type` and `value` are as sent, any JSON value. */
export interface CsvItem {
  indicator: { type?: unknown, value?: unknown, normalized?: string | null }
  risk: { score: number, strength: string, category: string } | null
  signals?: Array<{ signal_id: string }>
  errors?: string[]
}

/** A cell's text: a string as it is, nothing for null, anything else (a number, an array, an object) as its JSON. */
function cell (v: unknown): string {
  if (typeof v === 'string') return v
  if (v === null || v === undefined) return ''
  return JSON.stringify(v) ?? ''
}

/** One row, with its line break. Never throws: an item it cannot write becomes a row naming the error. */
export function csvRow (item: CsvItem): string {
  try {
    const { indicator: ind, risk } = item
    const cells = [
      cell(ind.value),
      cell(ind.type),
      cell(ind.normalized),
      risk === null ? '' : String(risk.score),
      risk === null ? '' : risk.strength,
      risk === null ? '' : risk.category,
      (item.signals ?? []).slice(0, kCsvSignals).map((s) => s.signal_id).join(' '),
      (item.errors ?? []).join('; ')
    ]
    return cells.map(csvField).join(',') + '\r\n'
  } catch {
    return ',,,,,,,item could not be written as CSV\r\n'
  }
}
