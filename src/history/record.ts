/**
 * The history record's JSON layout (docs/API.md "Auth, quotas, history"): the one module that spells out which
 * members a record has, which half each belongs to, and how the halves are written and joined again.
 *
 * Glossary
 *   record     the JSON object a search returns: the envelope's members, then the item's (recordJson)
 *   envelope   the request half: every member shared by the records of one request (date, request_id, tenant, ...);
 *              JSON object text. HistoryEnvelope (types.ts) is the record without kItemKeys, plus a count
 *   item       the indicator half: kItemKeys' members in that order, as JSON members text without braces; also
 *              called the fragment. item = `"indicator":<indicator>,<tail>` (recordFragment)
 *   indicator  `{"type":..,"value":..,"normalized":..}` (indicatorJson), the value exactly as sent
 *   tail       verdict members, then log-only members (itemTail): `"risk":..,"scores":..,"labels":[..],
 *              "label_count":N,"action_taken":..,"action_source":..`; many items of a bulk share one tail
 *   labels     the signals at the request's signal detail level, without evidence (labelsOf)
 * Parts (block.ts) carry items of one request in bytes; the stores keep envelope and item as two texts and join them
 * with recordJson. splitRecord is the same split for a whole record object (records written directly).
 */
import { kTopSignals, type Assessment } from '../engine/index.ts'
import type { SignalDetails } from '../engine/types.ts'

/**
 * Longest string a record holds or a search answers, in characters. The edge refuses longer request-level strings
 * (docs/API.md "Limits"); a bulk item's type or value sent longer (an invalid item, answered as sent) is recorded cut
 * to this length followed by "…" (recordedString), and so are strings of records written before the limits existed
 * when a search reads them, so that no record can make an answer unbounded.
 */
export const MAX_RECORD_STRING = 8192

/** A string as a record keeps it: over MAX_RECORD_STRING characters, cut to that length and followed by "…". */
export function recordedString (s: string): string {
  return s.length > MAX_RECORD_STRING ? `${s.slice(0, MAX_RECORD_STRING)}\u2026` : s
}

/** The members of a record's item half, in the order an item writes them. */
export const kItemKeys = ['indicator', 'risk', 'scores', 'labels', 'label_count', 'action_taken', 'action_source'] as const
/** A member of the item half. */
export type ItemKey = typeof kItemKeys[number]
const kItemKeySet: ReadonlySet<string> = new Set(kItemKeys)

/** The indicator object of a record as JSON.stringify writes it, keys in this order. */
export function indicatorJson (type: string | null, value: string | null, normalized: string | null): string {
  return JSON.stringify({ type, value, normalized })
}

/** A record's item half: the indicator, then the tail. The one place that joins them (encoder and part reader). */
export function recordFragment (indicator: string, tail: string): string {
  return `"indicator":${indicator},${tail}`
}

/** The labels a record keeps of an assessment: its signals at the detail level, each without evidence. */
export function labelsOf (a: Assessment | null, signalDetails: SignalDetails): Array<Record<string, unknown>> {
  if (a === null || signalDetails === 'none') return []
  const picked = signalDetails === 'top' ? a.signals.slice(0, kTopSignals) : a.signals
  return picked.map((s) => ({ signal_id: s.signal_id, direction: s.direction, signal_group: s.signal_group, signal_subgroup: s.signal_subgroup, signal_name: s.signal_name, contribution: s.contribution }))
}

/** The verdict members of a tail, from the JSON texts of risk and scores and the labels. */
export function verdictMembers (riskJson: string, scoresJson: string, labels: ReadonlyArray<Record<string, unknown>>): string {
  return `"risk":${riskJson},"scores":${scoresJson},"labels":${labels.length === 0 ? '[]' : JSON.stringify(labels)},"label_count":${labels.length}`
}

/** Verdict members of a record for an invalid indicator. */
export const kInvalidVerdictMembers = verdictMembers('null', 'null', [])

/** The tail: verdict members, then the log-only members (items of a bulk share a few tails). */
export function itemTail (verdict: string, actionTaken: string | null, actionSource: string | null): string {
  return `${verdict},"action_taken":${jsonOrNull(actionTaken)},"action_source":${jsonOrNull(actionSource)}`
}

/** JSON text of a string or null (most items of a bulk carry no log-only fields). */
function jsonOrNull (s: string | null): string {
  return s === null ? 'null' : JSON.stringify(s)
}

/**
 * The top-level member names of a JSON object's text, as their JSON text joined by commas; null when the text is not
 * an object. Linear in the text, without a parse: the SQLite writer compares envelopes' names per single call
 * (ownEnvelopeMembers).
 */
export function memberNames (objectText: string): string | null {
  if (objectText.charCodeAt(0) !== 0x7b) return null
  let names = ''
  let depth = 0
  let expectName = true
  for (let i = 1; i < objectText.length; i++) {
    const c = objectText.charCodeAt(i)
    if (c === 0x22) { // a string: a name where one is expected at the top level, else skipped
      let j = i + 1
      while (j < objectText.length && objectText.charCodeAt(j) !== 0x22) j += objectText.charCodeAt(j) === 0x5c ? 2 : 1
      if (depth === 0 && expectName) {
        names += names === '' ? objectText.slice(i, j + 1) : `,${objectText.slice(i, j + 1)}`
        expectName = false
      }
      i = j
    } else if (c === 0x7b || c === 0x5b) {
      depth++
    } else if (c === 0x7d || c === 0x5d) {
      if (depth === 0) return names
      depth--
    } else if (c === 0x2c && depth === 0) {
      expectName = true
    }
  }
  return null
}

/**
 * What a record filed under another request's row appends to its item (SQLite keeps runs of single calls of one key
 * and millisecond under one request row): its own envelope's members. Joined to the shared envelope by recordJson,
 * each member the record repeats takes the record's own value (a JSON object's later member wins, as JSON.parse and
 * an object spread both read it) in the shared envelope's member order; so every version's reader, which joins or
 * spreads the two halves, answers the record as it was sent. Both envelopes must have the same member names
 * (memberNames), so that no member of the shared one is left standing.
 */
export function ownEnvelopeMembers (envelope: string): string {
  return envelope.slice(1, -1)
}

/** The record's JSON text from its two halves. */
export function recordJson (envelope: string, item: string): string {
  return `${envelope.slice(0, -1)},${item}}`
}

/**
 * The two halves of a record object: envelope (JSON object text) and item (JSON members text, no braces), members in
 * the record's own order; `date` replaces the record's date. Throws when a half is not a JSON object (a toJSON() may
 * turn a member into nothing).
 */
export function splitRecord (r: object, date: string): { envelope: string, item: string } {
  const head: Record<string, unknown> = {}
  const tail: Record<string, unknown> = {}
  for (const key of Object.keys(r)) {
    const value = key === 'date' ? date : (r as Record<string, unknown>)[key]
    if (kItemKeySet.has(key)) tail[key] = value
    else head[key] = value
  }
  const envelope = JSON.stringify(head)
  const item = JSON.stringify(tail)
  if (typeof envelope !== 'string' || typeof item !== 'string' || item.length < 3 || !envelope.endsWith('}')) {
    throw new Error('record halves are not JSON objects')
  }
  return { envelope, item: item.slice(1, -1) }
}
