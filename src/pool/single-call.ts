/**
 * The single endpoint's path: one indicator answered on the main thread, never on a scoring thread. A single call's
 * hop to a scoring thread (a message each way, a structured clone of the verdict, a thread woken up) cost the main
 * thread more than scoring the indicator here does, and the answer waited behind any bulk chunk queued on that thread.
 * The main thread keeps a cache shard of its own for these calls and, for JSON calls, the answers it has made
 * (single-answers.ts), so a repeated indicator is answered by joining texts.
 */
import { normalize, type Snapshot } from '../engine/index.ts'
import type { IndicatorType, NormalizedIndicator } from '../engine/types.ts'
import type { HistoryItems } from '../history/codec.ts'
import { itemTail } from '../history/record.ts'
import { scratchOf } from './chunk-scratch.ts'
import { createShardCache, givenType, scoreSingle, type ChunkItem, type ChunkParams, type ScoringContext } from './score-chunk.ts'
import { membersAfterIndicator, SingleAnswers, verdictJsonOpen, type KeptVerdict } from './single-answers.ts'

/** Single verdicts kept on the main thread (single-answers.ts), at most. */
const kKeptSingles = 10_000
/**
 * A kept answer's history part is kept with it up to this size: a single call's part is a few hundred bytes, and the
 * bound keeps the parts of kKeptSingles entries under 40 MiB whatever values are sent (up to 8,192 characters each).
 */
const kMaxKeptPartBytes = 4 * 1024
/** Verdicts the main thread's own cache shard holds at most, beside a pool of threads (768 bytes of ring each). */
const kMainCacheSize = 20_000

/** A single verdict as the pool answers it. */
export interface SingleOutput {
  /** The verdict object; null for an invalid indicator, or when `json` has it. */
  verdict: Record<string, unknown> | null
  /**
   * The verdict's JSON text without its closing brace, when the call asked for JSON; else null. The caller appends
   * its last members (meta) and the brace: the text is never cut or copied to make room for them.
   */
  jsonOpen: string | null
  /** The indicator's type, null for an invalid one. */
  type: IndicatorType | null
  /** risk.category, null for an invalid indicator. */
  category: string | null
  errors: string[]
  warnings: string[]
  cacheHit: boolean
  history: Uint8Array
}

/** Single calls of one snapshot, answered on this thread. */
export class SingleCalls {
  private readonly context: ScoringContext
  /** Single verdicts answered again without scoring; null when verdicts are not cached (cacheSize 0). */
  private readonly kept: SingleAnswers | null

  /**
   * `shared`: the context to score in when this thread scores bulk chunks too (inline mode), so both share one cache
   * shard; else a shard of its own (at most kMainCacheSize verdicts) is made here.
   */
  constructor (snapshot: Snapshot, cacheSize: number, shared: ScoringContext | null = null) {
    this.context = shared ?? { snapshot, cache: createShardCache(Math.min(cacheSize, kMainCacheSize)) }
    this.kept = cacheSize > 0 ? new SingleAnswers(Math.min(kKeptSingles, cacheSize)) : null
  }

  /** A JSON call of a verdict kept here is answered from it; anything else is scored here, and a JSON answer kept. */
  answer (item: ChunkItem, params: ChunkParams): SingleOutput {
    let key: string | null = null
    let ind: NormalizedIndicator | null = null
    let canonicalJson: string | null = null
    // Only JSON calls: the kept text is the answer's bytes; a MessagePack answer is packed from the verdict object.
    if (this.kept !== null && params.format === 'json' && params.allow === undefined && typeof item[1] === 'string') {
      const value = item[1]
      const history = scratchOf(this.context).single
      const sent = givenType(item[0])
      if (sent !== null) {
        // The value sent with its type, as an earlier call found it normalizes: its entry's key is the value as sent.
        const hit = this.kept.get(SingleAnswers.key(params.scoringVersion, sent, value, params.signalDetails, params.evidenceDetails))
        if (hit !== undefined && hit.canonicalJson !== null) return keptOutput(hit, sent, value, [], hit.canonicalJson, item, history)
      }
      const n = normalize(value, item[0])
      if (n.ok) {
        ind = n.indicator
        const indicatorJson = JSON.stringify({ type: ind.type, value, normalized: ind.normalized })
        if (sent === ind.type && value === ind.normalized && ind.warnings.length === 0) canonicalJson = indicatorJson
        key = SingleAnswers.key(params.scoringVersion, ind.type, ind.normalized, params.signalDetails, params.evidenceDetails)
        const hit = this.kept.get(key)
        if (hit !== undefined) {
          if (canonicalJson !== null && hit.canonicalJson === null) hit.canonicalJson = canonicalJson
          return keptOutput(hit, ind.type, ind.normalized, ind.warnings, indicatorJson, item, history)
        }
      }
    }
    const out = scoreSingle(item, params, this.context)
    const type = (out.verdict?.indicator as { type?: IndicatorType } | undefined)?.type ?? null
    const category = (out.verdict?.risk as { category?: unknown } | undefined)?.category
    const answer: SingleOutput = {
      verdict: out.verdict,
      jsonOpen: null,
      type,
      category: typeof category === 'string' ? category : null,
      errors: out.errors,
      warnings: out.warnings,
      cacheHit: out.cacheHit,
      history: out.history
    }
    if (params.format === 'json' && out.verdict !== null) {
      const json = JSON.stringify(out.verdict)
      answer.jsonOpen = json.slice(0, -1)
      answer.verdict = null
      if (key !== null && ind !== null && out.members !== null && answer.category !== null) {
        const members = membersAfterIndicator(json, JSON.stringify(out.verdict.indicator))
        if (members !== null) this.kept?.set(key, { members, history: out.members, category: answer.category, part: null, canonicalJson })
      }
    }
    return answer
  }
}

/**
 * The answer to a single call from a kept verdict: what is per call (value as sent, warnings, history) made now.
 * `indicatorJson`: the JSON text of the indicator (type, value as sent, normalized). `history`: the thread's collector
 * for single calls (reset here; its part is encoded into a buffer of its own).
 */
function keptOutput (kept: KeptVerdict, type: IndicatorType, normalized: string, warnings: string[], indicatorJson: string, item: ChunkItem, history: HistoryItems): SingleOutput {
  const value = item[1] as string
  const plain = item[2] === null && item[3] === null
  let part = plain && kept.part !== null && kept.part.value === value ? kept.part.bytes : null
  if (part === null) {
    history.reset()
    history.addVerdict(type, value, normalized, itemTail(kept.history, item[2], item[3]))
    part = history.encode()
    // Only a small buffer (also: the history client hands buffers of 64 KiB and more back to the scoring threads).
    if (plain && part.buffer.byteLength <= kMaxKeptPartBytes) kept.part = { value, bytes: part }
  }
  return {
    verdict: null,
    jsonOpen: verdictJsonOpen(indicatorJson, kept.members),
    type,
    category: kept.category,
    errors: [],
    warnings,
    cacheHit: true,
    history: part
  }
}
