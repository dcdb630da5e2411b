/**
 * MISP feed events (JSON): `{"Event": {...}}` as a MISP feed publishes each event, or an array of such events (or of
 * bare event objects). Items are attributes, numbered in document order: each event's `Attribute` list, then the
 * `Attribute` lists of its `Object`s.
 *
 * Attribute types read: ip-src, ip-dst (address or CIDR), ip-src|port, ip-dst|port, domain, hostname, domain|ip (both
 * halves), sha256, filename|sha256, AS. Other types are counted and skipped, as are attributes marked `deleted` or
 * `to_ids: false` (MISP's flag for context that must not be used for detection, such as a victim's address).
 * lastSeen = `last_seen`, else the attribute `timestamp` (Unix seconds); firstSeen = `first_seen`.
 * label = the first `misp-galaxy:...="Name"` tag (attribute, then event), else the first plain tag without a namespace,
 * else the event's `info`.
 * @see https://www.misp-project.org/datamodels/
 * @see https://www.misp-standard.org/rfc/misp-standard-core.html
 */
import type { FeedParseResult } from '../../engine/types.ts'
import { parseEpochSeconds, parseFeedDate } from './feed-dates.ts'
import { cleanLabel } from './feed-label.ts'
import { FeedResultBuilder, wholeFileRejected, type EntrySink } from './feed-result.ts'
import { classifyIp, isIpAddress } from './ip-literal.ts'
import { arrayMember, isRecord, parseJsonDocument, type JsonRecord } from './json-value.ts'

const kGalaxyPrefix = 'misp-galaxy:'

/** The name in a tag list: a galaxy cluster's value, else a plain one-word-ish tag; undefined when neither. */
function tagLabel (tags: unknown): string | undefined {
  if (!Array.isArray(tags)) return undefined
  let plain: string | undefined
  for (const tag of tags) {
    const name = isRecord(tag) ? tag.name : undefined
    if (typeof name !== 'string') continue
    if (name.startsWith(kGalaxyPrefix)) {
      // misp-galaxy:malpedia="Emotet" -> Emotet
      const open = name.indexOf('="')
      if (open > 0 && name.endsWith('"')) {
        const label = cleanLabel(name.slice(open + 2, -1))
        if (label !== undefined) return label
      }
    } else if (plain === undefined && !name.includes(':') && !name.includes('=')) {
      plain = cleanLabel(name)
    }
  }
  return plain
}

/** The two halves of a `left|right` composite value, or null when there is no `|`. */
function splitComposite (value: string): [string, string] | null {
  const bar = value.lastIndexOf('|')
  return bar < 0 ? null : [value.slice(0, bar).trim(), value.slice(bar + 1).trim()]
}

/** Parses one attribute into entries, a rejection, or nothing (skipped type). */
function readAttribute (attr: unknown, item: number, eventLabel: string | undefined, out: FeedResultBuilder): void {
  if (!isRecord(attr)) return out.reject(item, 'attribute is not an object')
  if (attr.deleted === true || attr.to_ids === false) return
  const type = attr.type
  if (typeof type !== 'string') return out.reject(item, 'attribute has no "type" string')
  if (typeof attr.value !== 'string' || attr.value.trim() === '') return out.reject(item, 'attribute has no "value" string')
  const value = attr.value.trim()
  let lastSeen: number | undefined
  if (attr.last_seen !== undefined && attr.last_seen !== null) {
    lastSeen = typeof attr.last_seen === 'string' ? parseFeedDate(attr.last_seen) : undefined
    if (lastSeen === undefined) return out.reject(item, 'invalid last_seen')
  } else if (attr.timestamp !== undefined) {
    lastSeen = parseEpochSeconds(attr.timestamp)
    if (lastSeen === undefined) return out.reject(item, 'invalid timestamp')
  }
  let firstSeen: number | undefined
  if (attr.first_seen !== undefined && attr.first_seen !== null) {
    firstSeen = typeof attr.first_seen === 'string' ? parseFeedDate(attr.first_seen) : undefined
    if (firstSeen === undefined) return out.reject(item, 'invalid first_seen')
  }
  const facts = { firstSeen, lastSeen, label: tagLabel(attr.Tag) ?? eventLabel }
  switch (type) {
    case 'ip-src':
    case 'ip-dst': {
      const ipType = classifyIp(value)
      if (ipType === null) return out.reject(item, `${type} value is not an IP address or CIDR block`)
      return out.add(ipType, value, item, facts)
    }
    case 'ip-src|port':
    case 'ip-dst|port': {
      const parts = splitComposite(value)
      if (parts === null || !isIpAddress(parts[0])) return out.reject(item, `${type} value is not ip|port`)
      return out.add('ip', parts[0], item, facts)
    }
    case 'domain':
    case 'hostname':
      return out.add('domain', value, item, facts)
    case 'domain|ip': {
      const parts = splitComposite(value)
      if (parts === null || parts[0] === '' || !isIpAddress(parts[1])) return out.reject(item, 'domain|ip value is not domain|ip')
      out.add('domain', parts[0], item, facts)
      return out.add('ip', parts[1], item, facts)
    }
    case 'sha256':
      return out.add('file_hash_sha256', value, item, facts)
    case 'filename|sha256': {
      const parts = splitComposite(value)
      if (parts === null || parts[1] === '') return out.reject(item, 'filename|sha256 value has no hash')
      return out.add('file_hash_sha256', parts[1], item, facts)
    }
    case 'AS':
      return out.add('asn', value, item, facts)
    default:
      // MISP has ~200 attribute types (url, email-src, md5, ...); the ones the contract cannot index are context.
  }
}

/** The event object of one array element or document: `{"Event": {...}}` or a bare event; null otherwise. */
function eventOf (value: unknown): JsonRecord | null {
  if (!isRecord(value)) return null
  if (isRecord(value.Event)) return value.Event
  return 'Attribute' in value || 'Object' in value ? value : null
}

/** Parses a MISP event (or array of events) into entries, numbering attributes as items. */
export function parseMispJson (text: string, sink?: EntrySink): FeedParseResult {
  const doc = parseJsonDocument(text)
  if (!doc.ok) return wholeFileRejected(doc.reason)
  const events = Array.isArray(doc.value) ? doc.value : [doc.value]
  if (!Array.isArray(doc.value) && eventOf(doc.value) === null) {
    return wholeFileRejected('not a MISP event: expected {"Event": {...}} or an array of events')
  }
  const out = new FeedResultBuilder(sink)
  let item = 0
  for (const element of events) {
    const event = eventOf(element)
    if (event === null) {
      out.reject(++item, 'array element is not a MISP event')
      continue
    }
    const eventLabel = tagLabel(event.Tag) ?? cleanLabel(event.info)
    const attributes = arrayMember(event, 'Attribute')
    if (attributes === null) out.reject(++item, 'event "Attribute" is not an array')
    else for (const attr of attributes) readAttribute(attr, ++item, eventLabel, out)
    const objects = arrayMember(event, 'Object')
    if (objects === null) {
      out.reject(++item, 'event "Object" is not an array')
      continue
    }
    for (const object of objects) {
      const objectAttributes = isRecord(object) ? arrayMember(object, 'Attribute') : null
      if (objectAttributes === null) out.reject(++item, 'object has no "Attribute" array')
      else for (const attr of objectAttributes) readAttribute(attr, ++item, eventLabel, out)
    }
  }
  out.lines = item
  return out.result()
}
