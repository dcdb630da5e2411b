/**
 * The retro-hunt part of the service (docs/OPERATIONS.md "Retro-hunt"): told of every snapshot swap
 * (IntelService.onSwap), it runs one pass (retro-pass.ts) per swap on a thread of its own (workers/retro-hunt.ts), so
 * no pass runs on the request path. At most one pass runs and one waits: swaps arriving while a pass runs are
 * merged into the waiting one (the oldest snapshot replaced, the newest swapped in), so the queue is bounded however
 * often feeds change. New hits go to `onHits` (webhook deliveries) and the counters /metrics reads.
 *
 * Fleet: service.ts calls onSwap only on the instance that leads (src/fleet/fleet.ts), so a pass runs once per
 * generation; should two ever run (a lead changing hands mid-pass), a hit is still recorded once (the store's unique
 * key on tenant, indicator and cause), and only the instance that recorded it hands it on.
 */
import { Worker } from 'node:worker_threads'
import type { StoreOptions } from '../config.ts'
import type { SnapshotData } from '../engine/index.ts'
import { kWorkerExecArgv, kWorkerShim, workerEntry } from '../worker-entry.ts'
import type { RetroPassResult, TenantHit } from './retro-pass.ts'

/** Longest a stopped pass may take to close its store before its thread is terminated, ms. */
const kStopGraceMs = 8_000
const kDayMs = 86_400_000

/** What the hunter logs. */
export interface RetroLogger {
  info: (obj: object, msg: string) => void
  error: (obj: object, msg: string) => void
}

/** Options of the hunter. */
export interface RetroHunterOptions {
  store: StoreOptions
  /** Lookback in days (0: the hunter runs no pass). */
  days: number
  /** History retention in days (0: kept forever): the lookback never reaches past it. */
  retentionDays: number
  /** Share of the time a pass works (100: without pauses). */
  dutyPercent: number
  logger: RetroLogger
  /** Told of the hits each pass recorded (not awaited past close). */
  onHits?: (hits: TenantHit[]) => Promise<void> | void
}

/** Counters for /metrics. */
export interface RetroHuntState {
  passes: number
  failedPasses: number
  hits: number
  running: boolean
  /** Result of the last pass that finished, or null. */
  last: Omit<RetroPassResult, 'hits'> & { hits: number } | null
}

/** Start of a lookback window of `days` days at `now`, never past the retention. */
export function lookbackStart (now: number, days: number, retentionDays: number): number {
  const since = now - days * kDayMs
  return retentionDays > 0 ? Math.max(since, now - retentionDays * kDayMs) : since
}

/** Runs a pass on its own thread; `stop` ends it early. */
export function passOnThread (store: StoreOptions, input: { prev: SnapshotData | null, next: SnapshotData, sinceMs: number, dutyPercent: number }): { result: Promise<RetroPassResult>, stop: () => Promise<void> } {
  const worker = new Worker(kWorkerShim, { execArgv: [...kWorkerExecArgv], workerData: { entry: workerEntry('retro-hunt'), store, input } })
  let settled = false
  let exited = false
  const exit = new Promise<void>((resolve) => worker.once('exit', () => { exited = true; resolve() }))
  const result = new Promise<RetroPassResult>((resolve, reject) => {
    worker.once('message', (msg: { ok: true, result: RetroPassResult } | { ok: false, message: string }) => {
      settled = true
      if (msg.ok) resolve(msg.result)
      else reject(new Error(`retro-hunt pass failed: ${msg.message}`))
    })
    worker.once('error', (err) => {
      settled = true
      reject(new Error('retro-hunt thread failed', { cause: err }))
    })
    void exit.then(() => { if (!settled) reject(new Error('retro-hunt thread exited before its result')) })
  })
  const stop = async (): Promise<void> => {
    if (exited) return
    worker.postMessage('stop')
    // The pass stops between parts and closes its store itself; a thread still busy after the grace is terminated.
    let timer: NodeJS.Timeout | undefined
    await Promise.race([exit, new Promise<void>((resolve) => { timer = setTimeout(resolve, kStopGraceMs) })])
    clearTimeout(timer)
    if (!exited) await worker.terminate()
  }
  return { result, stop }
}

/** Runs a pass per snapshot swap, one at a time. */
export class RetroHunter {
  readonly #o: RetroHunterOptions
  #pending: { prev: SnapshotData, next: SnapshotData } | null = null
  #running: { done: Promise<void>, stop: () => Promise<void> } | null = null
  #closed = false
  readonly #state: RetroHuntState = { passes: 0, failedPasses: 0, hits: 0, running: false, last: null }

  constructor (options: RetroHunterOptions) {
    this.#o = options
  }

  /** Counters and the last pass (for /metrics and the status). */
  state (): Readonly<RetroHuntState> {
    return this.#state
  }

  /** Whether swaps start passes (IOC_RETRO_HUNT_DAYS above 0). */
  get enabled (): boolean {
    return this.#o.days > 0
  }

  /** A snapshot swap: queues a pass from `prev` to `next` (merged with one already waiting). */
  onSwap (prev: SnapshotData, next: SnapshotData): void {
    if (this.#closed || !this.enabled) return
    this.#pending = this.#pending === null ? { prev, next } : { prev: this.#pending.prev, next }
    this.#kick()
  }

  /** Resolves once no pass runs or waits (tests, the CLI). */
  async idle (): Promise<void> {
    while (this.#running !== null) await this.#running.done
  }

  #kick (): void {
    if (this.#running !== null || this.#pending === null || this.#closed) return
    const { prev, next } = this.#pending
    this.#pending = null
    const sinceMs = lookbackStart(Date.now(), this.#o.days, this.#o.retentionDays)
    const pass = passOnThread(this.#o.store, { prev, next, sinceMs, dutyPercent: this.#o.dutyPercent })
    this.#state.running = true
    const done = pass.result.then(async (r) => {
      this.#state.passes++
      this.#state.hits += r.hits.length
      this.#state.last = { ...r, hits: r.hits.length }
      this.#o.logger.info({ retro_hunt: { ...this.#state.last, ms: Math.round(r.ms), version: next.header.version } }, 'retro-hunt pass finished')
      if (r.hits.length > 0 && this.#o.onHits !== undefined) await this.#o.onHits(r.hits)
    }, (err: unknown) => {
      this.#state.passes++
      this.#state.failedPasses++
      this.#o.logger.error({ err }, 'retro-hunt pass failed')
    }).catch((err: unknown) => {
      this.#o.logger.error({ err }, 'retro-hunt hits could not be handed on')
    }).finally(() => {
      this.#state.running = false
      this.#running = null
      this.#kick()
    })
    this.#running = { done, stop: pass.stop }
  }

  /**
   * No new pass starts; a running pass stops at its next part (its hits so far are kept) and closes its store, its
   * thread terminated after kStopGraceMs if it does not. Also what destroy does: terminating the thread at once could
   * cut a better-sqlite3 call, which aborts the process (docs/ARCHITECTURE.md "Lifecycle").
   */
  async close (): Promise<void> {
    this.#closed = true
    this.#pending = null
    const r = this.#running
    if (r === null) return
    await r.stop()
    await r.done
  }
}
