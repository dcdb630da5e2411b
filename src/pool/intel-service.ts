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
  /** How its snapshot was obtained (null: handed in without build facts). */
  readonly build: BuildInfo | null
  leases = 0
  private drained: (() => void) | null = null

  constructor (pool: ScoringPool, build: BuildInfo | null) {
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
    this.current = new Generation(new ScoringPool(data, poolOptions), build)
    this.live.add(this.current)
  }

  /** The snapshot new requests are scored on. */
  get snapshot (): Snapshot {
    return this.current.pool.snapshot
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
        const built = await buildSnapshot(this.source, force)
        const next = new ScoringPool(built.data, this.poolOptions)
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
        const prev = this.current.pool.snapshot.data
        this.retire(this.current)
        this.current = new Generation(next, { warm: built.warm, ms: built.ms, report: built.report })
        this.live.add(this.current)
        if (prev.header.version !== next.snapshot.version) for (const fn of this.swapListeners) fn(prev, next.snapshot.data)
        return { version: next.snapshot.version, data_timestamp: next.snapshot.dataTimestamp, warm: built.warm, build_ms: Math.round(built.ms) }
      } finally {
        this.reloading = null
      }
    })()
    return await this.reloading
  }

  /**
   * Calls `fn` after every swap with the snapshot replaced and the new one (a reload that keeps the same version swaps
   * nothing new). A snapshot generation swapped in by other means (a fleet's) should call it the same way.
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
