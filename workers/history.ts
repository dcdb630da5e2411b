/**
 * The history writer thread. It receives each request's envelope plus the scoring workers' encoded parts, batches
 * them by size (whole parts) and time, and writes each batch in one store transaction (parts + usage counters).
 * When the store fails, batches go to an fsynced on-disk spool and are replayed in order once it recovers;
 * while a backlog exists, new batches queue behind it so order is kept.
 */
import { parentPort, workerData } from 'node:worker_threads'
import { openStore, partRows, type HistoryPart, type HistoryRow, type Store, type StoreOptions } from '../src/store/index.ts'
import { historyParts } from '../src/history/codec.ts'
import type { HistoryEnvelope } from '../src/history/types.ts'
import { Spool } from '../src/history/spool.ts'

/** Settings from the main thread. */
export interface HistoryWorkerData {
  store: StoreOptions
  spoolDir: string
  batch: number
  flushMs: number
  retentionDays: number
}

/** Messages the worker accepts. */
export type HistoryMessage =
  | { type: 'records', envelope: HistoryEnvelope, parts: Uint8Array[] }
  | { type: 'flush', id: number }
  | { type: 'close', id: number }

const cfg = workerData as HistoryWorkerData
const port = parentPort
if (port === null) throw new Error('history worker must run in a worker thread')
const spool = new Spool(cfg.spoolDir)
/**
 * Records held in memory before the excess goes to the spool. Admission refuses new requests well before this
 * (HistoryClient's backlog bound), so it is only a last guard for this thread's memory.
 */
const kMaxInMemory = Math.max(cfg.batch * 10, 1_000_000)
const kRetryMinMs = 100
const kRetryMaxMs = 5_000
const kPurgeEveryMs = 3_600_000

let store: Store | null = null
/** Parts waiting for the store, in arrival order, and the records they hold. */
let pending: HistoryPart[] = []
let pendingRecords = 0
/** Rows the store refused as invalid: set aside in the spool folder instead of blocking everything behind them. */
let rejected = 0
let written = 0
/** Records received since start: the client subtracts it from what it posted to know what is still in transit. */
let received = 0
let lastError: string | null = null
let retryMs = kRetryMinMs
let timer: NodeJS.Timeout | null = null
let pumping: Promise<void> | null = null

function status (): void {
  port!.postMessage({
    type: 'status',
    written,
    received,
    rejected,
    pending: pendingRecords,
    spoolBytes: spool.backlog,
    reason: spool.backlog > 0 ? `history store unavailable, spooling to disk${lastError === null ? '' : `: ${lastError}`}` : null
  })
}

function expand (envelope: HistoryEnvelope, parts: Uint8Array[]): void {
  const at = pending.length
  // A part this version cannot read is set aside as it came, for an operator; the rest of the request is kept.
  historyParts(envelope, parts, pending, (bad) => spool.reject([bad]))
  for (let i = at; i < pending.length; i++) pendingRecords += (pending[i] as HistoryPart).count
}

/** Takes the oldest parts holding about `records` records (whole parts) off the pending list. */
function takePending (records: number): HistoryPart[] {
  let n = 0
  let k = 0
  while (k < pending.length && n < records) n += (pending[k++] as HistoryPart).count
  const batch = k === pending.length ? pending : pending.slice(0, k)
  pending = k === pending.length ? [] : pending.slice(k)
  pendingRecords -= n
  return batch
}

function countOf (batch: readonly HistoryPart[]): number {
  let n = 0
  for (const p of batch) n += p.count
  return n
}

/** A store error that retrying cannot fix (the rows themselves are refused). */
function isPoison (err: unknown): boolean {
  return (err as { code?: string }).code === 'INVALID_RECORD'
}

async function writeOrSpool (batch: HistoryPart[]): Promise<boolean> {
  if (store === null) throw new Error('store is not open')
  try {
    await store.writeHistoryParts(batch)
    written += countOf(batch)
    return true
  } catch (err) {
    if (isPoison(err)) {
      setAside(partRows(batch))
      return true
    }
    lastError = (err as { code?: string }).code ?? 'write failed'
    spool.append(partRows(batch))
    return false
  } finally {
    handBack(batch)
  }
}

/** Part buffers at least this large go back to the main thread once stored (a bulk chunk's part; not a single's). */
const kSpareMinBytes = 64 * 1024

/**
 * Transfers the buffers of parts that are stored (or spooled, as rows) back to the main thread, which hands them to
 * the scoring threads for the next chunks' parts (why: SpareBuffers; about 4 MB per 10,000-indicator bulk).
 */
function handBack (batch: readonly HistoryPart[]): void {
  const buffers = new Set<ArrayBuffer>()
  for (const p of batch) if (p.part.buffer instanceof ArrayBuffer && p.part.buffer.byteLength >= kSpareMinBytes) buffers.add(p.part.buffer)
  if (buffers.size === 0) return
  const list = [...buffers]
  port!.postMessage({ type: 'spare', buffers: list }, list)
}

function setAside (batch: readonly HistoryRow[]): void {
  rejected += batch.length
  spool.reject(batch)
}

/** Moves every pending record to the spool, in order, in batch-sized frames. */
function spillPending (): void {
  while (pending.length > 0) spool.append(partRows(takePending(cfg.batch)))
}

/** Writes the spool backlog, then pending batches; on a failure everything pending goes to the spool. */
async function pumpOnce (): Promise<void> {
  if (store === null) {
    try {
      store = await openStore(cfg.store)
    } catch (err) {
      lastError = (err as { code?: string }).code ?? 'store unavailable'
      spillPending()
      scheduleRetry()
      return
    }
  }
  while (spool.backlog > 0) {
    const frame = spool.peek()
    if (frame === null) break
    try {
      await store.writeHistoryRows(frame.records)
    } catch (err) {
      if (isPoison(err)) {
        setAside(frame.records)
        spool.commit(frame.next)
        continue
      }
      lastError = (err as { code?: string }).code ?? 'write failed'
      // Keep order: everything newer waits behind the backlog, on disk.
      spillPending()
      scheduleRetry()
      return
    }
    written += frame.records.length
    spool.commit(frame.next)
  }
  lastError = spool.backlog > 0 ? lastError : null
  retryMs = kRetryMinMs
  while (pending.length > 0) {
    const batch = takePending(cfg.batch)
    if (!await writeOrSpool(batch)) {
      spillPending()
      scheduleRetry()
      return
    }
  }
}

async function pump (): Promise<void> {
  // A loop, not a single wait: several callers can wait on the same pass, and only one of them may start the next;
  // two passes at once would both replay the spool's oldest frame (duplicates) and interleave batches.
  for (let running = pumping; running !== null; running = pumping) {
    await running
    if (pending.length === 0 && spool.backlog === 0) return
  }
  pumping = pumpOnce().finally(() => {
    pumping = null
    status()
  })
  await pumping
}

function scheduleRetry (): void {
  if (timer !== null) clearTimeout(timer)
  timer = setTimeout(() => { timer = null; void pump() }, retryMs)
  retryMs = Math.min(kRetryMaxMs, retryMs * 2)
}

function scheduleFlush (): void {
  if (timer !== null) return
  timer = setTimeout(() => { timer = null; void pump() }, cfg.flushMs)
}

async function purge (): Promise<void> {
  if (cfg.retentionDays <= 0 || store === null) return
  try {
    await store.purgeHistory(new Date(Date.now() - cfg.retentionDays * 86_400_000))
  } catch {
    // The next run retries; purging never blocks ingest.
  }
}

port.on('message', (msg: HistoryMessage) => {
  switch (msg.type) {
    case 'records':
      received += msg.envelope.count
      expand(msg.envelope, msg.parts)
      if (pendingRecords > kMaxInMemory) {
        // The store is slower than ingest: keep memory bounded by moving the oldest batches to disk, in order.
        while (pendingRecords > cfg.batch) spool.append(partRows(takePending(Math.min(cfg.batch, pendingRecords - cfg.batch))))
        void pump()
      } else if (pendingRecords >= cfg.batch && spool.backlog === 0) {
        void pump()
      } else {
        scheduleFlush()
      }
      break
    case 'flush':
      void pump().then(() => port.postMessage({ type: 'flushed', id: msg.id }))
      break
    case 'close':
      void (async () => {
        await pump()
        // What could not be written is on disk and replays at the next start.
        if (pending.length > 0) spool.append(partRows(takePending(Number.POSITIVE_INFINITY)))
        if (timer !== null) clearTimeout(timer)
        await store?.close()
        status()
        spool.close()
        port.postMessage({ type: 'closed', id: msg.id })
      })()
      break
  }
})

// Opens the store (or spools until it can) and replays any backlog left by the last run.
await pump()
void purge()
setInterval(() => { void purge() }, kPurgeEveryMs).unref()
status()
port.postMessage({ type: 'ready' })
