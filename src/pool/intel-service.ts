/**
 * Owns the current intel snapshot and the scoring pool mapped to it. A reload builds the new snapshot on a
 * worker thread, starts a new pool on it, and swaps: requests already running finish on the old pool
 * (one request never mixes snapshots), and the old pool closes once drained. Cache keys carry the snapshot
 * version, so no verdict from the old data is served after the swap.
 */
import type { SnapshotData } from '../engine/index.ts'
import { buildSnapshot, type IntelSourceOptions } from '../intel/index.ts'
import { ScoringPool, type ScoringPoolOptions } from './scoring-pool.ts'

/** Result of a reload. */
export interface ReloadResult { version: string, data_timestamp: string, warm: boolean, build_ms: number }

/** The current pool and snapshot, and the reload procedure. */
export class IntelService {
  private current: ScoringPool
  private readonly poolOptions: ScoringPoolOptions
  private readonly source: IntelSourceOptions
  private reloading: Promise<ReloadResult> | null = null
  private readonly retiring = new Set<Promise<void>>()

  constructor (data: SnapshotData, poolOptions: ScoringPoolOptions, source: IntelSourceOptions) {
    this.poolOptions = poolOptions
    this.source = source
    this.current = new ScoringPool(data, poolOptions)
  }

  /** The pool new requests use. */
  get pool (): ScoringPool {
    return this.current
  }

  /** Waits for the workers of the current pool to start. */
  async ready (): Promise<void> {
    await this.current.ready()
  }

  /** Rebuilds the snapshot off the main thread and swaps pools; concurrent calls share one reload. */
  async reload (force = false): Promise<ReloadResult> {
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
        const old = this.current
        this.current = next
        const retiring = old.close().finally(() => { this.retiring.delete(retiring) })
        this.retiring.add(retiring)
        return { version: next.snapshot.version, data_timestamp: next.snapshot.dataTimestamp, warm: built.warm, build_ms: Math.round(built.ms) }
      } finally {
        this.reloading = null
      }
    })()
    return await this.reloading
  }

  /** Drains and stops every pool. */
  async close (): Promise<void> {
    if (this.reloading !== null) await this.reloading.catch(() => {})
    await Promise.all([this.current.close(), ...this.retiring])
  }
}
