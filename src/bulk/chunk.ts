/**
 * Groups a bulk request's indicators by shard, remembering where each came from, so every shard's worker
 * gets one chunk and the merge can put each answer back at its original index.
 */
import { normalizeActionSource, normalizeActionTaken } from './log-fields.ts'
import { shardOf } from '../pool/shards.ts'
import type { ChunkItem } from '../pool/score-chunk.ts'

/** One indicator of a bulk request as the route's schema lets it through: type and value are checked per item by the scoring workers. */
export interface BulkIndicator {
  type?: unknown
  value?: unknown
  action_taken?: string | null
  action_source?: string | null
}

/** Indicators grouped by shard with their positions. */
export interface Chunks {
  /** items[s] are the indicators of shard s, in request order. */
  items: ChunkItem[][]
  /** For request index i: its shard and its position within that shard's chunk. */
  shard: Uint16Array
  pos: Uint32Array
}

/**
 * Longest indicator value, in characters: the normalizer's own limit. A single call's longer value is refused with
 * the request (its schema); a bulk item's is an invalid item like any other (its result item's `errors`), answered
 * with the value as sent and recorded cut (history/record.ts recordedString).
 */
export const kMaxValueChars = 8192

/**
 * Validates log-only fields (a bad action_source rejects the whole batch with INVALID_ACTION_SOURCE, as the interface
 * says) and groups by shard. The loop touches each item once and allocates only the forwarded tuple.
 */
export function chunkIndicators (indicators: readonly BulkIndicator[], shards: number): Chunks {
  const items: ChunkItem[][] = Array.from({ length: shards }, () => [])
  const shard = new Uint16Array(indicators.length)
  const pos = new Uint32Array(indicators.length)
  for (let i = 0; i < indicators.length; i++) {
    const ind = indicators[i] as BulkIndicator
    const actionSource = normalizeActionSource(ind.action_source, i)
    const s = shardOf(ind.value, shards)
    const list = items[s] as ChunkItem[]
    shard[i] = s
    pos[i] = list.length
    list.push([ind.type, ind.value, normalizeActionTaken(ind.action_taken), actionSource])
  }
  return { items, shard, pos }
}
