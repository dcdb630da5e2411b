/**
 * The scoring pool: N single-thread Piscina pools, one per cache shard, so the same indicator always reaches
 * the same worker and N shards form one cache of N x capacity. Inline mode (size 0) runs the same chunk
 * scorer on the calling thread; it is the tests' and the benchmark's baseline.
 */
import { Piscina } from 'piscina'
import { fnv1aFolded } from '../bytes/fnv.ts'
import { PoolClosedError } from '../errors.ts'
import { Snapshot, type SnapshotData } from '../engine/index.ts'
import { SpareBuffers } from '../bytes/byte-sink.ts'
import { kWorkerExecArgv, kWorkerShim, workerEntry } from '../worker-entry.ts'
import {
  createShardCache, scoreBulkChunk, scoreSingle, threadPackr,
  type BulkChunkOutput, type ChunkItem, type ChunkParams, type ScoringContext, type SingleChunkOutput
} from './score-chunk.ts'

/** Tasks queued per shard before the pool refuses more (the in-flight bound usually triggers first). */
const kMaxQueuePerShard = 1024
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

/** Case-insensitive FNV-1a of the value as sent: cheap, allocation-free shard choice. */
export function shardOf (value: unknown, shards: number): number {
  if (shards <= 1) return 0
  if (typeof value !== 'string') return 0
  return fnv1aFolded(value) % shards
}

/** Scores chunks on worker threads or inline. */
export class ScoringPool {
  readonly snapshot: Snapshot
  readonly size: number
  private readonly pools: Piscina[]
  private readonly inline: ScoringContext | null
  /** Per shard: body buffers already merged, handed to its next chunks to write into (see recycle()). */
  private readonly spares: SpareBuffers[]
  private readonly historySpares: SpareBuffers | null
  private closed = false

  constructor (data: SnapshotData, options: ScoringPoolOptions) {
    this.snapshot = new Snapshot(data)
    this.size = options.size
    this.inline = options.size === 0 ? { snapshot: this.snapshot, cache: createShardCache(options.cacheSize) } : null
    this.pools = []
    this.spares = Array.from({ length: this.shards }, () => new SpareBuffers(kSparesPerShard))
    this.historySpares = options.historySpares ?? null
    for (let i = 0; i < options.size; i++) {
      this.pools.push(new Piscina({
        filename: kWorkerShim,
        execArgv: [...kWorkerExecArgv],
        minThreads: 1,
        maxThreads: 1,
        maxQueue: kMaxQueuePerShard,
        idleTimeout: Number.MAX_SAFE_INTEGER,
        // The SharedArrayBuffer inside is shared with the worker, not copied.
        workerData: { entry: options.entry ?? workerEntry('scoring'), snapshot: data, cacheSize: options.cacheSize }
      }))
    }
  }

  /** Number of shards (1 inline). */
  get shards (): number {
    return Math.max(1, this.size)
  }

  /** Resolves once every worker has started (so a benchmark does not time thread start-up). */
  async ready (): Promise<void> {
    await Promise.all(this.pools.map(async (p) => { await p.run(null, { name: 'ready' }) }))
  }

  /** Scores one bulk chunk on the shard's worker. */
  async runBulk (shard: number, items: ChunkItem[], params: ChunkParams): Promise<BulkChunkOutput> {
    if (this.closed) throw new PoolClosedError()
    const spare = this.spares[shard]?.pop()
    const historySpare = this.historySpares?.pop()
    if (this.inline !== null) return scoreBulkChunk(items, params, this.inline, spare, historySpare)
    const encoded = encodeItems(items)
    const transferList: ArrayBuffer[] = encoded instanceof Uint8Array ? [encoded.buffer] : []
    if (spare !== undefined) transferList.push(spare)
    if (historySpare !== undefined) transferList.push(historySpare)
    return await (this.pools[shard] as Piscina).run({ items: encoded, params, spare, historySpare }, { transferList }) as BulkChunkOutput
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

  /** Scores the single endpoint's indicator on its shard's worker. */
  async runSingle (item: ChunkItem, params: ChunkParams): Promise<SingleChunkOutput> {
    if (this.closed) throw new PoolClosedError()
    if (this.inline !== null) return scoreSingle(item, params, this.inline)
    const encoded = encodeItems([item])
    const shard = shardOf(item[1], this.shards)
    return await (this.pools[shard] as Piscina).run({ items: encoded, params }, { transferList: encoded instanceof Uint8Array ? [encoded.buffer] : [] }) as SingleChunkOutput
  }

  /** Tasks queued or running across shards. */
  get pending (): number {
    let n = 0
    for (const p of this.pools) n += p.queueSize + (p.utilization > 0 ? 1 : 0)
    return n
  }

  /** Mean share of time the scoring threads spent running tasks since they started (0-1; 0 inline). */
  get utilization (): number {
    if (this.pools.length === 0) return 0
    let u = 0
    for (const p of this.pools) u += p.utilization
    return u / this.pools.length
  }

  /** Waits for queued tasks to finish, then stops the workers. */
  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.spares.length = 0
    await Promise.all(this.pools.map(async (p) => await p.close()))
  }

  /** Stops the workers now, failing queued tasks. */
  async destroy (): Promise<void> {
    this.closed = true
    this.spares.length = 0
    await Promise.all(this.pools.map(async (p) => await p.destroy()))
  }
}

/** Whether a string holds a lone UTF-16 surrogate (String.prototype.isWellFormed, Node 20). */
function illFormed (s: unknown): boolean {
  return typeof s === 'string' && !(s as unknown as { isWellFormed: () => boolean }).isWellFormed()
}

/**
 * Items as a scoring thread receives them: msgpack (compact, transferred), except a chunk holding a string with a lone
 * surrogate, which goes as it is (structured clone): msgpack writes a lone surrogate as three bytes that decode to three
 * U+FFFD, and the answer must echo the value as sent (JSON escapes it as \udXXX).
 */
function encodeItems (items: readonly ChunkItem[]): Uint8Array<ArrayBuffer> | ChunkItem[] {
  for (const it of items) {
    if (illFormed(it[0]) || illFormed(it[1]) || illFormed(it[2]) || illFormed(it[3])) return items as ChunkItem[]
  }
  return copy(threadPackr.pack(items))
}

/** msgpackr's pack() returns a view into its scratch buffer: copy into an owned buffer before transferring. */
function copy (b: Uint8Array): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(b.length)
  out.set(b)
  return out
}
