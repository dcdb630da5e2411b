/**
 * Piscina entry of a scoring worker. Each worker owns one cache shard and maps the shared intel snapshot
 * it was started with (workerData); a reload starts a new pool, so a worker never sees two snapshots.
 */
import { Piscina } from 'piscina'
import { workerData } from 'node:worker_threads'
import { Snapshot, type SnapshotData } from '../src/engine/index.ts'
import { decodeItems, type EncodedItems } from '../src/pool/chunk-codec.ts'
import { createShardCache, scoreBulkChunk, type ChunkParams, type ScoringContext } from '../src/pool/score-chunk.ts'

/** What the pool passes every worker. */
export interface ScoringWorkerData {
  snapshot: SnapshotData
  cacheSize: number
}

/** One task: a bulk chunk as chunk-codec.ts encodes it (transferred), the request's parameters, maybe a spare body buffer. */
export interface ScoringTask {
  items: EncodedItems
  params: ChunkParams
  /** An earlier body buffer of this shard, merged by the main thread and transferred back for reuse. */
  spare?: ArrayBuffer
  /** A history part buffer the history writer has stored and handed back, for this chunk's part. */
  historySpare?: ArrayBuffer
}

const data = workerData as ScoringWorkerData
const ctx: ScoringContext = { snapshot: new Snapshot(data.snapshot), cache: createShardCache(data.cacheSize) }

function move<T> (value: T, buffers: ArrayBufferLike[]): T {
  return Piscina.move({
    get [Piscina.transferableSymbol] () { return buffers },
    get [Piscina.valueSymbol] () { return value }
  } as never) as T
}

/** Scores one chunk and transfers the encoded output back. */
export default function score (task: ScoringTask): unknown {
  const out = scoreBulkChunk(decodeItems(task.items), task.params, ctx, task.spare, task.historySpare)
  return move(out, [out.body.buffer, out.ends.buffer, out.history.buffer])
}

/** Named task the pool runs once per worker to know the thread has started and mapped its snapshot. */
export function ready (): boolean {
  return ctx.snapshot.version !== ''
}
