/**
 * The scoring pool of one snapshot: bulk chunks go to the scoring threads (shards.ts), one per cache shard, encoded by
 * chunk-codec.ts; single calls are answered on the calling thread (single-call.ts). Inline mode (size 0) runs the same
 * chunk scorer on the calling thread; it is the tests' and the benchmark's baseline.
 */
import { PoolClosedError } from '../errors.ts'
import { Snapshot, type SnapshotData } from '../engine/index.ts'
import { SpareBuffers } from '../bytes/byte-sink.ts'
import { encodeItems } from './chunk-codec.ts'
import { createShardCache, scoreBulkChunk, type BulkChunkOutput, type ChunkItem, type ChunkParams, type ScoringContext } from './score-chunk.ts'
import { ScoringShards } from './shards.ts'
import { SingleCalls, type SingleOutput } from './single-call.ts'

/** Merged body buffers kept per shard for its next chunks (recycle()). */
const kSparesPerShard = 2

/** Pool options. */
export interface ScoringPoolOptions {
  size: number
  cacheSize: number
  /** Worker module (a file URL); tests swap in fixtures that crash. */
  entry?: string
  /** History part buffers the history writer has stored and handed back: each bulk chunk takes one to write into. */
  historySpares?: SpareBuffers
}

/** Scores chunks on worker threads or inline. */
export class ScoringPool {
  readonly snapshot: Snapshot
  readonly size: number
  /** The scoring threads; null inline. */
  private readonly threads: ScoringShards | null
  private readonly inline: ScoringContext | null
  /** Single calls, answered on this thread (with the inline context's cache shard in inline mode). */
  private readonly singles: SingleCalls
  /** Per shard: body buffers already merged, handed to its next chunks to write into (see recycle()). */
  private readonly spares: SpareBuffers[]
  private readonly historySpares: SpareBuffers | null
  private closed = false

  constructor (data: SnapshotData, options: ScoringPoolOptions) {
    this.snapshot = new Snapshot(data)
    this.size = options.size
    this.inline = options.size === 0 ? { snapshot: this.snapshot, cache: createShardCache(options.cacheSize) } : null
    this.threads = options.size === 0
      ? null
      : new ScoringShards({ count: options.size, cacheSize: options.cacheSize, snapshot: data, ...(options.entry === undefined ? {} : { entry: options.entry }) })
    this.singles = new SingleCalls(this.snapshot, options.cacheSize, this.inline)
    this.spares = Array.from({ length: this.shards }, () => new SpareBuffers(kSparesPerShard))
    this.historySpares = options.historySpares ?? null
  }

  /** Number of shards (1 inline). */
  get shards (): number {
    return Math.max(1, this.size)
  }

  /** Resolves once every worker has started (so a benchmark does not time thread start-up). */
  async ready (): Promise<void> {
    await this.threads?.ready()
  }

  /** Scores one bulk chunk on the shard's worker. */
  async runBulk (shard: number, items: ChunkItem[], params: ChunkParams): Promise<BulkChunkOutput> {
    if (this.closed) throw new PoolClosedError()
    const spare = this.spares[shard]?.pop()
    const historySpare = this.historySpares?.pop()
    if (this.threads === null) return scoreBulkChunk(items, params, this.inline as ScoringContext, spare, historySpare)
    const encoded = encodeItems(items)
    const transferList: ArrayBuffer[] = encoded instanceof Uint8Array ? [encoded.buffer] : []
    if (spare !== undefined) transferList.push(spare)
    if (historySpare !== undefined) transferList.push(historySpare)
    return await this.threads.run(shard, { items: encoded, params, spare, historySpare }, { transferList }) as BulkChunkOutput
  }

  /**
   * Takes back the buffer of a shard's chunk body once the caller has copied what it needs out of it: the shard's
   * next chunk writes its body into it instead of a new buffer (why: SpareBuffers; about 6 MB per 10,000-item bulk).
   * The caller must not read `body` after this.
   */
  recycle (shard: number, body: Uint8Array): void {
    if (this.closed || body.byteLength === 0) return
    this.spares[shard]?.give(body.buffer)
  }

  /** Answers the single endpoint's indicator on this thread (single-call.ts). */
  async runSingle (item: ChunkItem, params: ChunkParams): Promise<SingleOutput> {
    if (this.closed) throw new PoolClosedError()
    return this.singles.answer(item, params)
  }

  /** Tasks queued or running across shards (0 inline: a chunk scored inline is never waiting). */
  get pending (): number {
    return this.threads?.pending ?? 0
  }

  /** Mean share of time the scoring threads spent running tasks since they started (0-1; 0 inline). */
  get utilization (): number {
    return this.threads?.utilization ?? 0
  }

  /** Waits for queued tasks to finish, then stops the workers. */
  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.spares.length = 0
    await this.threads?.close()
  }

  /** Stops the workers now, failing queued tasks. */
  async destroy (): Promise<void> {
    this.closed = true
    this.spares.length = 0
    await this.threads?.destroy()
  }
}
