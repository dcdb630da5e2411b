/**
 * Adblock-style host lists (uBlock Origin, AdGuard, Adblock Plus): `||host^` rules and uBlock's bare-hostname rules.
 *
 * Only rules that block a whole host become entries: `||host^`, `||host^|`, `||host` (lists use it for the host), the
 * same with host-wide options (`$all`, `$important`, `$document`), and bare host names or addresses. Rules with a path (`||host/x.exe^`), a wildcard, a port or a
 * narrowing option (`$script`, `$third-party`, `$domain=...`) are valid rules that block some requests to a host, not the
 * host itself, so they are skipped silently (counted in `lines`): the URLhaus filter blocks single files on archive.org,
 * bitbucket.org and drive.google.com that way, and listing those hosts would convict shared infrastructure.
 * A `||` rule whose host has characters no host name can hold is rejected: that is a broken line, not a narrower rule.
 * @see https://adguard.com/kb/general/ad-filtering/create-own-filters/#basic-rules-syntax
 * @see https://github.com/gorhill/uBlock/wiki/Static-filter-syntax
 */
import type { FeedParseResult } from '../../engine/types.ts'
import { FeedResultBuilder, type EntrySink } from './feed-result.ts'
import { hostType } from './ip-literal.ts'
import { eachDataLine } from './text-lines.ts'

/** Options that keep a rule host-wide: they change how it blocks, not which requests it covers. */
const kHostWideOptions = new Set(['all', 'important', 'document', 'doc'])
/** Cosmetic and scriptlet separators: element hiding, exceptions, extended CSS, snippets, HTML filters. */
const kCosmeticMarkers = ['##', '#@#', '#?#', '#$#', '#%#', '#@$#', '#@?#', '$$']

/** Host-name characters: ASCII letters, digits, `.`, `-`, `_`, and any non-ASCII (IDN). */
function isHostChar (c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 46 || c === 45 || c === 95 || c >= 128
}

/** Characters that make a rule pattern narrower than a host (path, query, wildcard, port, separator). */
function isPatternChar (c: number): boolean {
  return c === 47 || c === 42 || c === 63 || c === 58 || c === 94 || c === 124 || c === 61 || c === 38
}

type HostCheck = { host: string } | { skip: true } | { reason: string }

/** Checks a candidate host from a rule: a host, a narrower pattern to skip, or a broken rule. */
function checkHost (host: string, strict: boolean): HostCheck {
  if (host.length > 2 && host.startsWith('[') && host.endsWith(']')) {
    const inner = host.slice(1, -1)
    return hostType(inner) === 'ip' ? { host: inner } : { reason: `invalid host ${JSON.stringify(host.slice(0, 80))}` }
  }
  if (host === '') return strict ? { reason: 'empty host' } : { skip: true }
  for (let i = 0; i < host.length; i++) {
    const c = host.charCodeAt(i)
    if (isHostChar(c)) continue
    if (isPatternChar(c)) return { skip: true }
    return strict ? { reason: `invalid host ${JSON.stringify(host.slice(0, 80))}` } : { skip: true }
  }
  return { host }
}

/** Whether every `$` option of a rule leaves it host-wide. */
function hostWideOptions (options: string): boolean {
  for (const option of options.split(',')) {
    if (!kHostWideOptions.has(option.trim().toLowerCase())) return false
  }
  return true
}

/** Parses an adblock-style filter list into host entries. */
export function parseAdblock (text: string, sink?: EntrySink): FeedParseResult {
  const out = new FeedResultBuilder(sink)
  eachDataLine(text, out, '![#', (line, lineNo) => {
    // `!` comments, `[Adblock Plus 2.0]` headers, uBlock `# ` comments, `@@` exceptions: nothing to list.
    if (line.startsWith('@@')) return
    if (kCosmeticMarkers.some((m) => line.includes(m))) return
    let rule = line
    const dollar = rule.lastIndexOf('$')
    if (dollar >= 0) {
      if (!hostWideOptions(rule.slice(dollar + 1))) return
      rule = rule.slice(0, dollar)
    }
    let check: HostCheck
    if (rule.startsWith('||')) {
      let host = rule.slice(2)
      // `||host^` and `||host^|` end at the separator; a separator anywhere else is followed by more pattern.
      if (host.endsWith('^|')) host = host.slice(0, -2)
      else if (host.endsWith('^')) host = host.slice(0, -1)
      check = checkHost(host, true)
    } else {
      // uBlock reads a bare line that is a host name as `||host^`; a bare word without a dot is a substring pattern.
      if (hostType(rule) === 'ip') check = { host: rule }
      else check = rule.includes('.') || rule.startsWith('[') ? checkHost(rule, false) : { skip: true }
    }
    if ('host' in check) out.add(hostType(check.host), check.host, lineNo)
    else if ('reason' in check) out.reject(lineNo, check.reason)
  })
  return out.result()
}
