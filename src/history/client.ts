/**
 * Main-thread side of history: each request's envelope and encoded records go into the journal (journal.ts, group
 * commit) before the request is answered; the history writer thread drains the journal into the store. This side
 * tracks the writer's state for admission and health, restarts it when it dies (it replays the journal from the
 * store's position, so nothing is lost or written twice), and flushes it on shutdown.
 *
 * Lifecycle: startHistory (start), close() (graceful: the writer copies the journal into the store, then stops) and
 * destroy(err) (now: see destroy). Both are idempotent; a write after either is refused.
 */
import { Worker } from 'node:worker_threads'
import { kWorkerExecArgv, kWorkerShim, workerEntry } from '../worker-entry.ts'
import type { Logger } from 'pino'
import type { StoreOptions } from '../config.ts'
import type { SpareBuffers } from '../bytes/byte-sink.ts'
import { HistoryClosedError, HistoryCommitError } from '../errors.ts'
import { Journal, type Durability } from './journal.ts'
import { kEagerBytes, SharedDurable } from './journal-reader.ts'
import type { HistoryEnvelope, HistorySink, HistoryState } from './types.ts'

const kRestartDelayMs = 1_000
/**
 * Longest destroy() waits for the writer to reach a transaction boundary before terminating it: longer than one
 * batch's transaction, including SQLite's 5 s busy timeout (src/store/sqlite.ts).
 */
const kStopTimeoutMs = 8_000
/** Part buffers at least this large go back to the scoring threads once journalled (a bulk chunk's part). */
const kSpareMinBytes = 64 * 1024

/** Settings of the history writer. */
export interface HistoryClientOptions {
  store: StoreOptions
  /** Folder of a spool left by a version before the journal (replayed once at start), and of history.rejected. */
  legacySpoolDir: string
  journalDir: string
  /** Journal bytes not yet in the store at which new requests are refused (503). */
  journalLimit: number
  journalSegmentBytes: number
  /** Most fill bytes written ahead of the journal's frames at a time (journal.ts); the journal's default when absent. */
  journalPreallocateBytes?: number
  durability: Durability
  asyncWindowMs: number
  asyncWindowBytes: number
  /** Longest a request waits for its history to be synced before it is answered 503, in ms. */
  commitTimeoutMs: number
  batch: number
  flushMs: number
  retentionDays: number
  /** Records journalled and not yet in the store at which new requests are refused (503). */
  maxBacklog: number
  logger: Logger
  /** Where journalled part buffers go, for the scoring threads' next parts (ScoringPool's historySpares). */
  spares?: SpareBuffers
  /** Longest destroy() waits for the writer to end its transaction before terminating it, in ms (default 8 s). */
  stopTimeoutMs?: number
}

interface StatusMessage { written: number, writes: number, writeSeconds: number, committed: number, legacySpoolBytes: number, reason: string | null }
/** What the writer sends: its status, readiness, and replies to flush and close. */
type WriterMessage = { type: string, id?: number } & StatusMessage

/** Opens the journal, starts the history worker and resolves once it runs. */
export async function startHistory (options: HistoryClientOptions): Promise<HistoryClient> {
  const journal = await Journal.open({
    dir: options.journalDir,
    limit: options.journalLimit,
    segmentBytes: options.journalSegmentBytes,
    preallocateBytes: options.journalPreallocateBytes,
    durability: options.durability,
    asyncWindowMs: options.asyncWindowMs,
    asyncWindowBytes: options.asyncWindowBytes
  })
  const client = new HistoryClient(options, journal)
  try {
    await client.started
  } catch (err) {
    await journal.close()
    throw err
  }
  return client
}

/** History as the request path sees it. */
export class HistoryClient implements HistorySink {
  started: Promise<void>
  private worker!: Worker
  private readonly options: HistoryClientOptions
  private readonly journal: Journal
  private status: StatusMessage = { written: 0, writes: 0, writeSeconds: 0, committed: 0, legacySpoolBytes: 0, reason: null }
  private alive = false
  private closing: Promise<void> | null = null
  private destroying: Promise<void> | null = null
  private nextId = 1
  private readonly waiters = new Map<number, () => void>()
  private writtenBefore = 0
  /** Store transactions and their seconds of writer threads that were replaced. */
  private writesBefore = 0
  private writeSecondsBefore = 0
  /** Times the writer thread was restarted after dying. */
  restarts = 0
  /** The durable end and the writer's wake flag, shared with each writer thread (journal-reader.ts). */
  private readonly shared = new SharedDurable()
  /** The durable end last posted to the writer. */
  private told = 0

  constructor (options: HistoryClientOptions, journal: Journal) {
    this.options = options
    this.journal = journal
    this.shared.publish(journal.durable)
    journal.onDurable = (end) => {
      // The writer reads the end from the shared state on its next pass; it is told only when it sleeps with nothing
      // scheduled, or when a batch's worth waits (it then writes at once instead of at its flush interval).
      if (this.shared.publish(end) || end - this.told >= kEagerBytes) this.tell(end)
    }
    this.started = this.spawn()
  }

  private async spawn (): Promise<void> {
    const { store, legacySpoolDir, batch, flushMs, retentionDays } = this.options
    const worker = new Worker(kWorkerShim, {
      execArgv: [...kWorkerExecArgv],
      workerData: {
        entry: workerEntry('history'),
        store,
        legacySpoolDir,
        journalDir: this.journal.dir,
        journalId: this.journal.id,
        durable: this.journal.durable,
        shared: this.shared.buffer,
        batch,
        flushMs,
        retentionDays
      }
    })
    this.worker = worker
    await new Promise<void>((resolve, reject) => {
      worker.on('message', (msg: WriterMessage) => {
        if (msg.type === 'status') {
          this.logStoreChange(this.status.reason, msg.reason)
          this.status = { ...msg, written: this.writtenBefore + msg.written, writes: this.writesBefore + msg.writes, writeSeconds: this.writeSecondsBefore + msg.writeSeconds }
          this.journal.committed(msg.committed)
        } else if (msg.type === 'ready') {
          this.alive = true
          // Groups synced while it started: it read the durable end from its workerData, maybe before them.
          this.tell(this.journal.durable)
          resolve()
        } else if ((msg.type === 'flushed' || msg.type === 'closed' || msg.type === 'stopped') && msg.id !== undefined) {
          this.waiters.get(msg.id)?.()
          this.waiters.delete(msg.id)
        }
      })
      worker.once('error', (err) => {
        this.options.logger.error({ err }, 'history worker failed')
        if (!this.alive) reject(err)
      })
      worker.once('exit', (code) => {
        const wasAlive = this.alive
        this.alive = false
        for (const w of this.waiters.values()) w()
        this.waiters.clear()
        if (this.closing === null && wasAlive) {
          // Records are in the journal: a new worker writes what the store does not have yet.
          this.options.logger.error({ code }, 'history worker exited; restarting')
          this.writtenBefore = this.status.written
          this.writesBefore = this.status.writes
          this.writeSecondsBefore = this.status.writeSeconds
          setTimeout(() => {
            if (this.closing !== null) return // closed meanwhile: a new worker would outlive close()
            this.restarts++
            this.started = this.spawn()
            this.started.catch((err: unknown) => this.options.logger.error({ err }, 'history worker restart failed'))
          }, kRestartDelayMs).unref()
        }
      })
    })
  }

  /**
   * Journals one request's history; resolves once it is durable (or, in async mode, queued within the window).
   * The parts' buffers are not kept: once written, large ones go back to the scoring threads.
   */
  async submit (envelope: HistoryEnvelope, parts: Uint8Array[]): Promise<void> {
    if (this.destroying !== null) throw new HistoryClosedError()
    const spares = this.options.spares
    const done = (): void => {
      if (spares === undefined) return
      for (const p of parts) if (p.buffer instanceof ArrayBuffer && p.buffer.byteLength >= kSpareMinBytes) spares.give(p.buffer)
    }
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new HistoryCommitError('history journal write took too long')), this.options.commitTimeoutMs)
    })
    try {
      await Promise.race([this.journal.append(envelope, parts, done), timeout])
    } finally {
      clearTimeout(timer)
    }
  }

  refusal (): string | null {
    if (this.closing !== null) return 'service is shutting down'
    const j = this.journal.refusal()
    if (j !== null) return j
    if (this.journal.pendingRecords >= this.options.maxBacklog) return 'history writer is behind; retry shortly'
    return null
  }

  state (): HistoryState {
    const journalBytes = this.journal.bytes
    const status = !this.alive ? 'down' : this.status.reason !== null ? 'store_failing' : 'ok'
    return {
      status,
      reason: status === 'down' ? 'history writer is not running (records wait in the journal)' : this.status.reason,
      pending: this.journal.pendingRecords,
      written: this.status.written,
      legacySpoolBytes: this.status.legacySpoolBytes,
      journalError: this.journal.writeFailure(),
      journalBytes,
      journalLimit: this.options.journalLimit,
      restarts: this.restarts,
      storeWrites: this.status.writes,
      storeWriteSeconds: this.status.writeSeconds
    }
  }

  /**
   * One log line when the store starts failing (warn, with the writer's reason: an error code, never a message that
   * could hold a connection string) or fails for another reason, and one when it takes writes again (info); the
   * writer's retries in between log nothing, so a long outage does not flood the log.
   */
  private logStoreChange (before: string | null, after: string | null): void {
    if (after === before) return
    if (after !== null) this.options.logger.warn({ reason: after, pending: this.journal.pendingRecords }, 'history store failing; records wait in the journal')
    else this.options.logger.info({ pending: this.journal.pendingRecords }, 'history store writes again')
  }

  /** Tells a running writer the durable end now. */
  private tell (end: number): void {
    if (!this.alive) return
    this.told = end
    this.worker.postMessage({ type: 'durable', end })
  }

  /** Posts a request to the writer and waits for its reply (or the thread's exit). */
  private async request (type: 'flush' | 'close' | 'stop'): Promise<void> {
    if (!this.alive) return
    const id = this.nextId++
    await new Promise<void>((resolve) => {
      this.waiters.set(id, resolve)
      this.worker.postMessage({ type, id })
    })
  }

  /** Waits until everything journalled so far is in the store (or the store failed on it). */
  async flush (): Promise<void> {
    await this.journal.settle()
    this.tell(this.journal.durable)
    await this.request('flush')
  }

  /** The writer thread, for tests that kill it. */
  get thread (): Worker {
    return this.worker
  }

  /** Graceful: queued journal groups are synced, the writer copies what it can into the store, then the thread stops. */
  async close (): Promise<void> {
    this.closing ??= (async () => {
      // Queued groups (async mode) are synced first; then the writer writes what it can, the rest stays journalled.
      await this.journal.close()
      this.tell(this.journal.durable)
      await this.request('close')
      await this.worker.terminate()
    })()
    await this.closing
  }

  /**
   * Now: writes are refused from here on (HISTORY_CLOSED); what the journal has queued is synced (in async mode those
   * requests were answered already) and the journal closed; the writer ends the store transaction it is in, starts no
   * other and closes the store, then its thread is terminated. Terminating a thread inside a SQLite call can abort
   * the process (better-sqlite3), so the thread is terminated only once it says it stopped, or after stopTimeoutMs
   * (a transaction stuck longer: the store is PostgreSQL waiting on a lock, or something is badly wrong). Nothing
   * acknowledged is lost: whatever is not in the store stays in the journal, which the next start replays once.
   * Idempotent; a close() running or to come resolves once this is done.
   */
  async destroy (err?: Error): Promise<void> {
    if (this.destroying === null) {
      const graceful = this.closing
      this.destroying = this.stopNow(graceful, err)
      // No restart from here on; close() resolves once this is done.
      this.closing = this.destroying
    }
    await this.destroying
  }

  private async stopNow (graceful: Promise<void> | null, err: Error | undefined): Promise<void> {
    if (err !== undefined) this.options.logger.warn({ err }, 'history stopping now; records not yet in the store stay in the journal')
    const deadline = timeout(this.options.stopTimeoutMs ?? kStopTimeoutMs)
    try {
      await Promise.race([this.journal.close(), deadline.expired])
      if (this.alive) await Promise.race([this.request('stop'), deadline.expired])
      await this.worker.terminate()
      // A graceful close that was running ends with the thread (its waiters are released on exit).
      await graceful?.catch(() => {})
    } finally {
      deadline.clear()
    }
  }
}

/** A promise resolved after `ms` (and a way to cancel the timer). */
function timeout (ms: number): { expired: Promise<void>, clear: () => void } {
  let timer: NodeJS.Timeout | undefined
  const expired = new Promise<void>((resolve) => { timer = setTimeout(resolve, ms) })
  return { expired, clear: () => clearTimeout(timer) }
}
