/**
 * Keeps fetched feeds fresh: each one on its own timer (refresh_seconds), downloaded with fetchFeed, validated off
 * the main thread, and only then written as the feed's last good copy (temp file + rename, with its ETag /
 * Last-Modified in a metadata file beside it). A refused download leaves the last good copy in use. When any copy
 * changed, `onChange` runs (the service rebuilds and swaps the snapshot). Status per source is kept in memory and
 * written to <dir>/status.json for `ioc-verdict intel status`.
 */
import { createHash } from 'node:crypto'
import { access, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { Worker } from 'node:worker_threads'
import type { FeedSpec } from '../engine/types.ts'
import { kWorkerExecArgv, kWorkerShim, workerEntry } from '../worker-entry.ts'
import { FeedFetchError, MissingVariableError } from '../errors.ts'
import { fetchFeed, redactUrl, type RetryPolicy } from './fetcher.ts'
import { headerVariables } from './manifest.ts'

/** What is kept about one feed between runs (<name>.meta.json). */
export interface FeedMeta {
  etag: string | null
  lastModified: string | null
  /** Last successful fetch (200 accepted or 304). */
  fetchedAt: string | null
  /** When the last good copy last changed. */
  changedAt: string | null
  records: number
  bytes: number
  sha256: string | null
  /** sourceKey() of the feed the copy was fetched from (absent in copies of earlier versions). */
  source?: string
}

/** What a feed is fetched from: its URL and header templates (never a resolved secret), as a digest. */
function sourceKey (spec: FeedSpec): string {
  return createHash('sha256').update(JSON.stringify({ url: spec.remote?.url ?? null, headers: spec.remote?.headers ?? null })).digest('hex').slice(0, 32)
}

/** One source's row, as the status route and the CLI show it. */
export interface SourceRow {
  name: string
  url: string
  status: 'ok' | 'stale' | 'failed' | 'pending'
  records: number
  bytes: number
  refresh_seconds: number
  last_attempt_at: string | null
  last_success_at: string | null
  last_change_at: string | null
  error: string | null
}

/** The raw state a row is computed from (status depends on the time it is read). */
export interface SourceState {
  name: string
  url: string
  refreshSeconds: number
  meta: FeedMeta
  lastAttemptAt: string | null
  /** Whether the last attempt was refused (its reason in `error`). */
  failed: boolean
  error: string | null
}

/** Validation thresholds. */
export interface ValidationPolicy {
  /** Refuse a body when rejected / (entries + rejected) is above this (default 0.5). */
  maxRejectedRatio: number
  /** Refuse a body with fewer entries than this fraction of the last good copy's (default 0.5; 0 = never). */
  minShrinkRatio: number
}

export const kDefaultValidation: ValidationPolicy = { maxRejectedRatio: 0.5, minShrinkRatio: 0.5 }

/** Logger subset the refresher writes to. */
export interface FeedLogger {
  info: (obj: object, msg: string) => void
  warn: (obj: object, msg: string) => void
}

export interface RefresherOptions {
  specs: FeedSpec[]
  /** Folder of last good copies, their metadata and status.json. */
  dir: string
  logger: FeedLogger
  /** Called (not concurrently) after one or more last good copies changed. */
  onChange: () => Promise<unknown>
  /** What the feeds' header templates (`${NAME}`) resolve against (Config.feedVariables). */
  variables: Readonly<Record<string, string | undefined>>
  validation?: ValidationPolicy
  retry?: RetryPolicy
  /** Snapshot facts written into status.json beside the sources. */
  snapshot?: () => Record<string, unknown>
  /**
   * Whether this instance fetches now (a fleet's leader does, its followers never do); default always. A timer that
   * fires while it says no fetches nothing and waits for its next turn.
   */
  fetching?: () => boolean
  /** After a changed body became a feed's last good copy (a fleet's leader shares it, for the next leader). */
  onStored?: (name: string, meta: FeedMeta, body: Buffer) => Promise<void>
  /** After the sources' state changed (a fleet's leader shares it with its followers). */
  onStatus?: (states: SourceState[]) => void
}

const kEmptyMeta: FeedMeta = { etag: null, lastModified: null, fetchedAt: null, changedAt: null, records: 0, bytes: 0, sha256: null }

/** The status of a source at `now`: stale once more than twice its refresh period passed since its last success. */
export function sourceRow (s: SourceState, now: number): SourceRow {
  let status: SourceRow['status']
  if (s.failed) status = 'failed'
  else if (s.meta.fetchedAt === null) status = 'pending'
  else if (now - Date.parse(s.meta.fetchedAt) > 2 * s.refreshSeconds * 1000) status = 'stale'
  else status = 'ok'
  return {
    name: s.name,
    url: s.url,
    status,
    records: s.meta.records,
    bytes: s.meta.bytes,
    refresh_seconds: s.refreshSeconds,
    last_attempt_at: s.lastAttemptAt,
    last_success_at: s.meta.fetchedAt,
    last_change_at: s.meta.changedAt,
    error: s.error
  }
}

/** Whether the file of a feed's last good copy is there. */
async function exists (path: string): Promise<boolean> {
  try {
    await access(path)
    return true
  } catch {
    return false
  }
}

/** Writes a file atomically: a temp file beside it, then rename. */
async function writeAtomic (path: string, data: string | Uint8Array): Promise<void> {
  const tmp = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`
  try {
    await writeFile(tmp, data)
    await rename(tmp, path)
  } catch (err) {
    await rm(tmp, { force: true })
    throw err
  }
}

/** Parses a body on a worker thread; counts only. `stop` terminates the thread (the refresher destroyed). */
async function validateOnWorker (spec: FeedSpec, path: string, stop: AbortSignal): Promise<{ lines: number, entries: number, rejected: number, firstReason: string | null }> {
  return await new Promise((resolve, reject) => {
    const worker = new Worker(kWorkerShim, { execArgv: [...kWorkerExecArgv], workerData: { entry: workerEntry('feed-validate'), format: spec.format, path } })
    const terminate = (): void => { void worker.terminate() }
    stop.addEventListener('abort', terminate, { once: true })
    worker.once('exit', () => { stop.removeEventListener('abort', terminate) })
    let settled = false
    worker.once('message', (msg: { ok: true, lines: number, entries: number, rejected: number, firstReason: string | null } | { ok: false, message: string }) => {
      settled = true
      if (msg.ok) resolve(msg)
      else reject(new Error('could not be parsed'))
    })
    worker.once('error', () => { settled = true; reject(new Error('could not be parsed')) })
    worker.once('exit', () => { if (!settled) reject(new Error('could not be parsed')) })
  })
}

const kHtml = /^\s*(?:<!doctype\s+html|<html[\s>]|<head[\s>]|<body[\s>]|<\?xml[^>]*>\s*<html)/i

/** Fetches, validates and stores fetched feeds on their schedules. */
export class FeedRefresher {
  private readonly options: RefresherOptions
  private readonly remote: FeedSpec[]
  private readonly states = new Map<string, SourceState>()
  private readonly timers = new Map<string, NodeJS.Timeout>()
  private readonly inflight = new Map<string, Promise<void>>()
  /** Per feed, the download that follows the one in flight, shared by every refreshAll() made while it runs. */
  private readonly following = new Map<string, Promise<void>>()
  private readonly abort = new AbortController()
  private changeChain: Promise<void> = Promise.resolve()
  private changePending = false
  private closing: Promise<void> | null = null
  private started = false
  /** Downloads begun (each refresh of a feed that was let through; retries within one are not counted). */
  fetches = 0

  constructor (options: RefresherOptions) {
    this.options = options
    this.remote = options.specs.filter((s) => s.remote !== undefined)
    for (const spec of this.remote) {
      const remote = spec.remote!
      const missing = headerVariables(remote).filter((v) => options.variables[v] === undefined || options.variables[v] === '')
      this.states.set(spec.name, {
        name: spec.name,
        url: redactUrl(remote.url),
        refreshSeconds: remote.refreshSeconds,
        meta: { ...kEmptyMeta },
        lastAttemptAt: null,
        failed: missing.length > 0,
        error: missing.length > 0 ? `environment variable ${missing[0] as string} (named in the feed's headers) is not set` : null
      })
    }
  }

  /** Whether any feed is fetched. */
  get active (): boolean {
    return this.remote.length > 0
  }

  /** Reads the metadata of last good copies (so a restart with the host down serves them), then starts every timer. */
  async start (): Promise<void> {
    if (this.started) return
    this.started = true
    await mkdir(this.options.dir, { recursive: true })
    for (const spec of this.remote) {
      const state = this.states.get(spec.name)!
      try {
        const meta = JSON.parse(await readFile(this.metaPath(spec), 'utf8')) as Partial<FeedMeta>
        state.meta = { ...kEmptyMeta, ...meta }
      } catch {
        // No last good copy yet.
      }
      // Metadata without its copy (the file deleted or lost): the feed is fetched again in full, at once, instead of
      // being answered 304 for a copy it no longer has.
      if (state.meta.sha256 !== null && !await exists(spec.path)) {
        this.options.logger.warn({ feed: spec.name }, 'last good copy of the feed is missing from the data directory; fetching it again')
        state.meta = { ...kEmptyMeta }
      }
      if (state.failed) this.options.logger.warn({ feed: spec.name, error: state.error }, 'feed cannot be fetched')
    }
    await this.writeStatus()
    // A feed fetched from the same source less than its refresh_seconds ago waits out the rest of its interval: a
    // restart (or a crash loop) does not fetch every feed again, which some feeds' terms forbid (at most once an hour).
    const now = Date.now()
    for (const spec of this.remote) {
      const meta = this.states.get(spec.name)!.meta
      const interval = spec.remote!.refreshSeconds * 1000
      const due = meta.fetchedAt !== null && meta.source === sourceKey(spec) ? Date.parse(meta.fetchedAt) + interval - now : 0
      this.schedule(spec, Math.min(Math.max(0, due), interval))
    }
  }

  /** Rows for every fetched feed. */
  rows (now = Date.now()): SourceRow[] {
    return [...this.states.values()].map((s) => sourceRow(s, now))
  }

  /**
   * Fetches every feed now; resolves when done and any resulting rebuild finished. A download already in flight may
   * have begun before what the caller wants to see was published: one more follows it (one for every call made
   * meanwhile), so the answer reflects each host as it was when this was called.
   */
  async refreshAll (): Promise<void> {
    await Promise.all(this.remote.map(async (spec) => { await this.runAfresh(spec) }))
    await this.changeChain
  }

  /** run(), after the download in flight if there is one. */
  private async runAfresh (spec: FeedSpec): Promise<void> {
    const running = this.inflight.get(spec.name)
    if (running === undefined) return await this.run(spec)
    let next = this.following.get(spec.name)
    if (next === undefined) {
      next = running.then(async () => {
        this.following.delete(spec.name)
        await this.run(spec)
      })
      this.following.set(spec.name, next)
    }
    await next
  }

  private metaPath (spec: FeedSpec): string {
    return join(this.options.dir, `${spec.name}.meta.json`)
  }

  private schedule (spec: FeedSpec, delayMs: number): void {
    if (this.closing !== null) return
    const timer = setTimeout(() => {
      this.timers.delete(spec.name)
      void this.run(spec).finally(() => { this.schedule(spec, spec.remote!.refreshSeconds * 1000) })
    }, delayMs)
    timer.unref()
    this.timers.set(spec.name, timer)
  }

  /** Refreshes one feed; a refresh already running for it is joined, not doubled. */
  private async run (spec: FeedSpec): Promise<void> {
    if (this.closing !== null || this.options.fetching?.() === false) return
    let p = this.inflight.get(spec.name)
    if (p === undefined) {
      p = this.refresh(spec).catch((err: unknown) => {
        this.options.logger.warn({ feed: spec.name, error: (err as Error).message }, 'feed refresh failed')
      }).finally(() => { this.inflight.delete(spec.name) })
      this.inflight.set(spec.name, p)
    }
    await p
  }

  /**
   * One refresh of one feed. Once the refresher is destroyed it ends where it stands (its download or validation is
   * stopped) and records nothing: the feed's state stays what the last finished refresh made it.
   */
  private async refresh (spec: FeedSpec): Promise<void> {
    const stop = this.abort.signal
    const state = this.states.get(spec.name)!
    const remote = spec.remote!
    state.lastAttemptAt = new Date().toISOString()
    this.fetches++
    const refuse = async (error: string): Promise<void> => {
      state.failed = true
      state.error = error
      const kept = state.meta.fetchedAt !== null ? 'last good copy stays in use' : 'no good copy yet'
      this.options.logger.warn({ feed: spec.name, url: state.url, error, last_good: state.meta.fetchedAt }, `feed download refused; ${kept}`)
      await this.writeStatus()
    }
    // Validators are sent only for a copy still on disk: a 304 must have a copy to keep.
    const copy = state.meta.sha256 !== null && await exists(spec.path)
    let outcome
    try {
      outcome = await fetchFeed(remote, copy ? { etag: state.meta.etag, lastModified: state.meta.lastModified } : { etag: null, lastModified: null }, {
        signal: stop,
        variables: this.options.variables,
        ...(this.options.retry === undefined ? {} : { retry: this.options.retry })
      })
    } catch (err) {
      if (stop.aborted) return
      if (err instanceof FeedFetchError || err instanceof MissingVariableError) return await refuse(err.message)
      throw err
    }
    if (outcome.kind === 'unchanged') {
      // Not asked for (no validators went out): the server's 304 leaves nothing to serve.
      if (!copy) return await refuse('HTTP 304 (not modified) without a copy to keep: no validators were sent')
      state.meta = { ...state.meta, fetchedAt: new Date().toISOString(), source: sourceKey(spec) }
      state.failed = false
      state.error = null
      await writeAtomic(this.metaPath(spec), JSON.stringify(state.meta))
      this.options.logger.info({ feed: spec.name, url: state.url, status: 304 }, 'feed unchanged')
      await this.writeStatus()
      return
    }
    const { body } = outcome
    const head = body.subarray(0, 1024).toString('utf8')
    if ((outcome.contentType ?? '').toLowerCase().includes('text/html') || kHtml.test(head)) return await refuse('body is an HTML page, not feed data')
    const sha256 = createHash('sha256').update(body).digest('hex')
    const candidate = `${spec.path}.candidate`
    await writeFile(candidate, body)
    let counts
    try {
      counts = await validateOnWorker(spec, candidate, stop)
    } catch {
      await rm(candidate, { force: true })
      if (stop.aborted) return
      return await refuse('body could not be parsed')
    }
    const policy = this.options.validation ?? kDefaultValidation
    const seen = counts.entries + counts.rejected
    let problem: string | null = null
    if (counts.entries === 0) problem = 'body holds no usable entries'
    else if (counts.rejected / seen > policy.maxRejectedRatio) problem = `${counts.rejected} of ${seen} lines rejected (limit ${Math.round(policy.maxRejectedRatio * 100)}%)`
    else if (state.meta.records > 0 && counts.entries < state.meta.records * policy.minShrinkRatio) {
      problem = `shrank from ${state.meta.records} to ${counts.entries} entries (limit ${Math.round(policy.minShrinkRatio * 100)}% of the last good copy)`
    }
    if (problem !== null) {
      await rm(candidate, { force: true })
      return await refuse(problem)
    }
    const changed = sha256 !== state.meta.sha256 || !copy
    const now = new Date().toISOString()
    if (changed) await rename(candidate, spec.path)
    else await rm(candidate, { force: true })
    state.meta = {
      etag: outcome.etag,
      lastModified: outcome.lastModified,
      fetchedAt: now,
      changedAt: changed ? now : state.meta.changedAt,
      records: counts.entries,
      bytes: body.length,
      sha256,
      source: sourceKey(spec)
    }
    state.failed = false
    state.error = null
    await writeAtomic(this.metaPath(spec), JSON.stringify(state.meta))
    if (changed && this.options.onStored !== undefined) {
      try {
        await this.options.onStored(spec.name, state.meta, body)
      } catch (err) {
        this.options.logger.warn({ feed: spec.name, error: (err as Error).message }, 'cannot share the feed\'s last good copy with the fleet')
      }
    }
    this.options.logger.info({ feed: spec.name, url: state.url, records: counts.entries, rejected: counts.rejected, changed }, 'feed fetched')
    await this.writeStatus()
    // The rebuild runs on its own: a refresh (and destroy, which waits for refreshes) does not wait for it.
    if (changed && !stop.aborted) void this.changed()
  }

  /** Runs onChange once for any number of changes that arrive while one rebuild is running. */
  private async changed (): Promise<void> {
    if (this.changePending) return await this.changeChain
    this.changePending = true
    this.changeChain = this.changeChain.then(async () => {
      this.changePending = false
      try {
        await this.options.onChange()
      } catch (err) {
        this.options.logger.warn({ error: (err as Error).message }, 'snapshot rebuild after a feed change failed; the previous snapshot stays in use')
      }
      await this.writeStatus()
    })
    await this.changeChain
  }

  /**
   * Takes a last good copy another instance fetched (a fleet's former leader), with its metadata, so that this
   * instance, leading now, rebuilds from what the fleet's snapshot was built from and asks the host conditionally.
   * Returns whether the copy differed from this instance's.
   */
  async adopt (name: string, meta: FeedMeta, body: Buffer): Promise<boolean> {
    const spec = this.remote.find((s) => s.name === name)
    const state = this.states.get(name)
    if (spec === undefined || state === undefined || meta.sha256 === state.meta.sha256) return false
    if (createHash('sha256').update(body).digest('hex') !== meta.sha256) throw new Error(`the shared copy of feed ${name} does not match its digest`)
    await writeAtomic(spec.path, body)
    state.meta = { ...kEmptyMeta, ...meta }
    await writeAtomic(this.metaPath(spec), JSON.stringify(state.meta))
    return true
  }

  /** Takes the sources' state another instance reports (a fleet's leader), so rows and status show what it fetched. */
  adoptStates (states: readonly SourceState[]): void {
    for (const s of states) {
      const mine = this.states.get(s.name)
      if (mine === undefined) continue
      mine.meta = { ...kEmptyMeta, ...s.meta }
      mine.lastAttemptAt = s.lastAttemptAt
      mine.failed = s.failed
      mine.error = s.error
    }
  }

  /** Writes status.json (for `intel status`); failures to write are only logged. */
  async writeStatus (): Promise<void> {
    if (this.options.fetching?.() !== false) this.options.onStatus?.([...this.states.values()])
    try {
      const doc = { written_at: new Date().toISOString(), sources: [...this.states.values()], snapshot: this.options.snapshot?.() ?? null }
      await writeAtomic(join(this.options.dir, 'status.json'), JSON.stringify(doc))
    } catch (err) {
      this.options.logger.warn({ error: (err as NodeJS.ErrnoException).code ?? 'write failed' }, 'cannot write feed status file')
    }
  }

  /**
   * Graceful and idempotent: stops the timers, stops a download or validation in flight (it has stored nothing; the
   * last good copy stays, and the next start fetches again) and waits for a rebuild in flight. A download may take its
   * whole timeout per attempt: a stop waiting for one overran the shutdown timeout.
   */
  async close (): Promise<void> {
    this.closing ??= (async () => {
      this.abort.abort()
      for (const t of this.timers.values()) clearTimeout(t)
      this.timers.clear()
      await Promise.all([...this.inflight.values()])
      await this.changeChain
    })()
    await this.closing
  }

  /**
   * Now: stops the timers, aborts a download or retry wait and terminates a validation in flight, and resolves once
   * those refreshes have ended (at once: they record nothing more). A snapshot rebuild already running is not waited
   * for (IntelService's destroy stops what it would start).
   */
  async destroy (): Promise<void> {
    this.abort.abort()
    for (const t of this.timers.values()) clearTimeout(t)
    this.timers.clear()
    this.closing ??= Promise.resolve()
    await Promise.all([...this.inflight.values()])
  }
}

/** Reads status.json written by a running service; rows are computed at `now`. */
export async function readStatusFile (dir: string, now = Date.now()): Promise<{ writtenAt: string, sources: SourceRow[], snapshot: Record<string, unknown> | null }> {
  const doc = JSON.parse(await readFile(join(dir, 'status.json'), 'utf8')) as { written_at: string, sources: SourceState[], snapshot: Record<string, unknown> | null }
  return { writtenAt: doc.written_at, sources: doc.sources.map((s) => sourceRow(s, now)), snapshot: doc.snapshot }
}
