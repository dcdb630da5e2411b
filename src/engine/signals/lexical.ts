/**
 * Lexical domain signals that need no feed: punycode homographs, lookalikes of guarded domains (eth-phishing-detect's
 * fuzzy list and tolerance), and hosting under a shared private suffix. The DGA signal lives in dga.ts; dgaLike below
 * is the heuristic it replaced, kept only as the baseline of bench/dga-eval.ts.
 * Each function is pure and returns null when the signal does not fire.
 */
import { domainToUnicode } from 'node:url'

/** Character counts of an ASCII string (scratch space only: the functions stay pure). */
const kCounts = new Int32Array(128)

/** Shannon entropy in bits per character (per code point). */
export function entropy (s: string): number {
  let ascii = true
  for (let i = 0; i < s.length && ascii; i++) ascii = s.charCodeAt(i) < 128
  let h = 0
  if (ascii) {
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i)
      kCounts[c] = (kCounts[c] as number) + 1
    }
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i)
      const n = kCounts[c] as number
      if (n === 0) continue // counted already
      kCounts[c] = 0
      const p = n / s.length
      h -= p * Math.log2(p)
    }
    return h
  }
  const counts = new Map<string, number>()
  let length = 0
  for (const ch of s) {
    counts.set(ch, (counts.get(ch) ?? 0) + 1)
    length++
  }
  for (const n of counts.values()) {
    const p = n / length
    h -= p * Math.log2(p)
  }
  return h
}

function round3 (x: number): number {
  return Math.round(x * 1000) / 1000
}

/**
 * DGA-like (replaced by dgaSignal in dga.ts; bench baseline only): a long registrable label with high character
 * entropy and either few vowels or many digits. Deliberately conservative: real brands are short or pronounceable, so both conditions must hold.
 */
export function dgaLike (label: string, minLength: number, minEntropy: number): { entropy: number, vowel_ratio: number, digit_ratio: number } | null {
  if (label.length < minLength || label.startsWith('xn--')) return null
  let vowels = 0
  let digits = 0
  let letters = 0
  for (let i = 0; i < label.length; i++) {
    const c = label.charCodeAt(i)
    if (c >= 48 && c <= 57) digits++
    else if (c >= 97 && c <= 122) {
      letters++
      if (c === 97 || c === 101 || c === 105 || c === 111 || c === 117) vowels++
    }
  }
  const h = entropy(label)
  const vowelRatio = letters === 0 ? 0 : vowels / letters
  const digitRatio = digits / label.length
  if (h < minEntropy) return null
  if (vowelRatio >= 0.25 && digitRatio <= 0.2) return null
  return { entropy: round3(h), vowel_ratio: round3(vowelRatio), digit_ratio: round3(digitRatio) }
}

/** Cyrillic and Greek letters that render like Latin ones (Unicode confusables, lowercase subset). */
const kConfusables: Record<string, string> = {
  а: 'a',
  в: 'b',
  е: 'e',
  ё: 'e',
  һ: 'h',
  і: 'i',
  ї: 'i',
  ј: 'j',
  к: 'k',
  м: 'm',
  н: 'h',
  о: 'o',
  р: 'p',
  с: 'c',
  т: 't',
  у: 'y',
  х: 'x',
  ѕ: 's',
  ԁ: 'd',
  ԛ: 'q',
  ԝ: 'w',
  ӏ: 'l',
  ɡ: 'g',
  α: 'a',
  β: 'b',
  ε: 'e',
  ι: 'i',
  κ: 'k',
  ν: 'v',
  ο: 'o',
  ρ: 'p',
  τ: 't',
  υ: 'u',
  χ: 'x',
  γ: 'y'
}

/**
 * Homograph: a punycode label whose Unicode form is made (wholly or partly) of letters that render as Latin ones.
 * Returns the Latin skeleton, which the lookalike check compares against guarded domains.
 * @see https://www.unicode.org/reports/tr39/#Confusable_Detection
 */
export function homograph (domain: string): { unicode: string, skeleton: string, mixed_script: boolean } | null {
  if (!domain.includes('xn--')) return null
  const unicode = domainToUnicode(domain)
  if (unicode === '' || unicode === domain) return null
  let skeleton = ''
  let latin = false
  let confusable = false
  let other = false
  for (const ch of unicode) {
    const mapped = kConfusables[ch]
    if (mapped !== undefined) {
      confusable = true
      skeleton += mapped
    } else if (ch.charCodeAt(0) < 128) {
      if (/[a-z]/.test(ch)) latin = true
      skeleton += ch
    } else {
      other = true
      skeleton += ch
    }
  }
  if (!confusable || other) return null
  return { unicode, skeleton, mixed_script: latin }
}

/** Two DP rows reused by every call (scratch space only: the function stays pure). Grown on demand. */
let rowA = new Int32Array(256)
let rowB = new Int32Array(256)

/**
 * Levenshtein distance when it is at most `max`; otherwise some value greater than `max`. Runs once per guarded
 * domain for every scored name, so it allocates nothing and fills only the diagonal band |i - j| <= max (cells
 * outside it are already more than `max` edits away), stopping at the first row whose band exceeds `max`.
 */
export function editDistance (a: string, b: string, max: number): number {
  const n = a.length
  const m = b.length
  const over = max + 1
  if (Math.abs(n - m) > max) return over
  if (m + 2 > rowA.length) {
    rowA = new Int32Array(m + 2)
    rowB = new Int32Array(m + 2)
  }
  let prev = rowA
  let cur = rowB
  for (let j = 0; j <= m; j++) prev[j] = j <= max ? j : over
  for (let i = 1; i <= n; i++) {
    const lo = i - max > 1 ? i - max : 1
    const hi = i + max < m ? i + max : m
    cur[lo - 1] = lo === 1 ? i : over
    let best = lo === 1 ? i : over
    const ca = a.charCodeAt(i - 1)
    for (let j = lo; j <= hi; j++) {
      const del = (prev[j] as number) + 1
      const ins = (cur[j - 1] as number) + 1
      const sub = (prev[j - 1] as number) + (ca === b.charCodeAt(j - 1) ? 0 : 1)
      const v = del < ins ? (del < sub ? del : sub) : (ins < sub ? ins : sub)
      cur[j] = v
      if (v < best) best = v
    }
    if (hi < m) cur[hi + 1] = over
    if (best > max) return over
    const t = prev
    prev = cur
    cur = t
  }
  return prev[m] as number
}

/** Bit (code % 31) for each character of `s`: two strings whose masks differ in b bits are at least b / 2 edits apart. */
function charMask (s: string): number {
  let m = 0
  for (let i = 0; i < s.length; i++) m |= 1 << (s.charCodeAt(i) % 31)
  return m
}

function popcount (x: number): number {
  x -= (x >>> 1) & 0x55555555
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333)
  return Math.imul((x + (x >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24
}

/** Character masks of guarded domains (a memo of a pure function; the targets are a few dozen names). */
const kTargetMasks = new Map<string, number>()

/**
 * Lookalike: within `tolerance` edits of a guarded domain but not that domain. One edit changes the presence of at
 * most two characters, and a character bucket of the mask can only differ when some character in it does, so a
 * target whose mask differs in more than 2 x tolerance bits cannot be within tolerance: it is skipped without the
 * edit-distance pass. The filter never skips a true lookalike.
 */
export function lookalike (registrable: string, targets: readonly string[], tolerance: number): { target: string, distance: number } | null {
  for (const target of targets) {
    if (registrable === target) return null
  }
  const mask = charMask(registrable)
  for (const target of targets) {
    if (Math.abs(registrable.length - target.length) > tolerance) continue
    let tm = kTargetMasks.get(target)
    if (tm === undefined) kTargetMasks.set(target, tm = charMask(target))
    if (popcount(mask ^ tm) > 2 * tolerance) continue
    const d = editDistance(registrable, target, tolerance)
    if (d > 0 && d <= tolerance) return { target, distance: d }
  }
  return null
}
