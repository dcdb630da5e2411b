/**
 * Item writers: one per kind of bulk chunk, behind one interface (ItemWriter), so that the chunk loop
 * (score-chunk.ts) only normalizes, counts and records history, and each writer holds one way of writing an item.
 *
 *   JsonNoneWriter    JSON at signal_details none (the bulk default): the none tail copied from the verdict cache,
 *                     or, for an indicator no list names, written straight into the answer from the profile's shared
 *                     tail around threat_context (chunk-scratch.ts unlistedTail) and the engine's context facts, then
 *                     copied into the cache; anything else assessed in full and written from its texts
 *   PackedNoneWriter  the same in MessagePack (values sent as strings; others take the DetailWriter)
 *   DetailWriter      any format at signal_details top or all, and any item a tenant allowlist covers: the
 *                     assessment (cached whole or made now), rendered
 *
 * Every writer answers the same bytes as rendering the full assessment would (test/pool/answer-writers.test.ts).
 */
import { allowlistedAssessment, contextKey, render, writeContext, type AllowRule, type Assessment, type ScoringProfile } from '../engine/index.ts'
import type { IndicatorType, NormalizedIndicator, SignalDetails } from '../engine/types.ts'
import type { ByteSink } from '../bytes/byte-sink.ts'
import { labelsOf, verdictMembers } from '../history/record.ts'
import {
  clientPackr, itemEnd, itemHead, itemObject, kItemEndByte, packedWarnings, tailRest, verdictTail, wellFormed, writeItemHead,
  writePackedItemHead, writePackedNoneTail
} from './bulk-item.ts'
import type { ChunkScratch, SharedTail } from './chunk-scratch.ts'
import { kNoFacet, type Facet } from './facets.ts'
import type { CachedVerdict, VerdictCache, VerdictTexts } from './verdict-cache.ts'

/** What an item writer tells of the item it wrote (one object per writer, overwritten by each item). */
export interface ItemOutcome {
  /** The verdict came from the cache. */
  hit: boolean
  /** Its facet when the history record may take the facet's tail (signal_details none), else null. */
  facet: Facet | null
  /** The history record's verdict members. */
  members: string
  /** risk.category (metrics). */
  category: string
}

/** Writes the items of valid indicators of one kind of chunk into the scratch's body sink. */
export interface ItemWriter {
  /** Writes the item of `ind`, sent as `value`; `rule`: the tenant allowlist entry covering it, or null. */
  item: (profile: ScoringProfile, ind: NormalizedIndicator, value: unknown, rule: AllowRule | null) => ItemOutcome
  /**
   * Writes the item of `value` sent with type `type` when it is cached as sent (`value` is the normalized value of
   * the entry of `type`) and the entry says that it normalizes to itself with no warning (CachedVerdict.canonical):
   * then normalizing it would give that indicator back, and the item is the cached one, written without normalizing.
   * Null (nothing written) otherwise: the caller normalizes and calls item(). Absent: the writer has no such path.
   */
  sentAsNormalized?: (profile: ScoringProfile, type: IndicatorType, value: string) => ItemOutcome | null
}

/** The writer of a kind of chunk, made once per context. */
export function writerOf (s: ChunkScratch, format: 'json' | 'msgpack', signalDetails: SignalDetails): ItemWriter {
  const kind = `${format}|${signalDetails}`
  let w = s.writers.get(kind) as ItemWriter | undefined
  if (w === undefined) {
    const detail = new DetailWriter(s, format, signalDetails)
    w = signalDetails !== 'none' ? detail : format === 'json' ? new JsonNoneWriter(s, detail) : new PackedNoneWriter(s, detail)
    s.writers.set(kind, w)
  }
  return w
}

function outcome (): ItemOutcome {
  return { hit: false, facet: null, members: '', category: '' }
}

/** The indicator as echoed: JSON.stringify of {type, value, normalized}, keys in that order. */
function sentJson (ind: NormalizedIndicator, value: unknown): string {
  return JSON.stringify({ type: ind.type, value, normalized: ind.normalized })
}

/** risk.category read from the risk's JSON text (a cache hit has only the text); metrics count verdicts by it. */
function categoryOfRiskJson (risk: string): string {
  const at = risk.indexOf(kCategoryMember)
  if (at === -1) return 'unknown'
  const start = at + kCategoryMember.length
  return risk.slice(start, risk.indexOf('"', start))
}
const kCategoryMember = '"category":"'

/** The outcome of a cached verdict: from its facet, else from its risk and scores texts. */
function cachedOut (s: ChunkScratch, out: ItemOutcome, cached: CachedVerdict): ItemOutcome {
  const f = s.facets.byId(cached.facet)
  if (f !== undefined) {
    out.facet = f
    out.members = f.members
    out.category = f.category
    return out
  }
  const riskJson = cached.riskJson()
  out.facet = null
  out.members = verdictMembers(riskJson, cached.scoresJson(), [])
  out.category = categoryOfRiskJson(riskJson)
  return out
}

/** Whether `ind`, sent as `value`, is its own normalized form with its type given and no warning (kFormCanonical). */
function sentCanonical (ind: NormalizedIndicator, value: unknown): boolean {
  return !ind.inferred && ind.warnings.length === 0 && value === ind.normalized
}

/**
 * A writer's cache lookups. sentAsNormalized() keeps the one it could not answer from; the item then goes to item(),
 * whose key is usually the one just looked up (a value sent as it normalizes, not cached yet or cached without the
 * bit), and nothing touches the cache between the two: that lookup is the answer, not made again. The kept lookup is
 * read once, by the next lookup, and dropped by any other find (a get may move entries in the ring), so a lookup
 * never meets one older than the last find.
 */
class Lookups {
  /** The hash of the key of the last find() (and so of the last lookup()). */
  hash = 0
  private keptKey = ''
  private keptValue = ''
  private kept: CachedVerdict | undefined = undefined
  private held = false

  /** Looks `key` + `value` up; the entry, if any. */
  find (cache: VerdictCache, key: string, value: string): CachedVerdict | undefined {
    this.held = false
    this.hash = cache.hash(key, value)
    return cache.get(key, this.hash, value)
  }

  /** Keeps the last find() for the next lookup(). */
  keep (key: string, value: string, found: CachedVerdict | undefined): void {
    this.keptKey = key
    this.keptValue = value
    this.kept = found
    this.held = true
  }

  /** find(), or the kept lookup when it is of the same key (and drops it either way). */
  lookup (cache: VerdictCache, key: string, value: string): CachedVerdict | undefined {
    if (this.held && value === this.keptValue && key === this.keptKey) {
      this.held = false
      return this.kept
    }
    return this.find(cache, key, value)
  }
}

/**
 * The entry of `value` sent with `type`, when it says the value normalizes to itself (CachedVerdict.canonical) and
 * holds the writer's form (`usable`); else null, the lookup kept for the item's own path (Lookups).
 */
function canonicalEntry (s: ChunkScratch, lookups: Lookups, profile: ScoringProfile, type: IndicatorType, value: string, usable: (c: CachedVerdict) => boolean): CachedVerdict | null {
  const cache = s.cache
  if (cache === null) return null
  const key = s.cacheKey(profile, type)
  const cached = lookups.find(cache, key, value)
  if (cached === undefined || !cached.canonical || !usable(cached)) {
    lookups.keep(key, value, cached)
    return null
  }
  return cached
}

const hasJsonTail = (c: CachedVerdict): boolean => c.hasTail
const hasPackedTail = (c: CachedVerdict): boolean => c.packedEnd > c.packedStart

function sharedOut (out: ItemOutcome, u: SharedTail): ItemOutcome {
  out.facet = u.facet
  out.members = u.members
  out.category = u.category
  return out
}

/**
 * Assesses `ind` and writes its none tail: its shared tail (chunk-scratch.ts) around the threat_context the engine
 * writes from its context facts and the tail's listing. Returns the tail.
 */
function writeShared (s: ChunkScratch, profile: ScoringProfile, ind: NormalizedIndicator, format: 'json' | 'msgpack'): SharedTail {
  s.assessor.collect(ind, profile)
  const tail = s.sharedTail(profile, format)
  const sink = s.body
  // An unlisted address whose context facts an earlier one shared: its whole tail is those bytes.
  const written = tail.written
  const key = written === null ? -1 : contextKey(s.assessor.facts)
  if (key >= 0 && written?.copyTo(key, sink) === true) return tail
  const start = sink.len
  sink.bytes(tail.head)
  writeContext(s.assessor.facts, tail.listing, s.snapshot, format === 'json' ? s.json : s.packed)
  sink.bytes(tail.end)
  if (key >= 0) written?.keep(key, sink, start)
  return tail
}

/** JSON at signal_details none. */
class JsonNoneWriter implements ItemWriter {
  private readonly s: ChunkScratch
  private readonly detail: DetailWriter
  private readonly out = outcome()
  private readonly lookups = new Lookups()

  constructor (s: ChunkScratch, detail: DetailWriter) {
    this.s = s
    this.detail = detail
  }

  item (profile: ScoringProfile, ind: NormalizedIndicator, value: unknown, rule: AllowRule | null): ItemOutcome {
    if (rule !== null) return this.detail.item(profile, ind, value, rule)
    const sink = this.s.body
    const itemStart = sink.len
    if (typeof value === 'string') writeItemHead(sink, ind.type, value, ind.normalized)
    else sink.write(itemHead(sentJson(ind, value)))
    const out = this.tail(profile, ind, sink, sentCanonical(ind, value), itemStart)
    if (ind.warnings.length > 0) sink.write(itemEnd(ind.warnings))
    else sink.byte(kItemEndByte)
    return out
  }

  sentAsNormalized (profile: ScoringProfile, type: IndicatorType, value: string): ItemOutcome | null {
    const s = this.s
    const cached = canonicalEntry(s, this.lookups, profile, type, value, hasJsonTail)
    if (cached === null) return null
    const sink = s.body
    const itemStart = cached.itemStart
    if (itemStart >= 0) {
      // The item's head, its tail and the `}` that closes both the stored tail and the item (kItemEndByte).
      sink.copy(cached.ring, itemStart, cached.tailEnd + 1)
    } else {
      writeItemHead(sink, type, value, value)
      sink.copy(cached.ring, cached.tailStart, cached.tailEnd)
      sink.byte(kItemEndByte)
    }
    this.out.hit = true
    return cachedOut(s, this.out, cached)
  }

  /**
   * The none tail: from the cache's bytes on a hit (no parsing, no new strings), else assessed and cached.
   * `canonical`: the indicator was sent as it normalizes (sentCanonical), which its entry then records, with the
   * item's head (written from `itemStart`) for sentAsNormalized to copy with the tail.
   */
  private tail (profile: ScoringProfile, ind: NormalizedIndicator, sink: ByteSink, canonical: boolean, itemStart: number): ItemOutcome {
    const s = this.s
    const out = this.out
    const cache = s.cache
    const key = s.cacheKey(profile, ind.type)
    const cached = cache === null ? undefined : this.lookups.lookup(cache, key, ind.normalized)
    const h = this.lookups.hash
    if (cached?.hasTail === true) {
      if (canonical && !cached.canonical) cached.markCanonical()
      sink.copy(cached.ring, cached.tailStart, cached.tailEnd)
      out.hit = true
      return cachedOut(s, out, cached)
    }
    out.hit = false
    const start = sink.len
    const u = writeShared(s, profile, ind, 'json')
    cache?.setTail(key, h, sink.buf, start, start + u.riskEnd, start + u.scoresEnd, sink.len, u.facet?.id ?? kNoFacet, ind.normalized, canonical, itemStart)
    return sharedOut(out, u)
  }
}

/** MessagePack at signal_details none. */
class PackedNoneWriter implements ItemWriter {
  private readonly s: ChunkScratch
  private readonly detail: DetailWriter
  private readonly out = outcome()
  private readonly lookups = new Lookups()

  constructor (s: ChunkScratch, detail: DetailWriter) {
    this.s = s
    this.detail = detail
  }

  item (profile: ScoringProfile, ind: NormalizedIndicator, value: unknown, rule: AllowRule | null): ItemOutcome {
    if (rule !== null || typeof value !== 'string') return this.detail.item(profile, ind, value, rule)
    const sink = this.s.body
    writePackedItemHead(sink, ind.type, value, ind.normalized, ind.warnings.length > 0)
    const out = this.tail(profile, ind, sink, sentCanonical(ind, value))
    if (ind.warnings.length > 0) sink.bytes(packedWarnings(ind.warnings))
    return out
  }

  sentAsNormalized (profile: ScoringProfile, type: IndicatorType, value: string): ItemOutcome | null {
    const s = this.s
    const cached = canonicalEntry(s, this.lookups, profile, type, value, hasPackedTail)
    if (cached === null) return null
    const sink = s.body
    writePackedItemHead(sink, type, value, value, false)
    sink.copy(cached.ring, cached.packedStart, cached.packedEnd)
    this.out.hit = true
    return cachedOut(s, this.out, cached)
  }

  /**
   * The packed none tail: copied on a hit; packed on a miss, or on a hit of an entry a JSON call stored (then the
   * entry is stored again with it), so that each verdict is packed once. A miss stores the packed tail only.
   */
  private tail (profile: ScoringProfile, ind: NormalizedIndicator, sink: ByteSink, canonical: boolean): ItemOutcome {
    const s = this.s
    const out = this.out
    const cache = s.cache
    const key = s.cacheKey(profile, ind.type)
    const cached = cache === null ? undefined : this.lookups.lookup(cache, key, ind.normalized)
    const h = this.lookups.hash
    if (cached !== undefined) {
      out.hit = true
      if (cached.packedEnd > cached.packedStart) {
        if (canonical && !cached.canonical) cached.markCanonical()
        sink.copy(cached.ring, cached.packedStart, cached.packedEnd)
      } else {
        // An entry without the packed tail holds the JSON tail (verdict-cache.ts).
        const a = cached.tailMembers()
        const t = cached.texts()
        const start = sink.len
        writePackedNoneTail(sink, a.risk, a.scores, a.threat_context, a.recommended_actions)
        // A view of what was just written: set() copies it into the ring before the sink is written again.
        t.packed = sink.buf.subarray(start, sink.len)
        const stored = cache?.set(key, t, h, ind.normalized)
        if (canonical) stored?.markCanonical()
      }
      return cachedOut(s, out, cached)
    }
    out.hit = false
    const start = sink.len
    const u = writeShared(s, profile, ind, 'msgpack')
    const t: VerdictTexts = { head: null, risk: u.riskJson, scores: u.scoresJson, rest: null, facet: u.facet?.id ?? kNoFacet, packed: sink.buf.subarray(start, sink.len) }
    const stored = cache?.set(key, t, h, ind.normalized)
    if (canonical) stored?.markCanonical()
    return sharedOut(out, u)
  }
}

/** Any format at signal_details top or all, and items a tenant allowlist covers: the full assessment, rendered. */
class DetailWriter implements ItemWriter {
  private readonly s: ChunkScratch
  private readonly format: 'json' | 'msgpack'
  private readonly signalDetails: SignalDetails
  private readonly out = outcome()

  constructor (s: ChunkScratch, format: 'json' | 'msgpack', signalDetails: SignalDetails) {
    this.s = s
    this.format = format
    this.signalDetails = signalDetails
  }

  item (profile: ScoringProfile, ind: NormalizedIndicator, value: unknown, rule: AllowRule | null): ItemOutcome {
    const s = this.s
    const { a, hit } = rule === null ? s.lookup(profile, ind) : { a: allowlisted(s, profile, ind, rule), hit: false }
    const out = this.out
    out.hit = hit
    out.facet = null
    out.members = verdictMembers(s.jsonOf(a.risk), s.jsonOf(a.scores), labelsOf(a, this.signalDetails))
    out.category = a.risk.category
    if (this.format === 'json') {
      s.body.write(itemHead(sentJson(ind, value)) + this.tail(a) + itemEnd(ind.warnings))
    } else {
      const v = render(a, value as string, ind.warnings, { signalDetails: this.signalDetails, evidenceDetails: 'none' })
      s.body.bytes(clientPackr.pack(wellFormed(itemObject(v, ind.warnings))))
    }
    return out
  }

  /** The bulk item members after `indicator`. */
  private tail (a: Assessment): string {
    const s = this.s
    let signals = '[]'
    let count = 0
    if (a.signals.length > 0 && this.signalDetails !== 'none') {
      const v = render(a, '', [], { signalDetails: this.signalDetails, evidenceDetails: 'none' })
      signals = JSON.stringify(v.signals)
      count = v.signal_count
    }
    return verdictTail(s.jsonOf(a.risk), signals, count, s.jsonOf(a.scores), tailRest(JSON.stringify(a.threat_context), s.jsonOf(a.recommended_actions)))
  }
}

/** The allowlisted assessment of an indicator a tenant entry covers: assessed now, never cached. */
export function allowlisted (s: ChunkScratch, profile: ScoringProfile, ind: NormalizedIndicator, rule: AllowRule): Assessment {
  return allowlistedAssessment(ind, rule, s.assess(profile, ind))
}
