/**
 * Downloads one fetched feed: a conditional GET (If-None-Match / If-Modified-Since) so an unchanged feed costs a 304,
 * gzip bodies (Content-Encoding or a .gz URL / gzip magic) decoded while streaming, the size cap enforced on the
 * decoded bytes as they arrive, zip bodies unpacked to their one member (or the manifest's zip_member) under the same
 * cap, a timeout per attempt, and retries with exponential backoff and full jitter for
 * transient failures (network errors, timeouts, 408 / 429 / 5xx).
 *
 * Nothing this module returns or throws carries a secret: header values, URL credentials and query values are
 * replaced by `***` (redactUrl, FeedSecrets.scrub).
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { createGunzip } from 'node:zlib'
import { Agent, request, type Dispatcher } from 'undici'
import type { RemoteFeed } from '../engine/types.ts'
import { kEnvReference } from './manifest.ts'
import { FeedFetchError, MissingVariableError, ZipError } from '../errors.ts'
import { isZip, readZipMember } from './unzip.ts'

/** A URL as it may be shown: no userinfo, every query value replaced by ***. */
export function redactUrl (url: string): string {
  let u: URL
  try {
    u = new URL(url)
  } catch {
    return '[invalid url]'
  }
  if (u.username !== '' || u.password !== '') {
    u.username = '***'
    u.password = ''
  }
  const keys = [...u.searchParams.keys()]
  if (keys.length > 0) u.search = keys.map((k) => `${encodeURIComponent(k)}=***`).join('&')
  return u.toString()
}

/** The secrets of one feed (resolved header values, URL credentials and query values) and their removal from text. */
export class FeedSecrets {
  private readonly secrets: string[]

  constructor (url: string, headers: Record<string, string>) {
    const list: string[] = [url]
    try {
      const u = new URL(url)
      for (const s of [u.username, u.password, decodeURIComponent(u.username), decodeURIComponent(u.password), u.search.slice(1)]) list.push(s)
      for (const v of u.searchParams.values()) list.push(v, encodeURIComponent(v))
    } catch {
      // Validated by the manifest; an invalid URL leaves only the whole string listed.
    }
    for (const v of Object.values(headers)) list.push(v)
    // Longest first, so a value inside a longer one does not leave the rest behind; very short values would mangle text.
    this.secrets = [...new Set(list)].filter((s) => s.length >= 3).sort((a, b) => b.length - a.length)
  }

  /** `text` with every secret replaced by ***. */
  scrub (text: string): string {
    let out = text
    for (const s of this.secrets) out = out.replaceAll(s, '***')
    return out
  }
}

/**
 * Header templates with `${NAME}` replaced from `variables` (Config.feedVariables); throws MissingVariableError naming
 * the first unset variable.
 */
export function resolveHeaders (templates: Record<string, string>, variables: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [name, template] of Object.entries(templates)) {
    out[name] = template.replace(kEnvReference, (_m, variable: string) => {
      const value = variables[variable]
      if (value === undefined || value === '') throw new MissingVariableError(variable)
      return value
    })
  }
  return out
}

/** Validators of the last good copy, sent back so the server can answer 304. */
export interface Validators {
  etag: string | null
  lastModified: string | null
}

/** What one fetch produced. */
type AttemptOutcome =
  | { kind: 'unchanged', status: 304 }
  | { kind: 'body', body: Buffer, etag: string | null, lastModified: string | null, contentType: string | null }
export type FetchOutcome = AttemptOutcome & { attempts: number }

/** Retry policy: attempts in all, and the first backoff (doubled each time, with full jitter, capped). */
export interface RetryPolicy {
  attempts: number
  baseMs: number
  maxMs: number
}

export const kDefaultRetry: RetryPolicy = { attempts: 3, baseMs: 1000, maxMs: 30_000 }

/** A failure of one attempt, and whether another attempt may help. */
class AttemptError extends Error {
  readonly reason: string
  readonly retry: boolean
  constructor (reason: string, message: string, retry: boolean) {
    super(message)
    this.reason = reason
    this.retry = retry
  }
}

/** A whole download attempt may take this many times the feed's timeout_seconds. */
const kWholeAttempt = 10
const kGzipMagic = [0x1f, 0x8b]

let shared: Dispatcher | null = null
/** One agent for every feed (redirects are followed by attempt() itself). */
function defaultDispatcher (): Dispatcher {
  shared ??= new Agent()
  return shared
}

/** Redirects an attempt follows. */
const kMaxRedirects = 5
const kRedirectStatuses = new Set([301, 302, 303, 307, 308])

/** Delay before attempt `n` (1-based retry number): full jitter over an exponential ceiling. */
export function backoffMs (n: number, policy: RetryPolicy, random: () => number = Math.random): number {
  return Math.floor(random() * Math.min(policy.maxMs, policy.baseMs * 2 ** (n - 1)))
}

/**
 * Lets a response body go unread. undici's body emits RequestAbortedError when destroyed before its end; with no
 * listener that error is uncaught and ends the process, so one is attached first.
 */
function abandon (body: Dispatcher.ResponseData['body']): void {
  body.once('error', () => {})
  body.destroy()
}

/** Reads a response body, gunzipping when asked, and fails as soon as the decoded bytes pass `maxBytes`. */
async function readCapped (body: Dispatcher.ResponseData['body'], gzip: boolean | 'sniff', maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = []
  let total = 0
  const push = (chunk: Buffer): void => {
    total += chunk.length
    if (total > maxBytes) throw new AttemptError('oversize', `body larger than max_bytes (${maxBytes})`, false)
    chunks.push(chunk)
  }
  const raw = body as AsyncIterable<Buffer>
  let gunzip: ReturnType<typeof createGunzip> | null = null
  // The inflater's failure (a bad stream, or push() refusing what it inflated): kept by a listener that lives as long
  // as the inflater, so that no 'error' is ever emitted with nobody listening (an uncaught exception), and thrown by
  // the loop at its next step.
  let failure: Error | null = null
  const failed = (): void => {
    if (failure !== null) throw failure
  }
  /** Until `event`, or the inflater closing (destroyed on a failure). */
  const until = async (g: NonNullable<typeof gunzip>, event: 'drain' | 'end'): Promise<void> => {
    await new Promise<void>((resolve) => {
      const done = (): void => {
        g.off(event, done)
        g.off('close', done)
        resolve()
      }
      g.once(event, done)
      g.once('close', done)
    })
  }
  let first = true
  try {
    for await (const chunk of raw) {
      if (first) {
        first = false
        const isGzip = gzip === true || (gzip === 'sniff' && chunk[0] === kGzipMagic[0] && chunk[1] === kGzipMagic[1])
        if (isGzip) {
          const g = createGunzip()
          gunzip = g
          g.on('error', (err) => { failure ??= err })
          g.on('data', (c: Buffer) => {
            if (failure !== null) return
            try {
              push(c)
            } catch (err) {
              // Stop the download too: the loop may be waiting for the next chunk of a body that never ends.
              failure = err as Error
              g.destroy()
              abandon(body)
            }
          })
        }
      }
      if (gunzip === null) {
        push(chunk)
        continue
      }
      failed()
      if (!gunzip.write(chunk)) await until(gunzip, 'drain')
      failed()
    }
    if (gunzip !== null) {
      const g = gunzip
      failed()
      const ended = until(g, 'end')
      g.end()
      await ended
      failed()
    }
  } catch (thrown) {
    abandon(body)
    gunzip?.destroy()
    // The inflater's failure first: abandoning the body makes the loop throw an abort of its own.
    const err = failure ?? thrown
    if (err instanceof AttemptError) throw err
    const code = (err as NodeJS.ErrnoException).code ?? ''
    if (code.startsWith('Z_')) throw new AttemptError('bad_gzip', 'body is not valid gzip', false)
    throw err
  }
  return Buffer.concat(chunks, total)
}

/** The feed's member of a zip body, held to the same max_bytes once inflated. A bad archive is not retried. */
async function unzipBody (zip: Buffer, feed: RemoteFeed): Promise<Buffer> {
  try {
    return await readZipMember(zip, feed.zipMember, feed.maxBytes)
  } catch (err) {
    if (err instanceof ZipError) throw new AttemptError(err.reason, err.message, false)
    throw new AttemptError('bad_zip', 'body is not a valid zip archive', false)
  }
}

/**
 * One attempt. Its one signal ends it at its timeout or when `stop` aborts (the refresher destroyed), whichever comes
 * first, in whatever it is doing: connecting, waiting for headers, reading or inflating the body.
 */
async function attempt (feed: RemoteFeed, headers: Record<string, string>, validators: Validators, dispatcher: Dispatcher | undefined, stop: AbortSignal | undefined): Promise<AttemptOutcome> {
  const own: Record<string, string> = { 'accept-encoding': 'gzip', 'user-agent': 'ioc-verdict' }
  const h: Record<string, string> = { ...own, ...headers }
  if (validators.etag !== null) h['if-none-match'] = validators.etag
  if (validators.lastModified !== null) h['if-modified-since'] = validators.lastModified
  // timeout_seconds bounds the wait for headers and each wait between body chunks (undici's headersTimeout and
  // bodyTimeout), so a large feed on a slow link is not cut while bytes keep coming; a whole attempt is bounded too,
  // at kWholeAttempt times that, so that a host dripping a byte at a time cannot hold a download for ever.
  const timeout = feed.timeoutSeconds * 1000
  const whole = AbortSignal.timeout(timeout * kWholeAttempt)
  const signal = stop === undefined ? whole : AbortSignal.any([stop, whole])
  let res: Dispatcher.ResponseData
  // Redirects are followed here rather than by undici's interceptor, which keeps every header but Authorization,
  // Cookie and Proxy-Authorization across origins: a manifest's own headers (an API key in `Auth-Key`) and the
  // feed's validators are sent to the feed's origin only, never to another host a redirect names.
  const origin = new URL(feed.url).origin
  const visited = new Set<string>([feed.url])
  let url = feed.url
  let sent = h
  for (let hop = 0; ; hop++) {
    try {
      res = await request(url, {
        method: 'GET',
        headers: sent,
        signal,
        headersTimeout: timeout,
        bodyTimeout: timeout,
        dispatcher: dispatcher ?? defaultDispatcher()
      })
    } catch (err) {
      throw transportError(err, signal, stop)
    }
    const location = res.headers.location
    if (!kRedirectStatuses.has(res.statusCode) || typeof location !== 'string' || hop >= kMaxRedirects) break
    let next: URL
    try {
      next = new URL(location, url)
    } catch {
      break // an unusable Location: reported below as a redirect not followed
    }
    if (next.protocol !== 'https:' && next.protocol !== 'http:') break
    await res.body.dump().catch(() => {})
    if (visited.has(next.href)) throw new AttemptError('http_status', 'redirect loop', false)
    visited.add(next.href)
    url = next.href
    sent = next.origin === origin ? h : own
  }
  try {
    if (res.statusCode === 304) {
      await res.body.dump()
      return { kind: 'unchanged', status: 304 }
    }
    if (res.statusCode < 200 || res.statusCode > 299) {
      await res.body.dump()
      const retry = res.statusCode === 408 || res.statusCode === 429 || res.statusCode >= 500
      // A redirect reaches here only when it was not followed: past the limit, or without a Location.
      const why = res.statusCode >= 300 && res.statusCode < 400 ? ': redirect not followed (more than 5, or no Location)' : ''
      throw new AttemptError('http_status', `HTTP ${res.statusCode}${why}`, retry)
    }
    const header = (name: string): string | null => {
      const v = res.headers[name]
      return typeof v === 'string' ? v : Array.isArray(v) ? (v[0] ?? null) : null
    }
    const declared = Number(header('content-length'))
    const encoding = (header('content-encoding') ?? '').toLowerCase().trim()
    if (encoding !== '' && encoding !== 'identity' && encoding !== 'gzip' && encoding !== 'x-gzip') {
      await res.body.dump()
      throw new AttemptError('encoding', `unsupported content-encoding ${encoding.slice(0, 32)}`, false)
    }
    // A declared length over the cap is refused before reading; the cap on decoded bytes holds either way.
    if (encoding === '' && Number.isFinite(declared) && declared > feed.maxBytes) {
      abandon(res.body)
      throw new AttemptError('oversize', `body larger than max_bytes (${feed.maxBytes})`, false)
    }
    let body = await readCapped(res.body, encoding === 'gzip' || encoding === 'x-gzip' ? true : 'sniff', feed.maxBytes)
    if (isZip(body)) body = await unzipBody(body, feed)
    else if (feed.zipMember !== null) throw new AttemptError('bad_zip', 'body is not a zip archive (the feed names a "zip_member")', false)
    // Validators are kept only from the feed's own origin: they go back to that origin alone (above), where another
    // host's ETag could never match, so a feed that redirects elsewhere would never be answered 304.
    const sameOrigin = new URL(url).origin === origin
    return { kind: 'body', body, etag: sameOrigin ? header('etag') : null, lastModified: sameOrigin ? header('last-modified') : null, contentType: header('content-type') }
  } catch (err) {
    if (err instanceof AttemptError) throw err
    throw transportError(err, signal, stop)
  }
}

/** A transport failure as an AttemptError without any text of the original (which may quote the URL). */
function transportError (err: unknown, signal: AbortSignal, stop: AbortSignal | undefined): AttemptError {
  const code = (err as { code?: string }).code ?? ''
  if (stop?.aborted === true) return new AttemptError('aborted', 'stopped', false)
  if (signal.aborted || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') {
    return new AttemptError('timeout', 'timed out', true)
  }
  // undici's redirect interceptor refuses a redirect back to a URL it has visited (its message names no URL).
  if (code === 'UND_ERR_INVALID_ARG' && /redirect loop/i.test((err as Error).message ?? '')) return new AttemptError('http_status', 'redirect loop', false)
  const causeCode = (err as { cause?: { code?: string } }).cause?.code
  const shown = /^[A-Z_]{2,40}$/.test(code) ? code : /^[A-Z_]{2,40}$/.test(causeCode ?? '') ? (causeCode as string) : 'network error'
  return new AttemptError('network', `network error (${shown})`, true)
}

/** Fetch options beyond the feed's own settings. */
export interface FetchOptions {
  /** What the headers' `${NAME}` references resolve against (Config.feedVariables). */
  variables: Readonly<Record<string, string | undefined>>
  retry?: RetryPolicy
  dispatcher?: Dispatcher
  /** Stops the fetch now: the attempt in flight and any retry wait (the refresher destroyed). */
  signal?: AbortSignal
}

/** Fetches a feed with retries. Throws FeedFetchError (scrubbed) or MissingVariableError. */
export async function fetchFeed (feed: RemoteFeed, validators: Validators, options: FetchOptions): Promise<FetchOutcome> {
  const policy = options.retry ?? kDefaultRetry
  const headers = resolveHeaders(feed.headers, options.variables)
  const secrets = new FeedSecrets(feed.url, headers)
  let last: AttemptError | null = null
  for (let n = 1; n <= policy.attempts; n++) {
    // An aborted wait rejects (and removes its listener from the long-lived signal); the check below ends the loop.
    if (n > 1) await sleep(backoffMs(n - 1, policy), undefined, options.signal === undefined ? {} : { signal: options.signal }).catch(() => {})
    if (options.signal?.aborted === true) break
    try {
      const out = await attempt(feed, headers, validators, options.dispatcher, options.signal)
      return { ...out, attempts: n }
    } catch (err) {
      last = err instanceof AttemptError ? err : new AttemptError('network', 'network error', true)
      if (!last.retry) break
    }
  }
  const reason = last?.reason ?? 'aborted'
  throw new FeedFetchError(reason, secrets.scrub(last?.message ?? 'fetch stopped'))
}
