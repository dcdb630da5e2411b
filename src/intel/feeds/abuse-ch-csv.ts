/**
 * The CSV layout shared by the abuse.ch exports (Feodo Tracker, ThreatFox, URLhaus, MalwareBazaar): a `#` banner,
 * a header row (commented out in some exports: `# "first_seen_utc","ioc_id",...`), then one quoted record per line.
 * Columns are found by header name, so a column abuse.ch adds (ThreatFox added `is_compromised`) does not shift the
 * others; without a header, the documented order is used.
 * @see https://abuse.ch/
 */
import type { FeedParseResult } from '../../engine/types.ts'
import { splitCsvRecord } from './csv-record.ts'
import { parseFeedDate } from './feed-dates.ts'
import { FeedResultBuilder, type EntrySink } from './feed-result.ts'
import { eachLine } from './text-lines.ts'

/** One data row, fields looked up by column name ('' when the row is short of that column). */
export type CsvRow<K extends string> = Record<K, string>

/** Handles one data row: adds entries or rejects the line. */
export type CsvRowHandler<K extends string> = (row: CsvRow<K>, line: number, out: FeedResultBuilder) => void

/** Column indexes of the wanted columns in a header, or null when the header lacks one of them. */
function columnIndexes<K extends string> (header: readonly string[], wanted: readonly K[]): number[] | null {
  const indexes: number[] = []
  for (const name of wanted) {
    const at = header.indexOf(name)
    if (at < 0) return null
    indexes.push(at)
  }
  return indexes
}

/**
 * Reads an abuse.ch CSV export: `columns` in documented order, `wanted` the columns `onRow` reads by name; entries go
 * to `sink` when one is given (FeedResultBuilder).
 */
// Rows with unbalanced quotes or fewer fields than the wanted columns need are rejected here, before onRow.
export function readAbuseChCsv<K extends string> (
  text: string, columns: readonly string[], wanted: readonly K[], sink: EntrySink | undefined, onRow: CsvRowHandler<K>
): FeedParseResult {
  const out = new FeedResultBuilder(sink)
  const firstColumn = columns[0] as string
  const quotedFirstColumn = `"${firstColumn}"`
  let indexes = columnIndexes(columns, wanted) as number[]
  let needed = Math.max(...indexes) + 1
  out.lines = eachLine(text, (raw, lineNo) => {
    let line = raw.trim()
    if (line === '') return
    const comment = line[0] === '#'
    if (comment) line = line.slice(1).trim()
    // Cheap test first: only a line that starts with the first column name can be the header.
    if (line.startsWith(quotedFirstColumn) || line.startsWith(firstColumn)) {
      const header = splitCsvRecord(line)
      const found = header !== null && header[0] === firstColumn ? columnIndexes(header, wanted) : null
      if (found !== null) {
        indexes = found
        needed = Math.max(...indexes) + 1
        return
      }
    }
    if (comment) return
    const fields = splitCsvRecord(line)
    if (fields === null) {
      out.reject(lineNo, 'malformed CSV: unbalanced quotes')
      return
    }
    if (fields.length < needed) {
      out.reject(lineNo, `expected at least ${needed} fields, got ${fields.length}`)
      return
    }
    const row = {} as CsvRow<K>
    for (let w = 0; w < wanted.length; w++) row[wanted[w] as K] = fields[indexes[w] as number] as string
    onRow(row, lineNo, out)
  })
  return out.result()
}

/** Parses an optional date column: value undefined when empty, `{ ok: false }` when not a date. */
// Not-a-date rejects the row: a feed that changed its date format should show up as rejected lines, not undated evidence.
export function dateColumn (value: string): { ok: true, value: number | undefined } | { ok: false } {
  if (value === '') return { ok: true, value: undefined }
  const epoch = parseFeedDate(value)
  return epoch === undefined ? { ok: false } : { ok: true, value: epoch }
}
