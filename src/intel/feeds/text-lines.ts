/**
 * Line splitting shared by the text loaders.
 */

/** The lines of a text file: BOM dropped, CRLF or LF endings, no phantom empty line after a final newline. */
export function splitLines (text: string): string[] {
  // A UTF-8 BOM survives readFile(..., 'utf8') as U+FEFF and would glue itself to the first value.
  const body = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text
  if (body === '') return []
  const lines = body.split('\n')
  if (lines[lines.length - 1] === '') lines.pop()
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string
    if (line.charCodeAt(line.length - 1) === 13) lines[i] = line.slice(0, -1)
  }
  return lines
}

/**
 * Calls `onLine` with each line of a text as splitLines gives them (BOM dropped, CRLF or LF, no phantom last line) and
 * its 1-based number; returns the number of lines. Lines are cut one at a time rather than split into an array first:
 * a feed of millions of lines never holds millions of line strings at once.
 */
export function eachLine (text: string, onLine: (line: string, lineNo: number) => void): number {
  let pos = text.charCodeAt(0) === 0xfeff ? 1 : 0
  const end = text.length
  let n = 0
  while (pos < end) {
    let eol = text.indexOf('\n', pos)
    if (eol < 0) eol = end
    const cut = eol > pos && text.charCodeAt(eol - 1) === 13 ? eol - 1 : eol
    onLine(text.slice(pos, cut), ++n)
    pos = eol + 1
  }
  return n
}

/**
 * Calls `onLine` with every line of a feed worth reading, trimmed, and its 1-based line number: blank lines and
 * comments (lines whose first character is one of `comments`) are skipped. Counts every line of the file into
 * `counter.lines`, so rejected and skipped lines stay part of what the loader examined.
 */
export function eachDataLine (text: string, counter: { lines: number }, comments: string, onLine: (line: string, lineNo: number) => void): void {
  counter.lines = eachLine(text, (raw, lineNo) => {
    const line = raw.trim()
    if (line === '' || comments.includes(line[0] as string)) return
    onLine(line, lineNo)
  })
}

/** The first whitespace-separated token of an already trimmed line (the rest is an inline comment or extra columns). */
export function firstToken (line: string): string {
  for (let i = 0; i < line.length; i++) {
    const c = line.charCodeAt(i)
    if (c === 32 || c === 9) return line.slice(0, i)
  }
  return line
}

/** Cuts an inline comment that starts at `marker` preceded by whitespace (or at the start), then trims. */
export function stripInlineComment (line: string, marker: string): string {
  let from = 0
  for (;;) {
    const at = line.indexOf(marker, from)
    if (at < 0) return line.trim()
    const before = at === 0 ? 32 : line.charCodeAt(at - 1)
    if (before === 32 || before === 9) return line.slice(0, at).trim()
    from = at + 1
  }
}
