/**
 * The history writer thread. Requests' history is in the journal (src/history/journal.ts) before they are answered;
 * this thread reads it from the journal files, in batches of whole requests, and writes each batch in one store
 * transaction (parts + usage counters + the journal position after the batch), so a restart resumes exactly after
 * what the store has. When the store fails, it retries with backoff: the records wait on disk, not in memory.
 * A spool left by a version before the journal (legacy-spool.ts) is replayed first.
 *
 * Stopping: 'close' writes what the journal holds (graceful); 'stop' (the client's destroy) ends at the next
 * transaction boundary: the transaction running commits or fails as it would, no other starts, the store is closed and
 * 'stopped' is posted, after which the thread holds no store call and may be terminated. What is not in the store
 * stays in the journal for the next start. Between batches the loop yields to the event loop, so a 'stop' is seen
 * after one transaction, not after the whole backlog (SQLite's calls are synchronous).
 */
import { setImmediate as nextTurn } from 'node:timers/promises'
import { parentPort, workerData } from 'node:worker_threads'
import { openStore, partRows, SqliteStore, type HistoryPart, type HistoryRow, type Store, type StoreOptions } from '../src/store/index.ts'
import { causeCodes } from '../src/errors.ts'
import { historyParts } from '../src/history/codec.ts'
import { JournalReader, kEagerBytes, SharedDurable } from '../src/history/journal-reader.ts'
import { LegacySpool } from '../src/history/legacy-spool.ts'

/** Settings from the main thread. */
export interface HistoryWorkerData {
  store: StoreOptions
  /** Folder of a spool left by a version before the journal, and of history.rejected. */
  legacySpoolDir: string
  journalDir: string
  journalId: string
  /** The journal's durable end when the thread starts. */
  durable: number
  /** The durable end as the main thread publishes it, and this thread's wake flag (journal-reader.ts SharedDurable). */
  shared: SharedArrayBuffer
  batch: number
  flushMs: number
  retentionDays: number
}

/** Messages the worker accepts. */
export type HistoryMessage =
  | { type: 'durable', end: number }
  | { type: 'flush', id: number }
  | { type: 'close', id: number }
  | { type: 'stop', id: number }

const cfg = workerData as HistoryWorkerData
const port = parentPort
if (port === null) throw new Error('history worker must run in a worker thread')
const legacySpool = new LegacySpool(cfg.legacySpoolDir)
const reader = new JournalReader(cfg.journalDir)
const kRetryMinMs = 100
const kRetryMaxMs = 5_000
const kPurgeEveryMs = 3_600_000
/** Journal bytes read into one batch at most (a batch is also bounded by cfg.batch records). */
const kMaxBatchBytes = 64 * 1024 * 1024

let store: Store | null = null
/** Where the store's copy of the journal ends (null until read from the store). */
let committed: number | null = null
let durable = cfg.durable
const shared = new SharedDurable(cfg.shared)
let rejected = 0
let written = 0
/** Store transactions of history batches, and the seconds they took (the store's write latency, for metrics). */
let writes = 0
let writeSeconds = 0
let lastError: string | null = null
let retryMs = kRetryMinMs
let timer: NodeJS.Timeout | null = null
let retrying = false
let pumping: Promise<void> | null = null
/** Set by 'stop': no transaction starts after the one running, no retry or flush is scheduled. */
let stopping = false
/** The store closed and the thread's files released (once, by 'close' or 'stop'). */
let finished: Promise<void> | null = null

function status (): void {
  port!.postMessage({
    type: 'status',
    written,
    writes,
    writeSeconds,
    committed: committed ?? 0,
    rejected,
    legacySpoolBytes: legacySpool.backlog,
    reason: lastError === null ? null : `history store unavailable, records wait in the journal: ${lastError}`
  })
}

/** A store error that retrying cannot fix (the rows themselves are refused). */
function isPoison (err: unknown): boolean {
  return (err as { code?: string }).code === 'INVALID_RECORD'
}

function setAside (batch: ReadonlyArray<HistoryRow | HistoryPart>): void {
  rejected += batch.length
  legacySpool.reject(batch)
}

function countOf (batch: readonly HistoryPart[]): number {
  let n = 0
  for (const p of batch) n += p.count
  return n
}

/** Replays a spool a version before the journal left; throws when the store fails (the caller retries later). */
async function replayLegacySpool (s: Store): Promise<void> {
  while (legacySpool.backlog > 0) {
    if (stopping) return
    const frame = legacySpool.peek()
    if (frame === null) break
    try {
      await s.writeHistoryRows(frame.records)
    } catch (err) {
      if (!isPoison(err)) throw err
      setAside(frame.records)
    }
    written += frame.records.length
    legacySpool.commit(frame.next)
    status() // legacy_spool_bytes in health follows the replay
  }
}

/** A batch read from the journal: its parts, the parts this version cannot read, and where it ends. */
interface Batch { parts: HistoryPart[], bad: HistoryPart[], next: number }

/** The batch that starts at `from` (up to the durable end); null when the journal holds nothing more. */
function readBatch (from: number): Batch | null {
  durable = Math.max(durable, shared.durable)
  if (from >= durable) return null
  const got = reader.read(from, durable, cfg.batch, kMaxBatchBytes)
  if (got.next === from) return null
  const parts: HistoryPart[] = []
  const bad: HistoryPart[] = []
  // A part this version cannot read is set aside as it came, for an operator; the rest of the request is kept.
  for (const f of got.frames) historyParts(f.envelope, f.parts, parts, (p) => bad.push(p))
  return { parts, bad, next: got.next }
}

/**
 * Writes one batch with the journal position after it, in one store transaction; `meanwhile` runs while the store
 * waits on its server (Store.writeHistoryParts), and its time does not count as the write's.
 */
async function writeBatch (s: Store, batch: Batch, meanwhile: () => void): Promise<void> {
  if (batch.bad.length > 0) setAside(batch.bad)
  const mark = { journal: cfg.journalId, position: batch.next }
  try {
    const t0 = performance.now()
    let aside = 0
    await s.writeHistoryParts(batch.parts, mark, () => {
      const t = performance.now()
      meanwhile()
      aside = performance.now() - t
    })
    writes++
    writeSeconds += (performance.now() - t0 - aside) / 1000
    written += countOf(batch.parts)
  } catch (err) {
    if (!isPoison(err)) throw err
    setAside(partRows(batch.parts))
    await s.writeHistoryParts([], mark)
  }
}

/**
 * Writes journalled records to the store up to the durable end; on a failure, schedules a retry. While the store
 * commits a batch, the next one is read and decoded: PostgreSQL writes and syncs a batch in its own server process,
 * so this thread's share of the next batch no longer waits for it (SQLite writes on this thread, where the two still
 * take turns). The read waits for the commit to be sent: earlier, while the store streams the batch's parts, it would
 * hold up the stream, and the server with it. A batch read ahead and not written (a failure, a stop) is read again
 * from `committed` by the next pass.
 */
async function pumpOnce (): Promise<void> {
  if (stopping) return
  try {
    store ??= await openStore(cfg.store)
    committed ??= await store.journalPosition(cfg.journalId)
    await replayLegacySpool(store)
    let batch = readBatch(committed)
    while (batch !== null) {
      if (stopping) break
      const next: { read: boolean, batch: Batch | null, failed: { err: unknown } | null } = { read: false, batch: null, failed: null }
      const from = batch.next
      const readNext = (): void => {
        if (next.read) return
        next.read = true
        try {
          next.batch = readBatch(from)
        } catch (err) {
          next.failed = { err } // after the write settles: what it committed must count first
        }
      }
      await writeBatch(store, batch, readNext)
      readNext() // a store that did not call it (SQLite)
      committed = batch.next
      status()
      if (next.failed !== null) throw next.failed.err
      // A turn of the event loop between batches: a 'stop' waiting in the queue is seen here.
      await nextTurn()
      batch = next.batch ?? readBatch(committed)
    }
    lastError = null
    retryMs = kRetryMinMs
  } catch (err) {
    // Codes only (the store's message may name its server): STORE_UNAVAILABLE (SQLITE_FULL), a PostgreSQL SQLSTATE, ...
    const causes = causeCodes(err)
    lastError = `${(err as { code?: string }).code ?? 'write failed'}${causes === undefined ? '' : ` (${causes.join(', ')})`}`
    if (!stopping) scheduleRetry()
  }
}

async function pump (): Promise<void> {
  // One pass at a time: two would both write the same journal range.
  for (let running = pumping; running !== null; running = pumping) {
    await running
    if (committed !== null && committed >= durable && legacySpool.backlog === 0) return
  }
  pumping = pumpOnce().finally(() => {
    pumping = null
    status()
  })
  await pumping
  sleep()
}

/**
 * With nothing scheduled, asks the main thread to tell of the next synced group (journal-reader.ts SharedDurable);
 * a group synced before the request was up found no one to tell, so it is looked for once more here.
 */
function sleep (): void {
  if (timer !== null || pumping !== null || stopping) return
  shared.sleep()
  if (committed !== null && committed < Math.max(durable, shared.durable) && shared.wakeTaken()) scheduleFlush()
}

function scheduleRetry (): void {
  if (timer !== null) clearTimeout(timer)
  retrying = true
  timer = setTimeout(() => { timer = null; retrying = false; void pump() }, retryMs)
  retryMs = Math.min(kRetryMaxMs, retryMs * 2)
}

function scheduleFlush (): void {
  if (timer !== null || stopping) return
  timer = setTimeout(() => { timer = null; void pump() }, cfg.flushMs)
}

async function purge (): Promise<void> {
  if (cfg.retentionDays <= 0 || store === null || stopping) return
  try {
    await store.purgeHistory(new Date(Date.now() - cfg.retentionDays * 86_400_000))
  } catch {
    // The next run retries; purging never blocks ingest.
  }
}

/** Closes the store (no call of ours is running on it by then) and the thread's files, once. */
async function finish (): Promise<void> {
  finished ??= (async () => {
    if (timer !== null) clearTimeout(timer)
    timer = null
    await store?.close()
    reader.close()
    status()
    legacySpool.close()
  })()
  await finished
}

port.on('message', (msg: HistoryMessage) => {
  switch (msg.type) {
    case 'durable':
      durable = Math.max(durable, msg.end)
      if (retrying || stopping) break // the retry timer runs the next pass; a stopping writer starts none
      if (committed !== null && durable - committed >= kEagerBytes) {
        if (timer !== null) clearTimeout(timer)
        timer = null
        void pump()
      } else {
        scheduleFlush()
      }
      break
    case 'flush':
      // A stopping writer writes nothing more: what is not in the store stays in the journal.
      void (stopping ? Promise.resolve() : pump()).then(() => port.postMessage({ type: 'flushed', id: msg.id }))
      break
    case 'close':
      void (async () => {
        if (timer !== null) clearTimeout(timer)
        timer = null
        // One last pass; what the store does not take now stays in the journal for the next start.
        if (!retrying && !stopping) await pump()
        else await pumping
        await finish()
        port.postMessage({ type: 'closed', id: msg.id })
      })()
      break
    case 'stop':
      void (async () => {
        stopping = true
        if (timer !== null) clearTimeout(timer)
        timer = null
        retrying = false
        // The transaction running (if any) ends; the loop starts no other.
        for (let running = pumping; running !== null; running = pumping) await running
        await finish()
        port.postMessage({ type: 'stopped', id: msg.id })
      })()
      break
  }
})

// A thread that ends any other way (an exception nothing caught) closes its SQLite database here, synchronously (no
// promise settles in an 'exit' handler): left open, it would be closed by better-sqlite3's cleanup while the thread is
// torn down. The main thread terminates this thread only after 'closed' or 'stopped', which close the store first.
process.once('exit', () => {
  if (store instanceof SqliteStore) store.closeSync()
})

// Ready at once: requests journal their history whatever the store's state. Then open the store and replay what the
// journal holds beyond the store's position (retrying until it can).
port.postMessage({ type: 'ready' })
void pump().then(async () => await purge())
setInterval(() => { void purge() }, kPurgeEveryMs).unref()
