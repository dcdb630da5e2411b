/**
 * STIX 2.1 bundles (JSON): `{"type":"bundle","objects":[...]}` (a bare array of objects is read the same way).
 * Items are the bundle's objects, numbered from 1. Only `indicator` objects with `pattern_type: "stix"` (or no
 * pattern_type, as in STIX 2.0) are read; other objects, other pattern languages and `revoked: true` indicators are
 * counted and skipped.
 *
 * Observables read: ipv4-addr / ipv6-addr `value` (address or CIDR), domain-name `value`, file `hashes.'SHA-256'`,
 * autonomous-system `number`, url `value` (its host). In an OR, comparisons on other observables are ignored (the
 * others still match on their own); a pattern with none of these is rejected as unsupported, as are AND, other
 * operators and qualifiers (see stix-pattern.ts).
 * lastSeen = `modified` (else `created`), capped at `valid_until`: an expired indicator ages from its expiry, which
 * keeps the loader pure (no clock) while decay still retires it. firstSeen = `valid_from`.
 * label = `name`, else the first of `indicator_types`.
 * @see https://docs.oasis-open.org/cti/stix/v2.1/os/stix-v2.1-os.html#_muftrcpnf89v
 */
import type { FeedParseResult, IndicatorType } from '../../engine/types.ts'
import { parseFeedDate } from './feed-dates.ts'
import { cleanLabel } from './feed-label.ts'
import { FeedResultBuilder, wholeFileRejected, type EntryFacts, type EntrySink } from './feed-result.ts'
import { classifyIp, hostType } from './ip-literal.ts'
import { isRecord, parseJsonDocument, type JsonRecord } from './json-value.ts'
import { parseStixPattern, type StixComparison } from './stix-pattern.ts'
import { hostFromUrl } from './url-host.ts'

/** The indicator type and raw value of one comparison, or null when the observable is not one the contract indexes. */
function entryOf (comparison: StixComparison): { type: IndicatorType, value: string } | null {
  const { path, value, quoted } = comparison
  switch (path.toLowerCase()) {
    case 'ipv4-addr:value':
    case 'ipv6-addr:value': {
      const type = quoted ? classifyIp(value) : null
      return type === null ? null : { type, value }
    }
    case 'domain-name:value':
      return quoted && value !== '' ? { type: 'domain', value } : null
    case "file:hashes.'sha-256'":
    case 'file:hashes.sha-256':
    case "file:hashes.'sha256'":
    case 'file:hashes.sha256':
      return quoted && value !== '' ? { type: 'file_hash_sha256', value } : null
    case 'autonomous-system:number':
      return quoted || value.startsWith('-') ? null : { type: 'asn', value: `AS${value}` }
    case 'url:value': {
      const host = quoted ? hostFromUrl(value) : null
      return host === null ? null : { type: hostType(host), value: host }
    }
    default:
      return null
  }
}

/** An optional timestamp member; `{ ok: false }` when present but not a STIX timestamp. */
function timestamp (object: JsonRecord, key: string): { ok: true, value: number | undefined } | { ok: false } {
  const raw = object[key]
  if (raw === undefined || raw === null) return { ok: true, value: undefined }
  const value = typeof raw === 'string' ? parseFeedDate(raw) : undefined
  return value === undefined ? { ok: false } : { ok: true, value }
}

/** The facts of an indicator (dates, label), or the member that made them unreadable. */
function indicatorFacts (object: JsonRecord): EntryFacts | string {
  const modified = timestamp(object, 'modified')
  const created = timestamp(object, 'created')
  const validFrom = timestamp(object, 'valid_from')
  const validUntil = timestamp(object, 'valid_until')
  if (!modified.ok) return 'invalid modified timestamp'
  if (!created.ok) return 'invalid created timestamp'
  if (!validFrom.ok) return 'invalid valid_from timestamp'
  if (!validUntil.ok) return 'invalid valid_until timestamp'
  let lastSeen = modified.value ?? created.value
  if (lastSeen !== undefined && validUntil.value !== undefined) lastSeen = Math.min(lastSeen, validUntil.value)
  const types = object.indicator_types
  const label = cleanLabel(object.name) ?? (Array.isArray(types) ? cleanLabel(types[0]) : undefined)
  return { firstSeen: validFrom.value, lastSeen, label }
}

/** Reads one bundle object. */
function readObject (object: unknown, item: number, out: FeedResultBuilder): void {
  if (!isRecord(object)) return out.reject(item, 'object is not a JSON object')
  if (object.type !== 'indicator' || object.revoked === true) return
  if (object.pattern_type !== undefined && object.pattern_type !== 'stix') return
  if (typeof object.pattern !== 'string') return out.reject(item, 'indicator has no "pattern" string')
  const parsed = parseStixPattern(object.pattern)
  if (!parsed.ok) return out.reject(item, parsed.reason)
  const facts = indicatorFacts(object)
  if (typeof facts === 'string') return out.reject(item, facts)
  let added = 0
  for (const comparison of parsed.comparisons) {
    const entry = entryOf(comparison)
    if (entry === null) continue
    out.add(entry.type, entry.value, item, facts)
    added++
  }
  if (added === 0) out.reject(item, 'unsupported pattern: no supported observable')
}

/** Parses a STIX 2.1 bundle into entries, numbering the bundle's objects as items. */
export function parseStix2 (text: string, sink?: EntrySink): FeedParseResult {
  const doc = parseJsonDocument(text)
  if (!doc.ok) return wholeFileRejected(doc.reason)
  const value = doc.value
  const objects = Array.isArray(value)
    ? value
    : isRecord(value) && value.type === 'bundle' && Array.isArray(value.objects) ? value.objects : null
  if (objects === null) return wholeFileRejected('not a STIX bundle: expected {"type": "bundle", "objects": [...]}')
  const out = new FeedResultBuilder(sink)
  out.lines = objects.length
  for (let i = 0; i < objects.length; i++) readObject(objects[i], i + 1, out)
  return out.result()
}
