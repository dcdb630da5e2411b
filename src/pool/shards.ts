/**
 * The scoring threads: N single-thread Piscina pools, one per cache shard, so the same indicator always reaches the
 * same thread (shardOf) and N shards form one cache of N x capacity. Every thread maps the snapshot it was started
 * with; a reload starts new shards on the new snapshot.
 */
import { Piscina } from 'piscina'
import { fnv1aFolded } from '../bytes/fnv.ts'
import type { SnapshotData } from '../engine/index.ts'
import { kWorkerExecArgv, kWorkerShim, workerEntry } from '../worker-entry.ts'

/** Tasks queued per shard before the pool refuses more (the in-flight bound usually triggers first). */
const kMaxQueuePerShard = 1024

/** Case-insensitive FNV-1a of the value as sent: cheap, allocation-free shard choice. */
export function shardOf (value: unknown, shards: number): number {
  if (shards <= 1) return 0
  if (typeof value !== 'string') return 0
  return fnv1aFolded(value) % shards
}

/** What starts the shards. */
export interface ShardOptions {
  /** Threads, one per shard (at least 1). */
  count: number
  /** Verdicts each thread's cache shard holds. */
  cacheSize: number
  /** The snapshot every thread maps (its SharedArrayBuffer is shared, not copied). */
  snapshot: SnapshotData
  /** Worker module (a file URL); tests swap in fixtures that crash. */
  entry?: string
}

/** The scoring threads of one snapshot. */
export class ScoringShards {
  readonly count: number
  private readonly pools: Piscina[] = []
  /**
   * Tasks handed to run() and not yet settled: queued or running. Counted here rather than read from Piscina, whose
   * `utilization` is a mean since the thread started (non-zero forever once any task ran) and says nothing of now.
   */
  private inFlight = 0

  constructor (options: ShardOptions) {
    this.count = options.count
    for (let i = 0; i < options.count; i++) {
      this.pools.push(new Piscina({
        filename: kWorkerShim,
        execArgv: [...kWorkerExecArgv],
        minThreads: 1,
        maxThreads: 1,
        maxQueue: kMaxQueuePerShard,
        idleTimeout: Number.MAX_SAFE_INTEGER,
        workerData: { entry: options.entry ?? workerEntry('scoring'), snapshot: options.snapshot, cacheSize: options.cacheSize }
      }))
    }
  }

  /** Runs a task on one shard's thread (`name`: the worker's export, default its scoring function). */
  async run (shard: number, task: unknown, options: Parameters<Piscina['run']>[1] = {}): Promise<unknown> {
    const pool = this.pools[shard]
    if (pool === undefined) throw new RangeError(`no shard ${shard}`)
    this.inFlight++
    try {
      return await pool.run(task, options)
    } finally {
      this.inFlight--
    }
  }

  /** Resolves once every thread has started and mapped its snapshot. */
  async ready (): Promise<void> {
    await Promise.all(this.pools.map(async (_p, i) => { await this.run(i, null, { name: 'ready' }) }))
  }

  /** Tasks queued or running across shards. */
  get pending (): number {
    return this.inFlight
  }

  /** Mean share of time the threads spent running tasks since they started (0-1). */
  get utilization (): number {
    if (this.pools.length === 0) return 0
    let u = 0
    for (const p of this.pools) u += p.utilization
    return u / this.pools.length
  }

  /** Waits for queued tasks to finish, then stops the threads. */
  async close (): Promise<void> {
    await Promise.all(this.pools.map(async (p) => await p.close()))
  }

  /** Stops the threads now, failing queued and running tasks. */
  async destroy (): Promise<void> {
    await Promise.all(this.pools.map(async (p) => await p.destroy()))
  }
}
