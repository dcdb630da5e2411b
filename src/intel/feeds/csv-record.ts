/**
 * One CSV record per line, as the abuse.ch exports write them.
 * @see https://www.rfc-editor.org/rfc/rfc4180
 */

/** The fields of one CSV line, or null when a quote is unbalanced or text follows a closing quote. */
// Quoted fields take `""` escapes; unquoted fields are trimmed; spaces may precede a quoted field, because ThreatFox
// and MalwareBazaar separate fields with `", "`.
export function splitCsvRecord (line: string): string[] | null {
  const fields: string[] = []
  const n = line.length
  let i = 0
  for (;;) {
    while (i < n && (line.charCodeAt(i) === 32 || line.charCodeAt(i) === 9)) i++
    if (i < n && line.charCodeAt(i) === 34) {
      let value = ''
      let from = i + 1
      for (;;) {
        const quote = line.indexOf('"', from)
        if (quote < 0) return null
        if (line.charCodeAt(quote + 1) === 34) {
          value += line.slice(from, quote + 1)
          from = quote + 2
          continue
        }
        value += line.slice(from, quote)
        i = quote + 1
        break
      }
      fields.push(value)
      while (i < n && (line.charCodeAt(i) === 32 || line.charCodeAt(i) === 9)) i++
      if (i >= n) return fields
      if (line.charCodeAt(i) !== 44) return null
      i++
    } else {
      const comma = line.indexOf(',', i)
      if (comma < 0) {
        fields.push(line.slice(i).trim())
        return fields
      }
      fields.push(line.slice(i, comma).trim())
      i = comma + 1
    }
  }
}
