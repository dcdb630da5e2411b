/**
 * A scoring context (the snapshot a thread maps and its verdict cache shard) and the scratch state its chunks reuse:
 * the byte sinks a chunk writes into, the engine's assessment state, the member writers, the facets, the compiled
 * tenant allowlists and the memos of shared texts. Owned by the context (scratchOf), so two contexts of one thread
 * (a scoring pool's and a test's) never share a buffer or a number; scoring is synchronous, so one chunk at a time
 * uses it.
 */
import { AllowMatcher, Assessor, kNoListing, type AllowRule, type Assessment, type Listing, type ScoringProfile, type Snapshot } from '../engine/index.ts'
import type { IndicatorType, NormalizedIndicator } from '../engine/types.ts'
import { ByteSink } from '../bytes/byte-sink.ts'
import { fnv1aBytes } from '../bytes/fnv.ts'
import { KeptBytes } from '../bytes/kept-bytes.ts'
import { verdictMembers } from '../history/record.ts'
import { HistoryItems } from '../history/codec.ts'
import { jsonTailAround, packedTailAround, tailRest, type TailAround } from './bulk-item.ts'
import { Facets, kNoFacet, type Facet } from './facets.ts'
import { JsonMembers, PackedMembers } from './member-writers.ts'
import { verdictHead, type VerdictCache, type VerdictTexts } from './verdict-cache.ts'

/** Scoring context of one thread: the snapshot it maps and its cache shard; `scratch` is made on first use. */
export interface ScoringContext {
  snapshot: Snapshot
  cache: VerdictCache | null
  scratch?: ChunkScratch
}

/** The scratch state of a context, made on its first chunk. */
export function scratchOf (ctx: ScoringContext): ChunkScratch {
  return (ctx.scratch ??= new ChunkScratch(ctx.snapshot, ctx.cache))
}

/** Whether `a` holds the bytes written to `sink`. */
function sameBytes (a: Uint8Array, sink: ByteSink): boolean {
  if (a.length !== sink.len) return false
  const b = sink.buf
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

/** Shared tails kept per format and profile at most; past it the memo starts again. */
const kMaxSharedTails = 8192

/** Compiled allowlists of recent tenant versions kept per context (a new version has a new key). */
const kMaxMatchers = 64
/**
 * Scratch sinks that grew past this (a chunk of tens of thousands of items) are replaced by small ones after use, so
 * a context keeps at most 3 x kKeepBytes of scratch.
 */
const kKeepBytes = 16 << 20

/**
 * The none tail of the verdicts that share their shared parts (engine Assessor.shared: risk, scores, actions,
 * listing) under a profile, around threat_context, with its facet and the listing the context ends with.
 */
export interface SharedTail extends TailAround {
  /** The summary key it was made for. */
  key: Uint8Array
  riskJson: string
  scoresJson: string
  /** The facet of its risk and scores; null when the facet table is full. */
  facet: Facet | null
  /** The history record's verdict members, and risk.category. */
  members: string
  category: string
  listing: Listing
  /**
   * For an unlisted address: the whole none tail (head, threat_context, end) already written for a key of its context
   * facts (chunk-writers.ts contextKey), so that addresses sharing their facts copy it once; bounded.
   */
  written: KeptBytes | null
}

/**
 * Whole none tails kept per shared tail for addresses' context facts (a few hundred bytes each), and their bytes in
 * all; past either the memo starts again.
 */
const kMaxWrittenTails = 4096
const kMaxWrittenBytes = 2 << 20

/** One context's scratch state (see the module comment). */
export class ChunkScratch {
  readonly snapshot: Snapshot
  readonly cache: VerdictCache | null
  /** The engine's reused assessment state. */
  readonly assessor: Assessor
  /** Verdict facets: the cache's own table (its entries carry numbers of it), else the context's. */
  readonly facets: Facets
  /**
   * The sinks of a bulk chunk's items, its history strings and its history tails, reused from chunk to chunk: a fresh
   * sink per chunk grew by doubling to the chunk's size, and buffers outside the heap count toward V8's old-generation
   * limit, so that churn set off a full mark-compact every few bulks. A chunk allocates only its exactly sized outputs.
   */
  readonly body = new ByteSink(1 << 20)
  readonly history = new ByteSink(1 << 20)
  readonly tails = new ByteSink(64 * 1024)
  /** The history collector of single calls, reset for each (its part is encoded into a buffer of its own). */
  readonly single = new HistoryItems()
  /** threat_context writers into `body`. */
  readonly json: JsonMembers
  readonly packed: PackedMembers
  private readonly matchers = new Map<string, AllowMatcher>()
  /** JSON text of frozen values (what unlisted verdicts share), by identity: their text never changes. */
  private readonly sharedJson = new WeakMap<object, string>()
  /** The profile the memos below hold texts of (a chunk has one; a new one empties them). */
  private profile: ScoringProfile | null = null
  /** Shared tails by the hash of the engine's summary key, JSON and MessagePack. */
  private readonly jsonTails = new Map<number, SharedTail>()
  private readonly packedTails = new Map<number, SharedTail>()
  /** Cache key heads by type. */
  private readonly keyHeads = new Map<IndicatorType, string>()
  /** The summary key of the indicator being written (engine Assessor.summaryKey). */
  private readonly summaryKey = new ByteSink(1024)
  /** Writers by kind of chunk (chunk-writers.ts), made on first use. */
  readonly writers = new Map<string, unknown>()

  constructor (snapshot: Snapshot, cache: VerdictCache | null) {
    this.snapshot = snapshot
    this.cache = cache
    this.assessor = new Assessor(snapshot)
    this.facets = cache?.facets ?? new Facets()
    this.json = new JsonMembers(this.body)
    this.packed = new PackedMembers(this.body)
  }

  /** Empties the chunk sinks for a new chunk. */
  begin (): void {
    this.body.clear()
    this.history.clear()
    this.tails.clear()
  }

  /** After a chunk: lets sinks that grew very large go. */
  end (): void {
    this.body.shrink(kKeepBytes)
    this.history.shrink(kKeepBytes)
    this.tails.shrink(kKeepBytes)
  }

  /**
   * The head of a verdict's cache key, before its normalized value: snapshot version, profile version and type (a
   * key is head + normalized, given to the cache as the two strings, so that no key string is made per indicator).
   */
  cacheKey (profile: ScoringProfile, type: IndicatorType): string {
    this.use(profile)
    let head = this.keyHeads.get(type)
    if (head === undefined) this.keyHeads.set(type, head = `${this.snapshot.version}|${profile.version}|${type}|`)
    return head
  }

  /** Empties the profile's memos when `profile` is another. */
  private use (profile: ScoringProfile): void {
    if (profile === this.profile) return
    this.profile = profile
    this.jsonTails.clear()
    this.packedTails.clear()
    this.keyHeads.clear()
  }

  /** The compiled matcher of a tenant's allowlist (compiled once per key), or null without one. */
  matcherOf (allow: { key: string, rules: AllowRule[] } | undefined): AllowMatcher | null {
    if (allow === undefined) return null
    let m = this.matchers.get(allow.key)
    if (m === undefined) {
      if (this.matchers.size >= kMaxMatchers) this.matchers.delete(this.matchers.keys().next().value as string)
      this.matchers.set(allow.key, m = new AllowMatcher(allow.rules))
    }
    return m
  }

  /** JSON text of part of an assessment, from the memo when the part is shared (frozen). */
  jsonOf (value: object): string {
    if (!Object.isFrozen(value)) return JSON.stringify(value)
    let text = this.sharedJson.get(value)
    if (text === undefined) this.sharedJson.set(value, text = JSON.stringify(value))
    return text
  }

  /** The texts a whole assessment is cached as (verdict-cache.ts), with the number of its facet. */
  textsOf (a: Assessment): VerdictTexts {
    const risk = this.jsonOf(a.risk)
    const scores = this.jsonOf(a.scores)
    return {
      head: verdictHead(a.type, JSON.stringify(a.normalized), this.jsonOf(a.flags), this.jsonOf(a.signals)),
      risk,
      scores,
      rest: tailRest(JSON.stringify(a.threat_context), this.jsonOf(a.recommended_actions)),
      facet: this.facets.of(a.risk, a.scores, risk, scores)?.id ?? kNoFacet
    }
  }

  /** The assessment of an indicator, from the cache or assessed now (and then cached whole). */
  lookup (profile: ScoringProfile, ind: NormalizedIndicator): { a: Assessment, hit: boolean } {
    const cache = this.cache
    const key = this.cacheKey(profile, ind.type)
    const h = cache === null ? 0 : cache.hash(key, ind.normalized)
    const cached = cache?.get(key, h, ind.normalized)
    if (cached?.hasAssessment === true) return { a: cached.assessment(), hit: true }
    const a = this.assess(profile, ind)
    cache?.set(key, this.textsOf(a), h, ind.normalized)
    return { a, hit: false }
  }

  /** The assessment of an indicator, assessed now. */
  assess (profile: ScoringProfile, ind: NormalizedIndicator): Assessment {
    this.assessor.collect(ind, profile)
    return this.assessor.assessment()
  }

  /**
   * The shared tail of the indicator the assessor collected last under `profile`, JSON or MessagePack: found by its
   * summary key, else made from the assessor's shared parts (the steps after collection, without evidence) and kept.
   */
  sharedTail (profile: ScoringProfile, format: 'json' | 'msgpack'): SharedTail {
    this.use(profile)
    const memo = format === 'json' ? this.jsonTails : this.packedTails
    const key = this.summaryKey
    this.assessor.summaryKey(key)
    const h = fnv1aBytes(key.buf, 0, key.len)
    let tail = memo.get(h)
    if (tail === undefined || !sameBytes(tail.key, key)) {
      const parts = this.assessor.shared()
      const riskJson = this.jsonOf(parts.risk)
      const scoresJson = this.jsonOf(parts.scores)
      const around = format === 'json' ? jsonTailAround(riskJson, scoresJson, this.jsonOf(parts.actions)) : packedTailAround(parts.risk, parts.scores, parts.actions)
      const facet = this.facets.of(parts.risk, parts.scores, riskJson, scoresJson)
      const members = facet?.members ?? verdictMembers(riskJson, scoresJson, [])
      tail = { ...around, key: key.buf.slice(0, key.len), riskJson, scoresJson, facet, members, category: parts.risk.category, listing: parts.listing, written: parts.listing === kNoListing ? new KeptBytes(kMaxWrittenTails, kMaxWrittenBytes) : null }
      if (memo.size >= kMaxSharedTails) memo.clear()
      // A key of another key's hash replaces it.
      memo.set(h, tail)
    }
    return tail
  }
}
