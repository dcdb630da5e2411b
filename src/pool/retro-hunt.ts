/**
 * The retro-hunt part of the service (docs/OPERATIONS.md "Retro-hunt"): told of every snapshot swap
 * (IntelService.onSwap), it runs one pass (retro-pass.ts) per swap on a thread of its own (workers/retro-hunt.ts), so
 * no pass runs on the request path. At most one pass runs and one waits: swaps arriving while a pass runs are
 * merged into the waiting one (the oldest snapshot replaced, the newest swapped in), so the queue is bounded however
 * often feeds change. New hits go to `onHits` (webhook deliveries) and the counters /metrics reads.
 *
 * Fleet: service.ts calls onSwap only on the instance that leads (src/fleet/fleet.ts), so a pass runs once per
 * generation; should two ever run (a lead changing hands mid-pass), a hit is still recorded once (the store's unique
 * key on tenant, indicator and cause), and handed on once (WebhookStore.handOnHits), by whichever instance gets to it.
 */
import { Worker } from 'node:worker_threads'
import type { StoreOptions } from '../config.ts'
import type { HuntedSnapshot } from '../store/index.ts'
import type { SnapshotData } from '../engine/index.ts'
import { kWorkerExecArgv, kWorkerShim, workerEntry } from '../worker-entry.ts'
import type { RetroPassResult, TenantHit } from './retro-pass.ts'
import { restoreThreadPriority } from './thread-priority.ts'

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
  /** Whether a pass's thread runs at the lowest CPU priority (default true; false: normal priority, paced alone). */
  lowPriority?: boolean
  logger: RetroLogger
  /** Told of the hits each pass recorded (not awaited past close). */
  onHits?: (hits: TenantHit[]) => Promise<void> | void
  /** Where a pass owed after a stop or a crash is kept (the store's retroHunt); without it none is kept. */
  owed?: OwedPasses
  /** The snapshot last hunted with, where it can still be read (the intel cache), or null: a start hunts from it. */
  previous?: (seen: HuntedSnapshot) => Promise<SnapshotData | null>
}

/** The store's note of a pass owed, and of the snapshot last hunted with (src/store/retro-hunt.ts). */
export interface OwedPasses {
  noteOwed: (sinceMs: number, now?: number) => Promise<number>
  owed: () => Promise<number | null>
  clearOwed: (note: number) => Promise<void>
  hunted: () => Promise<HuntedSnapshot | null>
  noteHunted: (seen: HuntedSnapshot) => Promise<void>
}

/** A pass to run: from `prev` to `next`, or over every listing of `next` when prev is null; `owedSince` widens its lookback. */
interface PendingPass { prev: SnapshotData | null, next: SnapshotData, owedSince: number | null }

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

/** Runs a pass on its own thread, at the lowest CPU priority unless `lowPriority` is false; `stop` ends it early. */
export function passOnThread (store: StoreOptions, input: { prev: SnapshotData | null, next: SnapshotData, sinceMs: number, dutyPercent: number }, lowPriority = true): { result: Promise<RetroPassResult>, stop: () => Promise<void> } {
  const worker = new Worker(kWorkerShim, { execArgv: [...kWorkerExecArgv], workerData: { entry: workerEntry('retro-hunt'), store, input, lowPriority } })
  let settled = false
  let exited = false
  const exit = new Promise<void>((resolve) => worker.once('exit', () => { exited = true; resolve() }))
  /** The thread's id once it posted it (it runs at the lowest priority); null before, or where it has none. */
  let tid: number | null = null
  let stopping = false
  const result = new Promise<RetroPassResult>((resolve, reject) => {
    worker.on('message', (msg: { tid: number } | { ok: true, result: RetroPassResult } | { ok: false, message: string }) => {
      if ('tid' in msg) {
        tid = msg.tid
        if (stopping) restoreThreadPriority(tid)
        return
      }
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
    // A stopping pass runs at normal priority where this process may raise it: at the lowest it could wait behind
    // busy threads for most of the grace (thread-priority.ts restoreThreadPriority).
    stopping = true
    if (tid !== null) restoreThreadPriority(tid)
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
  #pending: PendingPass | null = null
  /** A pass of this process failed: the next one runs over every listing (what it missed is not known). */
  #wholeNext = false
  #running: { done: Promise<void>, stop: () => Promise<void> } | null = null
  /** The newest snapshot a swap told of (a pass queued at a start ends there, not at an older one). */
  #latest: SnapshotData | null = null
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
    this.#latest = next
    this.#pending = this.#pending === null ? { prev, next, owedSince: null } : { ...this.#pending, next }
    this.#kick()
  }

  /**
   * Runs a pass over every listing of `current` when the store says one is owed: a pass was cut by a stop, a crash
   * or a failure, or one waited when the service stopped. The pass's lookback reaches back to where the owed pass's
   * did (within the retention). Failing that, when `current` is not the snapshot the last finished pass hunted with,
   * the intel changed while no pass watched (a file feed edited while the service was stopped, a new release's data):
   * a pass runs from that snapshot, read from the intel cache (`previous`), as a swap's would, or over every listing
   * when it is gone. The first start with no snapshot noted takes `current` as where hunting starts. Called once the
   * service runs, and when an instance of a fleet takes the lead.
   */
  async resumeOwed (current: SnapshotData): Promise<boolean> {
    const store = this.#o.owed
    if (this.#closed || !this.enabled || store === undefined) return false
    let since: number | null
    let hunted: HuntedSnapshot | null
    try {
      since = await store.owed()
      hunted = since === null ? await store.hunted() : null
    } catch (err) {
      this.#o.logger.error({ err }, 'retro-hunt: could not read whether a pass is owed')
      return false
    }
    if (this.#closed) return false
    const version = current.header.version
    let prev: SnapshotData | null = null
    if (since === null) {
      if (hunted?.version === version) return false
      if (hunted === null) {
        await this.#noteHunted(current)
        return false
      }
      prev = await this.#o.previous?.(hunted).catch(() => null) ?? null
      if (this.#closed) return false
    }
    const waiting = this.#pending
    const next = waiting?.next ?? this.#latest ?? current
    const owedSince = since === null ? waiting?.owedSince ?? null : Math.min(since, waiting?.owedSince ?? since)
    // From the snapshot last hunted with, it covers a swap that waits too (its raised keys are among these).
    this.#pending = { prev, next, owedSince }
    if (since !== null) {
      this.#o.logger.info({ retro_hunt: { owed_since: new Date(since).toISOString() } }, 'retro-hunt: a pass owed since the last stop runs over every listing')
    } else {
      this.#o.logger.info({ retro_hunt: { hunted: hunted?.version, version, whole: prev === null } },
        `retro-hunt: the snapshot changed since the last pass; a pass runs ${prev === null ? 'over every listing (the last one hunted is gone from the intel cache)' : 'from the last one hunted'}`)
    }
    this.#kick()
    return true
  }

  /** Resolves once no pass runs or waits (tests, the CLI). */
  async idle (): Promise<void> {
    while (this.#running !== null) await this.#running.done
  }

  #kick (): void {
    if (this.#running !== null || this.#pending === null || this.#closed) return
    const { next, owedSince } = this.#pending
    const prev = this.#wholeNext ? null : this.#pending.prev
    this.#pending = null
    this.#wholeNext = false
    const now = Date.now()
    const sinceMs = this.#sinceMs(now, owedSince)
    // Noted before the pass's result is awaited and cleared only after it finished uncut, so a stop, a crash or a
    // failure leaves it for the next start (resumeOwed).
    const noted = this.#note(sinceMs, now)
    const pass = passOnThread(this.#o.store, { prev, next, sinceMs, dutyPercent: this.#o.dutyPercent }, this.#o.lowPriority ?? true)
    this.#state.running = true
    const done = pass.result.then(async (r) => {
      this.#state.passes++
      this.#state.hits += r.hits.length
      this.#state.last = { ...r, hits: r.hits.length }
      this.#o.logger.info({ retro_hunt: { ...this.#state.last, ms: Math.round(r.ms), version: next.header.version, whole: prev === null } }, 'retro-hunt pass finished')
      const note = await noted
      // Hits are recorded as not yet handed on, so a crash before this hands them on at the next start all the same
      // (WebhookStore.handOnHits); handing them on now only spares them the wait for the sender's next poll.
      if (r.hits.length > 0 && this.#o.onHits !== undefined) await this.#o.onHits(r.hits)
      if (r.cut !== true) {
        await this.#noteHunted(next)
        if (note !== null) await this.#clear(note)
      }
    }, (err: unknown) => {
      this.#state.passes++
      this.#state.failedPasses++
      this.#wholeNext = true
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

  /** The lookback start of a pass at `now`, widened to `owedSince` (never past the retention). */
  #sinceMs (now: number, owedSince: number | null): number {
    const since = lookbackStart(now, this.#o.days, this.#o.retentionDays)
    if (owedSince === null || owedSince >= since) return since
    return this.#o.retentionDays > 0 ? Math.max(owedSince, now - this.#o.retentionDays * kDayMs) : owedSince
  }

  /** Clears the debt a pass noted when it started (it finished uncut), unless noted again since; a failure is logged. */
  async #clear (note: number): Promise<void> {
    try {
      await this.#o.owed?.clearOwed(note)
    } catch (err) {
      this.#o.logger.error({ err }, 'retro-hunt: could not clear the owed pass (the next start runs it again)')
    }
  }

  /** Notes the snapshot a pass finished with; a failure is logged (the next start may then hunt once more). */
  async #noteHunted (snap: SnapshotData): Promise<void> {
    try {
      await this.#o.owed?.noteHunted({ version: snap.header.version, inputKey: snap.header.inputKey })
    } catch (err) {
      this.#o.logger.error({ err }, 'retro-hunt: could not note the snapshot hunted with (the next start runs a pass over every listing)')
    }
  }

  /** Notes a pass owed from `sinceMs`: the note's number, or null (logged) when the store could not. */
  async #note (sinceMs: number, now: number): Promise<number | null> {
    if (this.#o.owed === undefined) return null
    try {
      return await this.#o.owed.noteOwed(sinceMs, now)
    } catch (err) {
      this.#o.logger.error({ err }, 'retro-hunt: could not note the pass as owed (a stop during it will not resume it)')
      return null
    }
  }

  /**
   * No new pass starts; a running pass gets its thread's normal priority back (passOnThread's stop), stops at its next
   * part (its hits so far are kept) and closes its store, its thread terminated after kStopGraceMs if it does not.
   * Also what destroy does: terminating the thread at once could cut a better-sqlite3 call, which aborts the process
   * (docs/ARCHITECTURE.md "Lifecycle").
   */
  async close (): Promise<void> {
    this.#closed = true
    const waiting = this.#pending
    this.#pending = null
    // A pass that waited is owed to the next start (a running one noted itself when it started).
    if (waiting !== null) await this.#note(this.#sinceMs(Date.now(), waiting.owedSince), Date.now())
    const r = this.#running
    if (r === null) return
    await r.stop()
    await r.done
  }
}
