/**
 * Owns the current intel snapshot and the scoring pool mapped to it. A request leases the current pool after it
 * is admitted and releases it when its answer is ready. A reload builds the new snapshot on a worker thread,
 * starts a new pool on it and swaps: leases taken before the swap finish on the old pool (one request never mixes
 * snapshots), and the old pool closes only once its last lease is released, so a reload never fails or stalls a
 * request. Cache keys carry the snapshot version, so no verdict from the old data is served after the swap.
 */
import type { Snapshot, SnapshotData } from '../engine/index.ts'
import { PoolClosedError } from '../errors.ts'
import { buildSnapshot, type BuildInfo, type IntelSourceOptions } from '../intel/index.ts'
import { ScoringPool, type ScoringPoolOptions } from './scoring-pool.ts'

/** Result of a reload. */
export interface ReloadResult { version: string, data_timestamp: string, warm: boolean, build_ms: number }

/** A request's hold on one pool: the pool stays open until release() (idempotent). */
export interface PoolLease {
  readonly pool: ScoringPool
  release: () => void
}

/** A pool and the requests holding it. */
class Generation {
  readonly pool: ScoringPool
  /** The snapshot's header and bytes (what a fleet's leader publishes). */
  readonly data: SnapshotData
  /** How its snapshot was obtained (null: handed in without build facts). */
  readonly build: BuildInfo | null
  leases = 0
  private drained: (() => void) | null = null

  constructor (data: SnapshotData, pool: ScoringPool, build: BuildInfo | null) {
    this.data = data
    this.pool = pool
    this.build = build
  }

  /** Resolves once no lease is held; afterwards the pool is closed by the caller. */
  async idle (): Promise<void> {
    if (this.leases === 0) return
    await new Promise<void>((resolve) => { this.drained = resolve })
  }

  release (): void {
    this.leases--
    if (this.leases === 0 && this.drained !== null) this.drained()
  }
}

/** The current pool and snapshot, leases on it, and the reload procedure. */
export class IntelService {
  private current: Generation
  private readonly poolOptions: ScoringPoolOptions
  private readonly source: IntelSourceOptions
  private reloading: Promise<ReloadResult> | null = null
  /** The last swap queued (reloads and adoptions swap one at a time). */
  private swapping: Promise<void> = Promise.resolve()
  private readonly retiring = new Set<Promise<void>>()
  /** Every generation not yet closed (the current one and those waiting for their leases). */
  private readonly live = new Set<Generation>()
  private closing: Promise<void> | null = null
  /** Told of every swap: the snapshot replaced and the new one (the retro-hunt, retro-hunt.ts). */
  private readonly swapListeners: Array<(prev: SnapshotData, next: SnapshotData) => void> = []

  /** `build`: how `data` was obtained (buildSnapshot), shown by the sources status. */
  constructor (data: SnapshotData, poolOptions: ScoringPoolOptions, source: IntelSourceOptions, build: BuildInfo | null = null) {
    this.poolOptions = poolOptions
    this.source = source
    this.current = new Generation(data, new ScoringPool(data, poolOptions), build)
    this.live.add(this.current)
  }

  /** The snapshot new requests are scored on. */
  get snapshot (): Snapshot {
    return this.current.pool.snapshot
  }

  /** The current snapshot's header and bytes. */
  get data (): SnapshotData {
    return this.current.data
  }

  /** How the current snapshot was obtained: warm from the disk cache, or compiled (which sources were parsed). */
  get build (): BuildInfo | null {
    return this.current.build
  }

  /** Scoring threads (0 = inline). */
  get size (): number {
    return this.current.pool.size
  }

  /** Scoring tasks queued or running on the current pool. */
  get pending (): number {
    return this.current.pool.pending
  }

  /** Mean utilization of the current pool's scoring threads (0-1). */
  get utilization (): number {
    return this.current.pool.utilization
  }

  /** Shards of every pool this service starts (the same across reloads). */
  get shards (): number {
    return this.current.pool.shards
  }

  /** Waits for the workers of the current pool to start. */
  async ready (): Promise<void> {
    await this.current.pool.ready()
  }

  /** Leases the current pool; throws POOL_CLOSED once close() has begun. */
  lease (): PoolLease {
    if (this.closing !== null) throw new PoolClosedError()
    const gen = this.current
    gen.leases++
    let held = true
    return {
      pool: gen.pool,
      release: () => {
        if (!held) return
        held = false
        gen.release()
      }
    }
  }

  /** Rebuilds the snapshot off the main thread and swaps pools; concurrent calls share one reload. */
  async reload (force = false): Promise<ReloadResult> {
    if (this.closing !== null) throw new PoolClosedError()
    this.reloading ??= (async () => {
      try {
        return await this.exclusive(async () => {
          const built = await buildSnapshot(this.source, force)
          return await this.swap(built.data, { warm: built.warm, ms: built.ms, report: built.report })
        })
      } finally {
        this.reloading = null
      }
    })()
    return await this.reloading
  }

  /** Builds (or loads from the disk cache) the snapshot of the current sources without swapping to it. */
  async prepare (force = false): Promise<{ data: SnapshotData, info: BuildInfo }> {
    if (this.closing !== null) throw new PoolClosedError()
    const built = await buildSnapshot(this.source, force)
    return { data: built.data, info: { warm: built.warm, ms: built.ms, report: built.report } }
  }

  /**
   * Swaps to a snapshot obtained elsewhere (a fleet's published generation, or one a fleet's leader built and published
   * first) as a reload would: a new pool on it, then
   * the swap; after a reload in flight, never during one. A failure keeps the current snapshot.
   */
  async adopt (data: SnapshotData, build: BuildInfo | null): Promise<ReloadResult> {
    if (this.closing !== null) throw new PoolClosedError()
    return await this.exclusive(async () => await this.swap(data, build))
  }

  /** Runs `fn` after every swap queued before it, one at a time. */
  private async exclusive<T> (fn: () => Promise<T>): Promise<T> {
    const run = this.swapping.then(fn)
    this.swapping = run.then(() => {}, () => {})
    return await run
  }

  private async swap (data: SnapshotData, build: BuildInfo | null): Promise<ReloadResult> {
    const next = new ScoringPool(data, this.poolOptions)
    try {
      await next.ready()
    } catch (err) {
      await next.destroy()
      throw err
    }
    if (this.closing !== null) {
      await next.destroy()
      throw new PoolClosedError()
    }
    const prev = this.current.data
    this.retire(this.current)
    this.current = new Generation(data, next, build)
    this.live.add(this.current)
    if (prev.header.version !== next.snapshot.version) for (const fn of this.swapListeners) fn(prev, data)
    return { version: next.snapshot.version, data_timestamp: next.snapshot.dataTimestamp, warm: build?.warm ?? true, build_ms: Math.round(build?.ms ?? 0) }
  }

  /**
   * Calls `fn` after every swap with the snapshot replaced and the new one, a reload's or an adopted fleet
   * generation's (a swap that keeps the same version swaps nothing new).
   */
  onSwap (fn: (prev: SnapshotData, next: SnapshotData) => void): void {
    this.swapListeners.push(fn)
  }

  /** Closes a replaced generation once its leases are released. */
  private retire (gen: Generation): void {
    const done = gen.idle().then(async () => { await gen.pool.close() }).finally(() => {
      this.retiring.delete(done)
      this.live.delete(gen)
    })
    this.retiring.add(done)
  }

  /** Graceful and idempotent: refuses new leases, waits for held ones, drains and stops every pool. */
  async close (): Promise<void> {
    this.closing ??= (async () => {
      if (this.reloading !== null) await this.reloading.catch(() => {})
      await this.swapping
      this.retire(this.current)
      await Promise.all([...this.retiring])
    })()
    await this.closing
  }

  /** Now: fails queued and running tasks, stops every pool without waiting for leases. */
  async destroy (): Promise<void> {
    this.closing ??= Promise.resolve()
    await Promise.all([...this.live].map(async (gen) => await gen.pool.destroy()))
  }
}
