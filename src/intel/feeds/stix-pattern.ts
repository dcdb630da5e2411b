/**
 * The subset of the STIX 2.1 patterning language that lists indicators: equality comparisons joined by OR, inside
 * observation brackets that are themselves joined by OR, with optional parentheses:
 * `[ipv4-addr:value = '198.51.100.1']`, `[a = 'x' OR b = 'y']`, `([a = 'x'] OR [b = 'y'])`.
 * AND, FOLLOWEDBY, NOT, qualifiers (WITHIN, REPEATS, START/STOP) and operators other than `=` change what the pattern
 * matches, so such patterns are reported as unsupported rather than read as lists.
 * @see https://docs.oasis-open.org/cti/stix/v2.1/os/stix-v2.1-os.html#_e8slinrhxcc9
 */

/** One `object-path = value` comparison. */
export interface StixComparison {
  /** Object path as written, e.g. `ipv4-addr:value`, `file:hashes.'SHA-256'`. */
  path: string
  /** The literal: string contents (escapes resolved) or the digits of an integer. */
  value: string
  /** True for a quoted string literal, false for an integer. */
  quoted: boolean
}

/** The comparisons of a pattern, or why it cannot be read. */
export type StixPatternResult = { ok: true, comparisons: StixComparison[] } | { ok: false, reason: string }

/** Parentheses deeper than this are rejected, so hostile input cannot exhaust the stack. */
const kMaxDepth = 16

class PatternError extends Error {}

/** Object-path characters outside quoted keys: letters, digits, `_`, `:`, `.`, `-`. */
function isPathChar (c: number): boolean {
  const lower = c | 0x20
  return (lower >= 97 && lower <= 122) || (c >= 48 && c <= 58) || c === 95 || c === 46 || c === 45
}

/** Recursive-descent reader over one pattern string. */
class PatternReader {
  readonly src: string
  pos = 0
  readonly comparisons: StixComparison[] = []

  constructor (src: string) {
    this.src = src
  }

  skipSpace (): void {
    while (this.pos < this.src.length) {
      const c = this.src.charCodeAt(this.pos)
      if (c !== 32 && c !== 9 && c !== 10 && c !== 13) return
      this.pos++
    }
  }

  /** The upper-cased word at the cursor (letters only), without consuming it. */
  peekWord (): string {
    let end = this.pos
    while (end < this.src.length) {
      const c = this.src.charCodeAt(end) | 0x20
      if (c < 97 || c > 122) break
      end++
    }
    return this.src.slice(this.pos, end).toUpperCase()
  }

  expect (char: string): void {
    this.skipSpace()
    if (this.src[this.pos] !== char) throw new PatternError(`invalid pattern: expected "${char}" at ${this.pos}`)
    this.pos++
  }

  /** Rejects any keyword other than OR where an expression may continue. */
  checkJoiner (): boolean {
    this.skipSpace()
    const word = this.peekWord()
    if (word === 'OR') {
      this.pos += 2
      return true
    }
    if (word !== '') throw new PatternError(`unsupported pattern: ${word}`)
    return false
  }

  /** observation-expression := observation-term (OR observation-term)* */
  observationExpression (depth: number): void {
    do {
      this.observationTerm(depth)
    } while (this.checkJoiner())
  }

  observationTerm (depth: number): void {
    if (depth > kMaxDepth) throw new PatternError('unsupported pattern: nesting too deep')
    this.skipSpace()
    const c = this.src[this.pos]
    this.pos++
    if (c === '(') {
      this.observationExpression(depth + 1)
      this.expect(')')
    } else if (c === '[') {
      this.comparisonExpression(depth + 1)
      this.expect(']')
    } else {
      throw new PatternError(`invalid pattern: expected "[" or "(" at ${this.pos - 1}`)
    }
  }

  /** comparison-expression := comparison (OR comparison)* */
  comparisonExpression (depth: number): void {
    do {
      this.comparison(depth)
    } while (this.checkJoiner())
  }

  comparison (depth: number): void {
    if (depth > kMaxDepth) throw new PatternError('unsupported pattern: nesting too deep')
    this.skipSpace()
    if (this.src[this.pos] === '(') {
      this.pos++
      this.comparisonExpression(depth + 1)
      this.expect(')')
      return
    }
    const path = this.objectPath()
    this.skipSpace()
    if (this.src[this.pos] !== '=' || this.src[this.pos + 1] === '=') {
      const op = this.peekWord() !== '' ? this.peekWord() : this.src.slice(this.pos, this.pos + 2).trim()
      throw new PatternError(`unsupported pattern: operator ${op === '' ? '(none)' : op}`)
    }
    this.pos++
    this.skipSpace()
    this.comparisons.push(this.literal(path))
  }

  /** An object path: letters, digits, `-`, `_`, `:`, `.`, and quoted keys such as `hashes.'SHA-256'`. */
  objectPath (): string {
    const start = this.pos
    while (this.pos < this.src.length) {
      const ch = this.src[this.pos] as string
      if (ch === "'") {
        const close = this.src.indexOf("'", this.pos + 1)
        if (close < 0) throw new PatternError('invalid pattern: unterminated quoted path key')
        this.pos = close + 1
      } else if (isPathChar(ch.charCodeAt(0))) {
        this.pos++
      } else {
        break
      }
    }
    if (this.pos === start) throw new PatternError(`invalid pattern: expected an object path at ${start}`)
    // `[*]` list indexes and other path forms are not plain equality on one observable.
    if (this.src[this.pos] === '[') throw new PatternError('unsupported pattern: list index in object path')
    return this.src.slice(start, this.pos)
  }

  /** A string literal ('...' with \' and \\ escapes) or an integer; other literal kinds are unsupported. */
  literal (path: string): StixComparison {
    const c = this.src[this.pos]
    if (c === "'") {
      let value = ''
      let from = this.pos + 1
      for (;;) {
        const quote = this.src.indexOf("'", from)
        const escape = this.src.indexOf('\\', from)
        if (escape >= 0 && (quote < 0 || escape < quote)) {
          const next = this.src[escape + 1]
          if (next !== "'" && next !== '\\') throw new PatternError('invalid pattern: bad escape in string')
          value += this.src.slice(from, escape) + next
          from = escape + 2
          continue
        }
        if (quote < 0) throw new PatternError('invalid pattern: unterminated string')
        value += this.src.slice(from, quote)
        this.pos = quote + 1
        return { path, value, quoted: true }
      }
    }
    let end = this.pos
    if (this.src[end] === '-') end++
    while (end < this.src.length && this.src.charCodeAt(end) >= 48 && this.src.charCodeAt(end) <= 57) end++
    if (end === this.pos || this.src.slice(this.pos, end) === '-') {
      throw new PatternError('unsupported pattern: literal is not a string or integer')
    }
    const value = this.src.slice(this.pos, end)
    this.pos = end
    return { path, value, quoted: false }
  }
}

/** Reads an OR-only equality pattern into its comparisons. */
export function parseStixPattern (pattern: string): StixPatternResult {
  const reader = new PatternReader(pattern)
  try {
    reader.observationExpression(0)
    reader.skipSpace()
    if (reader.pos !== pattern.length) {
      const word = reader.peekWord()
      return { ok: false, reason: word !== '' ? `unsupported pattern: ${word}` : `invalid pattern: unexpected text at ${reader.pos}` }
    }
  } catch (err) {
    if (err instanceof PatternError) return { ok: false, reason: err.message }
    throw err
  }
  return { ok: true, comparisons: reader.comparisons }
}
