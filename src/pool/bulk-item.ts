/**
 * The bulk answer's wire format (API.md "Bulk verdicts"), in JSON and in MessagePack: the one module that spells out
 * its layout. The scoring threads write items with these pieces, the verdict cache stores a tail cut at these pieces,
 * the merge writes the answer's head; readBulkItems and readBulkAnswer read it all back (tests, tools).
 *
 * Glossary
 *   answer     `{"meta":<meta>,"results":[<item>,<item>,...]}`; in MessagePack a 2-entry map, meta then results, whose
 *              results array is the items' own bytes back to back (answerHead + items)
 *   item       `{"indicator":<indicator>,<tail>[,"warnings":[...]][,"errors":[...]]}`: itemHead, tail, itemEnd
 *   indicator  the indicator as echoed: `{"type":..,"value":..,"normalized":..}`; for an invalid item the type and
 *              value as sent, `{"type":..,"value":..}` (null where missing)
 *   tail       the verdict members after the indicator, in this order: risk, signals, signal_count, scores,
 *              threat_context, recommended_actions (verdictTail)
 *   none tail  the tail at signal_details none: `"risk":R` kTailSignalsNone `S` then the rest (noneTail); the verdict
 *              cache keeps it as one run of bytes with R and S at known offsets
 *   rest       `,"threat_context":..,"recommended_actions":..` (tailRest)
 * An item's JSON text equals JSON.stringify of its object form (itemObject / invalidItemObject), member for member,
 * which is also what its MessagePack holds (test/pool/bulk-item.test.ts holds every writer to that).
 */
import { Packr } from 'msgpackr'
import { INDICATOR_TYPES, type IndicatorType, type Verdict } from '../engine/types.ts'
import { ByteSink, utf8Into } from '../bytes/byte-sink.ts'

/** msgpack for clients: standard maps, no record extension (API.md). */
export const clientPackr = new Packr({ useRecords: false, variableMapSize: true })

/**
 * `value` with every string well formed (a lone surrogate as U+FFFD), for packing what holds a client's strings: JSON
 * text may carry a lone surrogate (\ud800), UTF-8 cannot, and msgpackr would write its three bytes as they are. The
 * same value when nothing needs it (no copy); bodies are at most 64 levels deep (http/body-guard.ts).
 */
export function wellFormed (value: unknown): unknown {
  if (typeof value === 'string') return value.isWellFormed() ? value : value.toWellFormed()
  if (value === null || typeof value !== 'object') return value
  if (Array.isArray(value)) {
    let out: unknown[] | null = null
    for (let i = 0; i < value.length; i++) {
      const v = wellFormed(value[i])
      if (v !== value[i]) (out ??= [...value])[i] = v
    }
    return out ?? value
  }
  let out: Record<string, unknown> | null = null
  for (const k in value) {
    const v = (value as Record<string, unknown>)[k]
    const w = wellFormed(v)
    const key = wellFormed(k) as string
    if (w !== v || key !== k) {
      out ??= { ...(value as Record<string, unknown>) }
      if (key !== k) delete out[k]
      out[key] = w
    }
  }
  return out ?? value
}

/** `{"indicator":<indicator>,`: the start of an item, before its tail. */
export function itemHead (indicatorJson: string): string {
  return `{"indicator":${indicatorJson},`
}

/** `{"indicator":{"type":"<type>","value":` per indicator type, as bytes. */
const kIndicatorStart = Object.fromEntries(INDICATOR_TYPES.map((t) => [t, Buffer.from(`{"indicator":{"type":"${t}","value":`)])) as Record<IndicatorType, Buffer>
const kNormalizedMember = Buffer.from(',"normalized":')
const kIndicatorEnd = Buffer.from('},')

/** The JSON length from which a value's bytes are copied for its normalized form (writeItemHead). */
const kCopyFrom = 48

/**
 * Writes itemHead of a valid indicator whose value was sent as a string: the same bytes as
 * `itemHead(JSON.stringify({type, value, normalized}))`, from constant pieces and the two strings' JSON. A value sent
 * as it normalizes, as long as a hash, has its JSON copied instead of written again (a shorter one's costs less to
 * write than to copy).
 */
export function writeItemHead (sink: ByteSink, type: IndicatorType, value: string, normalized: string): void {
  sink.bytes(kIndicatorStart[type])
  const start = sink.len
  sink.jsonString(value)
  const end = sink.len
  sink.bytes(kNormalizedMember)
  if (end - start >= kCopyFrom && normalized === value) {
    sink.reserve(end - start)
    sink.buf.copyWithin(sink.len, start, end)
    sink.len += end - start
  } else {
    sink.jsonString(normalized)
  }
  sink.bytes(kIndicatorEnd)
}

/**
 * MessagePack: an item is a map whose pairs are, in order, the same members as its JSON. msgpackr packs a map's pairs
 * the same wherever the map stands, so an item is its map header, then each pair's bytes back to back, and the pairs
 * after `indicator` at signal_details none (the packed none tail) can be kept and copied like the JSON none tail.
 */
const kPackedIndicatorStart = Object.fromEntries(INDICATOR_TYPES.map((t) => [t, Buffer.concat([
  packed('indicator'), Buffer.from([0x83]), packed('type'), packed(t), packed('value')
])])) as Record<IndicatorType, Buffer>
const kPackedNormalized = packed('normalized')

function packed (value: unknown): Buffer {
  return Buffer.from(clientPackr.pack(value))
}

/**
 * Strings from this length on are written by Buffer's native UTF-8 writer (one call, about 0.1 us) rather than a
 * character at a time (about 2 ns a character, measured): a SHA-256 hash or an AS name costs half as much.
 */
const kNativeStringLength = 24

/**
 * Writes a string as msgpackr packs it (any Packr: a string's bytes do not depend on the options): ASCII directly, a
 * str header by its length and its bytes, anything else through `packr` (msgpackr writes a lone surrogate its own way:
 * what a client sent is made well formed first, writePackedItemHead and wellFormed).
 */
export function writePackedString (sink: ByteSink, s: string, packr: Packr = clientPackr): void {
  const n = s.length
  const head = n < 32 ? 1 : n < 0x100 ? 2 : n < 0x10000 ? 3 : 5
  const p = sink.len
  if (n >= kNativeStringLength) {
    // A string is ASCII exactly when its UTF-8 takes one byte per UTF-16 unit.
    sink.reserve(head + 3 * n)
    if (utf8Into(sink.buf, s, p + head) !== n) {
      sink.bytes(packr.pack(s))
      return
    }
  } else {
    sink.reserve(head + n)
    const buf = sink.buf
    for (let i = 0; i < n; i++) {
      const c = s.charCodeAt(i)
      if (c >= 0x80) {
        sink.bytes(packr.pack(s))
        return
      }
      buf[p + head + i] = c
    }
  }
  const buf = sink.buf
  if (head === 1) {
    buf[p] = 0xa0 | n
  } else if (head === 2) {
    buf[p] = 0xd9
    buf[p + 1] = n
  } else if (head === 3) {
    buf[p] = 0xda
    buf.writeUInt16BE(n, p + 1)
  } else {
    buf[p] = 0xdb
    buf.writeUInt32BE(n, p + 1)
  }
  sink.len = p + head + n
}

/**
 * Writes the start of a valid item in MessagePack whose value was sent as a string, up to its tail: the map header
 * (`warnings`: whether the item ends with warnings, an eighth pair) and the `indicator` pair, as clientPackr packs them.
 */
export function writePackedItemHead (sink: ByteSink, type: IndicatorType, value: string, normalized: string, warnings: boolean): void {
  sink.byte(warnings ? 0x88 : 0x87)
  sink.bytes(kPackedIndicatorStart[type])
  // The value as sent may hold a lone surrogate where the indicator was found in a URL's path or query (wellFormed).
  writePackedString(sink, value.isWellFormed() ? value : value.toWellFormed())
  sink.bytes(kPackedNormalized)
  writePackedString(sink, normalized)
}

const kPackedRisk = packed('risk')
/** The signals and signal_count pairs of a none tail, then the scores key. */
const kPackedNoSignalsScores = Buffer.concat([packed('signals'), packed([]), packed('signal_count'), packed(0), packed('scores')])
const kPackedThreatContext = packed('threat_context')
const kPackedActions = packed('recommended_actions')

/**
 * Writes the packed none tail (packedNoneTail's bytes) into `sink`. The members are plain data (objects, arrays,
 * strings, numbers, booleans, null), which are packed here directly, as clientPackr packs them (map and array headers
 * by count, integers in their smallest form, other numbers as float64), at a fraction of msgpackr's per-call cost;
 * anything else (undefined, another class) makes it fall back to packedNoneTail.
 */
export function writePackedNoneTail (sink: ByteSink, risk: unknown, scores: unknown, threatContext: unknown, actions: unknown): void {
  const start = sink.len
  sink.bytes(kPackedRisk)
  if (packShared(sink, risk)) {
    sink.bytes(kPackedNoSignalsScores)
    if (packShared(sink, scores)) {
      sink.bytes(kPackedThreatContext)
      if (packPlain(sink, threatContext)) {
        sink.bytes(kPackedActions)
        if (packShared(sink, actions)) return
      }
    }
  }
  sink.len = start
  sink.bytes(packedNoneTail(risk, scores, threatContext, actions))
}

/**
 * Packed bytes of frozen values, by identity: what unlisted verdicts share (risk, scores, actions) the engine freezes
 * deeply, so their bytes never change (as chunk-scratch.ts keeps their JSON text).
 */
const kSharedPacked = new WeakMap<object, Uint8Array>()
const kScratch = new ByteSink(1024)

/** packPlain, from the memo when `v` is a frozen object. */
function packShared (sink: ByteSink, v: unknown): boolean {
  if (v === null || typeof v !== 'object' || !Object.isFrozen(v)) return packPlain(sink, v)
  let bytes = kSharedPacked.get(v)
  if (bytes === undefined) {
    kScratch.clear()
    if (!packPlain(kScratch, v)) return false
    bytes = new Uint8Array(kScratch.len)
    bytes.set(kScratch.buf.subarray(0, kScratch.len))
    kSharedPacked.set(v, bytes)
  }
  sink.bytes(bytes)
  return true
}

/** Writes a collection header: fix form below 16, then 16 or 32 bits (`fix`, `c16`, `c32` are the type bytes). */
export function packHeader (sink: ByteSink, n: number, fix: number, c16: number, c32: number): void {
  if (n < 16) {
    sink.byte(fix | n)
  } else if (n < 0x10000) {
    sink.reserve(3)
    sink.buf[sink.len] = c16
    sink.buf.writeUInt16BE(n, sink.len + 1)
    sink.len += 3
  } else {
    sink.reserve(5)
    sink.buf[sink.len] = c32
    sink.buf.writeUInt32BE(n, sink.len + 1)
    sink.len += 5
  }
}

/** Packs a number as clientPackr does (useRecords false: positive integers below 128 are fixints). */
export function packNumber (sink: ByteSink, v: number): void {
  sink.reserve(9)
  const b = sink.buf
  const p = sink.len
  if (v >>> 0 === v) {
    if (v < 0x80) {
      b[p] = v
      sink.len = p + 1
    } else if (v < 0x100) {
      b[p] = 0xcc
      b[p + 1] = v
      sink.len = p + 2
    } else if (v < 0x10000) {
      b[p] = 0xcd
      b.writeUInt16BE(v, p + 1)
      sink.len = p + 3
    } else {
      b[p] = 0xce
      b.writeUInt32BE(v, p + 1)
      sink.len = p + 5
    }
  } else if (v >> 0 === v) {
    if (v >= -0x20) {
      b[p] = 0x100 + v
      sink.len = p + 1
    } else if (v >= -0x80) {
      b[p] = 0xd0
      b[p + 1] = v + 0x100
      sink.len = p + 2
    } else if (v >= -0x8000) {
      b[p] = 0xd1
      b.writeInt16BE(v, p + 1)
      sink.len = p + 3
    } else {
      b[p] = 0xd2
      b.writeInt32BE(v, p + 1)
      sink.len = p + 5
    }
  } else {
    b[p] = 0xcb
    b.writeDoubleBE(v, p + 1)
    sink.len = p + 9
  }
}

/**
 * Packed bytes of map keys: the verdict's objects use a few dozen keys, whose bytes are then one typed-array copy
 * instead of a string write each (half of a threat_context's packing time, measured). Bounded: past kMaxKeys keys,
 * a key not yet kept is packed each time.
 */
const kKeyBytes = new Map<string, Uint8Array>()
const kMaxKeys = 1024

function writePackedKey (sink: ByteSink, key: string): void {
  let bytes = kKeyBytes.get(key)
  if (bytes === undefined) {
    bytes = clientPackr.pack(key)
    if (kKeyBytes.size < kMaxKeys) kKeyBytes.set(key, bytes)
  }
  sink.bytes(bytes)
}

/** Packs plain data as clientPackr does; false (with bytes written) at anything else. */
function packPlain (sink: ByteSink, v: unknown): boolean {
  if (v === null) {
    sink.byte(0xc0)
    return true
  }
  switch (typeof v) {
    case 'string':
      writePackedString(sink, v)
      return true
    case 'number':
      packNumber(sink, v)
      return true
    case 'boolean':
      sink.byte(v ? 0xc3 : 0xc2)
      return true
    case 'object': {
      if (Array.isArray(v)) {
        if (v.constructor !== Array) return false
        packHeader(sink, v.length, 0x90, 0xdc, 0xdd)
        for (let i = 0; i < v.length; i++) if (!packPlain(sink, v[i])) return false
        return true
      }
      if ((v as object).constructor !== Object) return false
      const keys = Object.keys(v)
      packHeader(sink, keys.length, 0x80, 0xde, 0xdf)
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i] as string
        writePackedKey(sink, key)
        if (!packPlain(sink, (v as Record<string, unknown>)[key])) return false
      }
      return true
    }
    default:
      return false
  }
}

/**
 * The packed none tail: the pairs risk, signals ([]), signal_count (0), scores, threat_context and
 * recommended_actions, as clientPackr packs them inside an item. A copy, owned by the caller.
 */
export function packedNoneTail (risk: unknown, scores: unknown, threatContext: unknown, actions: unknown): Uint8Array {
  // A six-pair map's header is one byte (0x86): the pairs follow it.
  const map = clientPackr.pack({ risk, signals: [], signal_count: 0, scores, threat_context: threatContext, recommended_actions: actions })
  const out = new Uint8Array(map.length - 1)
  out.set(map.subarray(1))
  return out
}

/** The `warnings` pair that ends a packed item with warnings. */
export function packedWarnings (warnings: readonly string[]): Uint8Array {
  return clientPackr.pack({ warnings }).subarray(1)
}

/** What closes an item after its tail: its warnings when there are any, then `}`. */
export function itemEnd (warnings: readonly string[]): string {
  return warnings.length > 0 ? `,"warnings":${JSON.stringify(warnings)}}` : '}'
}

/** The closing `}` of an item without warnings, as a byte. */
export const kItemEndByte = 0x7d

const kTailContext = ',"threat_context":'
const kTailActions = ',"recommended_actions":'

/** The members of a tail after scores: threat_context and recommended_actions, as JSON texts. */
export function tailRest (threatContextJson: string, actionsJson: string): string {
  return kTailContext + threatContextJson + kTailActions + actionsJson
}

/** The tail at any signal detail level, from the JSON texts of its members. */
export function verdictTail (riskJson: string, signalsJson: string, signalCount: number, scoresJson: string, rest: string): string {
  return `"risk":${riskJson},"signals":${signalsJson},"signal_count":${signalCount},"scores":${scoresJson}${rest}`
}

/** What a none tail starts with, before the risk's JSON. */
export const kTailRisk = '"risk":'
/** What stands between risk and scores in a none tail. */
export const kTailSignalsNone = ',"signals":[],"signal_count":0,"scores":'

/** The tail at signal_details none (the bulk default): verdictTail with no signals. */
export function noneTail (riskJson: string, scoresJson: string, rest: string): string {
  return kTailRisk + riskJson + kTailSignalsNone + scoresJson + rest
}

/** The bytes of a none tail around its threat_context, and where its risk and scores end in them (JSON). */
export interface TailAround {
  /** From the tail's start to the threat_context value (exclusive). */
  head: Uint8Array
  /** After the threat_context value to the tail's end. */
  end: Uint8Array
  /** End offsets of the risk's and the scores' JSON in `head` (JSON only; 0 in MessagePack). */
  riskEnd: number
  scoresEnd: number
}

/**
 * The none tail of verdicts that share their risk, scores and actions (an unlisted indicator's, per profile and
 * type) cut around threat_context, in JSON from the members' texts: head + the context's JSON + end is noneTail().
 */
export function jsonTailAround (riskJson: string, scoresJson: string, actionsJson: string): TailAround {
  const head = Buffer.from(kTailRisk + riskJson + kTailSignalsNone + scoresJson + kTailContext)
  const riskEnd = Buffer.byteLength(kTailRisk + riskJson)
  return { head, end: Buffer.from(kTailActions + actionsJson), riskEnd, scoresEnd: riskEnd + Buffer.byteLength(kTailSignalsNone + scoresJson) }
}

/** jsonTailAround in MessagePack, from the members (plain data): head + the packed context + end is packedNoneTail(). */
export function packedTailAround (risk: unknown, scores: unknown, actions: unknown): TailAround {
  const sink = new ByteSink(1024)
  sink.bytes(kPackedRisk)
  sink.bytes(clientPackr.pack(risk))
  sink.bytes(kPackedNoSignalsScores)
  sink.bytes(clientPackr.pack(scores))
  sink.bytes(kPackedThreatContext)
  const head = sink.take()
  sink.clear()
  sink.bytes(kPackedActions)
  sink.bytes(clientPackr.pack(actions))
  return { head, end: sink.take(), riskEnd: 0, scoresEnd: 0 }
}

/** The tail of an invalid item: no verdict. */
const kInvalidTail = verdictTail('null', '[]', 0, '{"signal_groups":{},"signal_subgroups":{}}', tailRest('{}', '[]'))

/** An invalid item's indicator: type and value as sent, null where missing. */
export function invalidIndicator (type: unknown, value: unknown): { type: unknown, value: unknown } {
  return { type: type === undefined ? null : type, value: value === undefined ? null : value }
}

/** The JSON text of an item whose indicator is not valid: no verdict, its warnings and errors. */
export function invalidItemJson (indicator: { type: unknown, value: unknown }, warnings: readonly string[], errors: readonly string[]): string {
  return itemHead(JSON.stringify(indicator)) + kInvalidTail +
    (warnings.length > 0 ? `,"warnings":${JSON.stringify(warnings)}` : '') + `,"errors":${JSON.stringify(errors)}}`
}

/** The object form of an invalid item (what its JSON text says; what MessagePack packs). */
export function invalidItemObject (indicator: { type: unknown, value: unknown }, warnings: readonly string[], errors: readonly string[]): Record<string, unknown> {
  const item: Record<string, unknown> = {
    indicator, risk: null, signals: [], signal_count: 0, scores: { signal_groups: {}, signal_subgroups: {} }, threat_context: {}, recommended_actions: []
  }
  if (warnings.length > 0) item.warnings = warnings
  item.errors = errors
  return item
}

/** The object form of a valid item from a rendered verdict: the single verdict's members but flags, in item order. */
export function itemObject (v: Verdict, warnings: readonly string[]): Record<string, unknown> {
  const item: Record<string, unknown> = {
    indicator: v.indicator, risk: v.risk, signals: v.signals, signal_count: v.signal_count, scores: v.scores, threat_context: v.threat_context, recommended_actions: v.recommended_actions
  }
  if (warnings.length > 0) item.warnings = warnings
  return item
}

/** The bytes of an answer before its items: `{"meta":<meta>,"results":[`, or the MessagePack map and array headers. */
export function answerHead (format: 'json' | 'msgpack', meta: object, items: number): Buffer {
  if (format === 'json') return Buffer.from(`{"meta":${JSON.stringify(meta)},"results":[`)
  return Buffer.concat([
    Buffer.from([0x82]), // fixmap of 2
    Buffer.from(clientPackr.pack('meta')),
    Buffer.from(clientPackr.pack(meta)),
    Buffer.from(clientPackr.pack('results')),
    arrayHeader(items)
  ])
}

/** Bytes between two JSON items (MessagePack items follow each other with nothing between). */
export const kJsonItemSeparator = 0x2c // ,
/** The bytes after the last JSON item: `]}`. */
export const kJsonAnswerEnd = Buffer.from(']}')

/** MessagePack array header for n elements. @see https://github.com/msgpack/msgpack/blob/master/spec.md#array-format-family */
function arrayHeader (n: number): Buffer {
  if (n < 16) return Buffer.from([0x90 | n])
  if (n < 0x10000) return Buffer.from([0xdc, n >> 8, n & 0xff])
  const b = Buffer.alloc(5)
  b[0] = 0xdd
  b.writeUInt32BE(n, 1)
  return b
}

/** The items of one chunk's output (bytes back to back, `ends[i]` the end of item i), decoded. */
export function readBulkItems (format: 'json' | 'msgpack', body: Uint8Array, ends: Uint32Array): unknown[] {
  const buf = Buffer.from(body.buffer, body.byteOffset, body.byteLength)
  const out: unknown[] = []
  let start = 0
  for (const end of ends) {
    const bytes = buf.subarray(start, end)
    out.push(format === 'json' ? JSON.parse(bytes.toString('utf8')) : clientPackr.unpack(bytes))
    start = end
  }
  return out
}

/** A whole answer, decoded. */
export function readBulkAnswer (format: 'json' | 'msgpack', bytes: Uint8Array): { meta: Record<string, unknown>, results: unknown[] } {
  return format === 'json' ? JSON.parse(Buffer.from(bytes).toString('utf8')) : clientPackr.unpack(bytes)
}
