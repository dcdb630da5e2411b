/**
 * Domain names: lowercase, one trailing dot removed, IDN converted to punycode A-labels with UTS #46
 * mapping (node:url domainToASCII, which also treats 。．｡ as dots). Labels are LDH plus underscore,
 * because real records use `_dmarc`, `_domainkey` and the like; a label may not start or end with a
 * hyphen. At least two labels and a non-numeric TLD are required. Wildcards and email addresses
 * are rejected rather than trimmed, because the caller meant something other than one domain.
 */
import { domainToASCII } from 'node:url'
import punycode from 'punycode/punycode.js'
import { fail, type Failure } from './failure.ts'

const kErrEmpty = 'invalid domain: empty label'
const kErrLabelLong = 'invalid domain: label longer than 63 characters'
const kErrLong = 'invalid domain: longer than 253 characters'
const kErrHyphen = 'invalid domain: label starts or ends with a hyphen'
const kErrOneLabel = 'invalid domain: needs at least two labels'
const kErrNumericTld = 'invalid domain: top-level label is numeric'
const kErrWildcard = 'invalid domain: wildcards are not accepted'
const kErrEmail = 'invalid domain: looks like an email address'
const kErrIdn = 'invalid domain: IDN conversion failed'
const kErrPunycode = 'invalid domain: invalid punycode label'
const kMaxLength = 253
const kMaxLabel = 63

/** True for chars allowed in a normalized label: a-z 0-9 - _. */
function isLabelChar (c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c === 45 || c === 95
}

/** Error text for an unexpected character, quoting it when printable ASCII. */
function badChar (c: number): string {
  if (c > 32 && c < 127) return `invalid domain: invalid character '${String.fromCharCode(c)}'`
  return `invalid domain: invalid character U+${c.toString(16).toUpperCase().padStart(4, '0')}`
}

/**
 * Validates lowercase ASCII d[0, end) label by label. Returns null when valid, a Failure otherwise,
 * or 'xn' when valid but holding an xn-- label whose punycode still needs checking.
 */
function validateAscii (d: string, end: number): Failure | 'xn' | null {
  if (end > kMaxLength) return fail(kErrLong)
  let labels = 0
  let labelStart = 0
  let numeric = true
  let xn = false
  for (let i = 0; i <= end; i++) {
    const c = i < end ? d.charCodeAt(i) : 46
    if (c === 46) {
      const len = i - labelStart
      if (len === 0) return fail(kErrEmpty)
      if (len > kMaxLabel) return fail(kErrLabelLong)
      if (d.charCodeAt(labelStart) === 45 || d.charCodeAt(i - 1) === 45) return fail(kErrHyphen)
      if (len > 4 && d.charCodeAt(labelStart) === 120 && d.charCodeAt(labelStart + 1) === 110 &&
        d.charCodeAt(labelStart + 2) === 45 && d.charCodeAt(labelStart + 3) === 45) xn = true
      labels++
      if (i < end) numeric = true
      labelStart = i + 1
    } else if (isLabelChar(c)) {
      if (c < 48 || c > 57) numeric = false
    } else {
      return fail(badChar(c))
    }
  }
  if (labels < 2) return fail(kErrOneLabel)
  if (numeric) return fail(kErrNumericTld)
  return xn ? 'xn' : null
}

/** Normalizes a domain value (trimmed, refanged, not a URL) to lowercase A-label form. */
export function normalizeDomain (s: string): string | Failure {
  let upper = false
  let nonAscii = false
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (isLabelChar(c) || c === 46) continue
    if (c >= 65 && c <= 90) {
      upper = true
    } else if (c >= 128) {
      nonAscii = true
    } else if (c === 42) {
      return fail(kErrWildcard)
    } else if (c === 64) {
      return fail(kErrEmail)
    } else {
      return fail(badChar(c))
    }
  }
  let d = s
  if (nonAscii) {
    // Bound the work domainToASCII does on junk; no valid name is this long even before encoding.
    if (s.length > 4 * kMaxLength) return fail(kErrLong)
    d = domainToASCII(s)
    if (d.length === 0) return fail(kErrIdn)
  } else if (upper) {
    d = s.toLowerCase()
  }
  const end = d.charCodeAt(d.length - 1) === 46 ? d.length - 1 : d.length
  const v = validateAscii(d, end)
  if (v !== null && v !== 'xn') return v
  const out = end === d.length ? d : d.slice(0, end)
  // An ASCII xn-- label skipped IDNA processing, so decode it to reject undecodable punycode.
  if (v === 'xn' && !nonAscii && !punycodeValid(out)) return fail(kErrPunycode)
  return out
}

/**
 * True when every xn-- label of a lowercase ASCII name decodes (RFC 3492) to a name that IDNA maps back to the same
 * label. Node's own URL parser stopped rejecting undecodable labels (`xn--zz`) in Node 24, so the decode is done here.
 * @see https://www.rfc-editor.org/rfc/rfc3492#section-6.2
 */
function punycodeValid (name: string): boolean {
  for (const label of name.split('.')) {
    if (!label.startsWith('xn--')) continue
    let decoded: string
    try {
      decoded = punycode.decode(label.slice(4))
    } catch {
      return false
    }
    // An empty or all-ASCII decoding ('xn--abc-') is not an A-label either.
    if (decoded.length === 0 || domainToASCII(`${decoded}.a`) !== `${label}.a`) return false
  }
  return true
}
