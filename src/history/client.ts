/**
 * Main-thread side of the history writer: forwards each request's envelope and encoded records to the
 * history worker thread (buffers transferred, nothing decoded here), tracks its state for admission and
 * health, and flushes it on shutdown.
 */
import { Worker } from 'node:worker_threads'
import { kWorkerShim, workerEntry } from '../worker-entry.ts'
import type { Logger } from 'pino'
import type { StoreOptions } from '../config.ts'
import type { SpareBuffers } from '../bytes/byte-sink.ts'
import type { HistoryEnvelope, HistorySink } from './types.ts'

const kRestartDelayMs = 1_000

/** Settings of the history writer. */
export interface HistoryClientOptions {
  store: StoreOptions
  spoolDir: string
  spoolLimit: number
  batch: number
  flushMs: number
  retentionDays: number
  /** Records waiting for the writer at which new requests are refused (503), so memory stays bounded. */
  maxBacklog: number
  logger: Logger
  /** Where the writer's stored part buffers go, for the scoring threads' next parts (ScoringPool's historySpares). */
  spares?: SpareBuffers
}

interface WorkerStatus { written: number, pending: number, spoolBytes: number, reason: string | null }
interface StatusMessage extends WorkerStatus { received: number }
/** What the writer sends: its status, readiness, replies to flush and close, and stored part buffers ('spare'). */
type WriterMessage = { type: string, id?: number, buffers?: ArrayBuffer[] } & StatusMessage

/** Starts the history worker and resolves once it has opened its store (or started spooling). */
export async function startHistory (options: HistoryClientOptions): Promise<HistoryClient> {
  const client = new HistoryClient(options)
  await client.started
  return client
}

/** The history writer as the request path sees it. */
export class HistoryClient implements HistorySink {
  readonly started: Promise<void>
  private worker!: Worker
  private readonly options: HistoryClientOptions
  private status: WorkerStatus = { written: 0, pending: 0, spoolBytes: 0, reason: null }
  /** Records posted to the current worker but not yet received by it (queued in its port). */
  private inTransit = 0
  /** Records posted to the current worker since it started. */
  private submitted = 0
  private alive = false
  private closing: Promise<void> | null = null
  private nextId = 1
  private readonly waiters = new Map<number, () => void>()
  private writtenBefore = 0

  constructor (options: HistoryClientOptions) {
    this.options = options
    this.started = this.spawn()
  }

  private async spawn (): Promise<void> {
    const { store, spoolDir, batch, flushMs, retentionDays } = this.options
    const worker = new Worker(kWorkerShim, { workerData: { entry: workerEntry('history'), store, spoolDir, batch, flushMs, retentionDays } })
    this.worker = worker
    this.submitted = 0
    this.inTransit = 0
    await new Promise<void>((resolve, reject) => {
      worker.on('message', (msg: WriterMessage) => {
        if (msg.type === 'status') {
          this.status = { written: this.writtenBefore + msg.written, pending: msg.pending, spoolBytes: msg.spoolBytes, reason: msg.reason }
          // Not 0: records posted after the worker sent this status are still queued for it, and while the worker
          // is busy (a slow or locked store) that queue is the backlog the health check must show.
          this.inTransit = this.submitted - msg.received
        } else if (msg.type === 'spare') {
          for (const b of msg.buffers ?? []) this.options.spares?.give(b)
        } else if (msg.type === 'ready') {
          this.alive = true
          resolve()
        } else if ((msg.type === 'flushed' || msg.type === 'closed') && msg.id !== undefined) {
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
          // Records already in its spool are safe on disk; a new worker replays them.
          this.options.logger.error({ code }, 'history worker exited; restarting')
          this.writtenBefore = this.status.written
          setTimeout(() => {
            if (this.closing !== null) return // closed meanwhile: a new worker would outlive close()
            this.spawn().catch((err: unknown) => this.options.logger.error({ err }, 'history worker restart failed'))
          }, kRestartDelayMs).unref()
        }
      })
    })
  }

  submit (envelope: HistoryEnvelope, parts: Uint8Array[]): void {
    if (!this.alive) throw new Error('history writer is not running')
    this.inTransit += envelope.count
    this.submitted += envelope.count
    this.worker.postMessage({ type: 'records', envelope, parts }, parts.map((p) => p.buffer as ArrayBuffer))
  }

  refusal (): string | null {
    if (this.closing !== null) return 'service is shutting down'
    if (!this.alive) return 'history writer is restarting'
    if (this.status.spoolBytes >= this.options.spoolLimit) return 'history spool is full; retry later'
    if (this.status.pending + this.inTransit >= this.options.maxBacklog) return 'history writer is behind; retry shortly'
    return null
  }

  state (): ReturnType<HistorySink['state']> {
    const status = !this.alive ? 'down' : this.status.spoolBytes > 0 ? 'spooling' : 'ok'
    return {
      status,
      reason: status === 'down' ? 'history writer is not running' : this.status.reason,
      pending: this.status.pending + this.inTransit,
      written: this.status.written,
      spoolBytes: this.status.spoolBytes
    }
  }

  private async request (type: 'flush' | 'close'): Promise<void> {
    if (!this.alive) return
    const id = this.nextId++
    await new Promise<void>((resolve) => {
      this.waiters.set(id, resolve)
      this.worker.postMessage({ type, id })
    })
  }

  async flush (): Promise<void> {
    await this.request('flush')
  }

  async close (): Promise<void> {
    this.closing ??= (async () => {
      await this.request('close')
      await this.worker.terminate()
    })()
    await this.closing
  }
}
