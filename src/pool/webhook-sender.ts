/**
 * Retro-hunt webhooks (docs/API.md "Retro-hunt webhooks"): each batch of new hits at or above a webhook's min_score
 * becomes one delivery, POSTed as `{ "event": "retro_hunt.hits", "delivery_id", "hits" }` with
 *   X-IOC-Delivery: <delivery id>
 *   X-IOC-Timestamp: <unix seconds of the attempt>
 *   X-IOC-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<raw body>" under the webhook's secret>
 * (the scheme Stripe and GitHub receivers know). A timeout, a connection error or a non-2xx answer is retried with
 * exponential backoff and full jitter (from IOC_WEBHOOK_RETRY_BASE_MS, at most an hour apart) for up to 24 hours,
 * then the delivery is marked failed. Deliveries live in the store, so retries outlive a restart, and an instance
 * claims one before sending it (a lease), so a fleet sends each once.
 *
 * SSRF: a URL whose host resolves to a loopback, link-local, private or otherwise non-unicast address is refused when
 * the webhook is created and again at every connection (the addresses checked are the ones connected to, so a name
 * that resolves elsewhere later is caught), unless IOC_WEBHOOK_ALLOW_PRIVATE=1. Secrets: stored sealed
 * (AES-256-GCM under the webhook key), opened only to sign, never logged, never in an error or a listing.
 */
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto'
import { lookup as dnsLookup, type LookupAddress } from 'node:dns'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import ipaddr from 'ipaddr.js'
import { Agent, request } from 'undici'
import type { RetroHit, Store, WebhookWithSecret } from '../store/index.ts'

/** Longest wait between attempts, ms. */
const kMaxBackoffMs = 3_600_000
/** How long a delivery is retried, ms. */
export const kRetryWindowMs = 24 * 3_600_000
/** Deliveries claimed per poll, and sent at once. */
const kBatch = 8
/** Hits per delivery at most (a bigger batch is cut into several deliveries). */
const kMaxHitsPerDelivery = 500
/** Hits handed on per transaction. */
const kHandOnBatch = 500

/** The body of a delivery of `hits` (docs/API.md "Retro-hunt webhooks"). */
function deliveryBody (deliveryId: string, hits: RetroHit[]): string {
  return JSON.stringify({ event: 'retro_hunt.hits', delivery_id: deliveryId, hits })
}

/** The webhook key: 32 bytes from IOC_WEBHOOK_SECRET_KEY (hex or base64), or a file made once in the data directory. */
export function webhookKey (configured: string | null, file: string): Buffer {
  if (configured !== null) {
    const key = /^[0-9a-fA-F]{64}$/.test(configured) ? Buffer.from(configured, 'hex') : Buffer.from(configured, 'base64')
    if (key.length !== 32) throw new Error('IOC_WEBHOOK_SECRET_KEY must hold 32 bytes (64 hex digits or base64)')
    return key
  }
  if (existsSync(file)) {
    const key = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64')
    if (key.length === 32) return key
    throw new Error(`the webhook key file ${file} is damaged`)
  }
  const key = randomBytes(32)
  writeFileSync(file, key.toString('base64') + '\n', { mode: 0o600, flag: 'wx' })
  return key
}

/** Seals a secret for the store: `v1.<iv>.<tag>.<ciphertext>`, base64url. */
export function sealSecret (key: Buffer, secret: string): string {
  const iv = randomBytes(12)
  const c = createCipheriv('aes-256-gcm', key, iv)
  const ct = Buffer.concat([c.update(secret, 'utf8'), c.final()])
  return `v1.${iv.toString('base64url')}.${c.getAuthTag().toString('base64url')}.${ct.toString('base64url')}`
}

/** Opens a sealed secret; throws when it was sealed under another key or altered. */
export function openSecret (key: Buffer, sealed: string): string {
  const [v, iv, tag, ct] = sealed.split('.')
  if (v !== 'v1' || iv === undefined || tag === undefined || ct === undefined) throw new Error('sealed webhook secret of an unknown form')
  const d = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'))
  d.setAuthTag(Buffer.from(tag, 'base64url'))
  return Buffer.concat([d.update(Buffer.from(ct, 'base64url')), d.final()]).toString('utf8')
}

/** A new signing secret (shown once). */
export function newWebhookSecret (): string {
  return `whsec_${randomBytes(32).toString('base64url')}`
}

/** The signature header's value for a body sent at `timestamp` (unix seconds). */
export function signatureOf (secret: string, timestamp: number, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`
}

/** Whether an address may be a webhook's: public unicast only. */
export function publicAddress (address: string): boolean {
  if (!ipaddr.isValid(address)) return false
  let a = ipaddr.parse(address)
  if (a.kind() === 'ipv6') {
    const v6 = a as ipaddr.IPv6
    if (v6.isIPv4MappedAddress()) a = v6.toIPv4Address()
    // ipaddr.js calls every IPv6 address it has no range for "unicast", the deprecated IPv4-compatible ::a.b.c.d
    // (::127.0.0.1) among them: only global unicast (2000::/3) is public.
    else if (!v6.match(kGlobalUnicast)) return false
  }
  return a.range() === 'unicast'
}

const kGlobalUnicast = ipaddr.IPv6.parseCIDR('2000::/3')

/** Why a webhook URL is refused, or null when it is accepted (its host resolved and every address checked). */
export async function refusedUrl (raw: string, allowPrivate: boolean): Promise<string | null> {
  // The URL is stored and listed as sent: no space or control character a log line or a page would show.
  // eslint-disable-next-line no-control-regex -- finding control characters is what it is for
  if (/[\u0000-\u0020\u007f-\u009f]/.test(raw)) return 'url must not hold spaces or control characters'
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return 'url is not a valid URL'
  }
  if (url.port === '0') return 'url port must not be 0'
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:')) return 'url must be https:// (http:// only with IOC_WEBHOOK_ALLOW_PRIVATE=1)'
  if (url.username !== '' || url.password !== '') return 'url must not hold credentials'
  // An empty fragment ("/hook#") parses to an empty hash but stays in the text stored and sent.
  if (url.hash !== '' || raw.includes('#')) return 'url must not hold a fragment'
  // Stored as sent: a backslash, which this parser reads as '/', another parser may read as part of the host
  // ("https://8.8.8.8\\@127.0.0.1/" names 127.0.0.1 to one that takes the text before '@' as userinfo).
  if (raw.includes('\\')) return 'url must not hold a backslash'
  let addresses: LookupAddress[]
  try {
    addresses = await resolve(url.hostname.replace(/^\[|\]$/g, ''))
  } catch {
    return 'url host does not resolve'
  }
  if (!allowPrivate && addresses.some((a) => !publicAddress(a.address))) return 'url host resolves to a loopback, link-local, private or reserved address'
  return null
}

/**
 * Why an attempt to a stored URL is refused before any connection, or null: what the connection-time lookup cannot see.
 * A host written as an address is connected to without a lookup, and a webhook stored while
 * IOC_WEBHOOK_ALLOW_PRIVATE was 1 may hold http:// or a private address; with the setting at 0 neither is sent to.
 */
export function refusedAtSend (raw: string, allowPrivate: boolean): string | null {
  if (allowPrivate) return null
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return 'the stored URL is not a valid URL'
  }
  if (url.protocol !== 'https:') return 'the URL is not https:// (allowed only with IOC_WEBHOOK_ALLOW_PRIVATE=1)'
  const host = url.hostname.replace(/^\[|\]$/g, '')
  if (ipaddr.isValid(host) && !publicAddress(host)) return 'the host is a non-public address'
  return null
}

async function resolve (host: string): Promise<LookupAddress[]> {
  return await new Promise((resolve, reject) => {
    dnsLookup(host, { all: true, verbatim: true }, (err, addresses) => { err === null ? resolve(addresses) : reject(err) })
  })
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void

/** A `lookup` for net.connect that refuses a host with any non-public address (SSRF), at connection time. */
function guardedLookup (allowPrivate: boolean) {
  return (host: string, options: { all?: boolean } | number, cb: LookupCallback): void => {
    resolve(host).then((addresses) => {
      if (!allowPrivate && addresses.some((a) => !publicAddress(a.address))) {
        const err: NodeJS.ErrnoException = new Error('webhook host resolves to a non-public address')
        err.code = 'EWEBHOOKADDRESS'
        cb(err, '')
        return
      }
      const all = typeof options === 'object' && options.all === true
      const first = addresses[0]
      if (first === undefined) {
        const err: NodeJS.ErrnoException = new Error('webhook host has no address')
        err.code = 'ENOTFOUND'
        cb(err, '')
        return
      }
      if (all) cb(null, addresses)
      else cb(null, first.address, first.family)
    }, (err: NodeJS.ErrnoException) => { cb(err, '') })
  }
}

/** What the sender logs (never a secret, a header or a body). */
export interface SenderLogger {
  info: (obj: object, msg: string) => void
  warn: (obj: object, msg: string) => void
  error: (obj: object, msg: string) => void
}

/** Options of the sender. */
export interface WebhookSenderOptions {
  store: Store
  key: Buffer
  allowPrivate: boolean
  /** First retry wait, ms (doubled per attempt, full jitter, at most an hour). */
  retryBaseMs: number
  /** Longest an attempt may take, ms. */
  timeoutMs: number
  logger: SenderLogger
}

/** Counters for /metrics. */
export interface WebhookState { delivered: number, retried: number, failed: number }

/** Queues deliveries of new hits and sends due ones. */
export class WebhookSender {
  readonly #o: WebhookSenderOptions
  readonly #agent: Agent
  readonly #state: WebhookState = { delivered: 0, retried: 0, failed: 0 }
  #timer: NodeJS.Timeout | null = null
  #polling: Promise<void> | null = null
  #sweeping: Promise<void> | null = null
  /** Wakes a poll waiting for a slot, to claim what became due (a tick, new deliveries). */
  #wake: (() => void) | null = null
  /** Whether the last hand-on failed (logged once per run of failures). */
  #sweepFailing = false
  /** Whether the last poll could not read the due deliveries (logged once per run of failures, as the hand-on). */
  #pollFailing = false
  #closed = false
  readonly #aborts = new Set<AbortController>()

  constructor (options: WebhookSenderOptions) {
    this.#o = options
    this.#agent = new Agent({ connect: { lookup: guardedLookup(options.allowPrivate) as never, timeout: options.timeoutMs }, headersTimeout: options.timeoutMs, bodyTimeout: options.timeoutMs })
  }

  /** Counters. */
  state (): Readonly<WebhookState> {
    return this.#state
  }

  /** A new webhook's secret, sealed for the store. */
  seal (secret: string): string {
    return sealSecret(this.#o.key, secret)
  }

  /** Why a webhook URL is refused (SSRF guard, scheme), or null. */
  async checkUrl (url: string): Promise<string | null> {
    return await refusedUrl(url, this.#o.allowPrivate)
  }

  /** Starts polling for due deliveries (those of a previous run included). */
  start (): void {
    const every = Math.min(1000, Math.max(10, this.#o.retryBaseMs))
    this.#timer = setInterval(() => { this.#sweep(); this.#kick() }, every)
    this.#timer.unref()
    this.#sweep()
    this.#kick()
  }

  /**
   * Hands every retro-hunt hit not yet handed on to the webhooks (a pass's, a pass's cut by a crash, the CLI's):
   * one delivery per webhook of each tenant for its hits at or above the webhook's min_score, queued in the
   * transaction that marks the hits handed (WebhookStore.handOnHits); then starts sending.
   */
  async handOn (): Promise<void> {
    await this.#handOnAll()
    this.#kick()
  }

  /** Hands on every hit not yet handed on; how many. */
  async #handOnAll (): Promise<number> {
    const db = this.#o.store.webhooks
    let total = 0
    for (;;) {
      const n = await db.handOnHits(kHandOnBatch, kMaxHitsPerDelivery, deliveryBody)
      total += n
      if (n < kHandOnBatch || this.#closed) return total
    }
  }

  /**
   * At every tick, apart from sending (so that receivers slow to answer never hold it up): hands on the hits left not
   * handed on, a pass's whose process stopped or crashed first, or the CLI's.
   */
  #sweep (): void {
    if (this.#closed || this.#sweeping !== null) return
    this.#sweeping = this.#handOnAll().then((n) => {
      if (this.#sweepFailing) this.#o.logger.info({}, 'retro-hunt hits are handed to the webhooks again')
      this.#sweepFailing = false
      if (n > 0) this.#kick()
    }, (err: unknown) => {
      if (!this.#sweepFailing) this.#o.logger.error({ err }, 'retro-hunt hits could not be handed to the webhooks (tried again every poll)')
      this.#sweepFailing = true
    }).finally(() => { this.#sweeping = null })
  }

  #kick (): void {
    if (this.#closed) return
    if (this.#polling !== null) {
      this.#wake?.()
      return
    }
    this.#polling = this.#poll().then(() => {
      if (this.#pollFailing) this.#o.logger.info({}, 'webhook deliveries are read again')
      this.#pollFailing = false
    }, (err: unknown) => {
      // Every tick polls again: a store outage would log this every second, stack and all.
      if (!this.#pollFailing) this.#o.logger.error({ err }, 'webhook deliveries could not be read (tried again every poll)')
      this.#pollFailing = true
    }).finally(() => { this.#polling = null })
  }

  /**
   * Sends due deliveries, at most kBatch at once: each one that ends makes room for the next due one, so a receiver
   * that answers slowly holds up one slot, not a whole round.
   */
  async #poll (): Promise<void> {
    const running = new Set<Promise<void>>()
    try {
      for (;;) {
        const room = kBatch - running.size
        if (!this.#closed && room > 0) {
          for (const d of await this.#o.store.webhooks.claimDue(Date.now(), room, this.#o.timeoutMs * 2 + 5_000)) {
            const p: Promise<void> = this.#attempt(d).catch((err: unknown) => {
              this.#o.logger.error({ err, delivery: d.id }, 'webhook delivery attempt could not be recorded')
            }).finally(() => { running.delete(p) })
            running.add(p)
          }
        }
        if (running.size === 0) return
        // Until an attempt ends or a tick (or new deliveries) may have made another due.
        await Promise.race([...running, new Promise<void>((resolve) => { this.#wake = resolve })])
        this.#wake = null
      }
    } finally {
      await Promise.allSettled(running)
    }
  }

  async #attempt (d: { id: string, webhookId: string, body: string, attempts: number, createdMs: number }): Promise<void> {
    const db = this.#o.store.webhooks
    const hook = await db.get(d.webhookId)
    if (hook === null) return // deleted meanwhile: its deliveries went with it
    const error = await this.#send(hook, d)
    const now = Date.now()
    if (error === null) {
      this.#state.delivered++
      await db.attempted(d.id, { status: 'delivered', error: null, nextAt: now }, now)
      this.#o.logger.info({ webhook: hook.id, delivery: d.id, attempts: d.attempts + 1 }, 'webhook delivery sent')
      return
    }
    const wait = Math.min(kMaxBackoffMs, this.#o.retryBaseMs * 2 ** d.attempts) * Math.random()
    const nextAt = now + Math.max(1, Math.round(wait))
    if (nextAt > d.createdMs + kRetryWindowMs) {
      this.#state.failed++
      await db.attempted(d.id, { status: 'failed', error, nextAt: now }, now)
      this.#o.logger.warn({ webhook: hook.id, delivery: d.id, attempts: d.attempts + 1, error }, 'webhook delivery failed for good')
      return
    }
    this.#state.retried++
    await db.attempted(d.id, { status: 'pending', error, nextAt }, now)
    this.#o.logger.info({ webhook: hook.id, delivery: d.id, attempts: d.attempts + 1, error, retry_in_ms: nextAt - now }, 'webhook delivery will be retried')
  }

  /** One attempt: null when the receiver answered 2xx, else why not (no secret in it). */
  async #send (hook: WebhookWithSecret, d: { id: string, body: string }): Promise<string | null> {
    const refused = refusedAtSend(hook.url, this.#o.allowPrivate)
    if (refused !== null) return refused
    let secret: string
    try {
      secret = openSecret(this.#o.key, hook.secretSealed)
    } catch {
      return 'the webhook secret cannot be opened with this service\'s webhook key'
    }
    const ts = Math.floor(Date.now() / 1000)
    const abort = new AbortController()
    this.#aborts.add(abort)
    const timer = setTimeout(() => { abort.abort() }, this.#o.timeoutMs)
    try {
      const res = await request(hook.url, {
        method: 'POST',
        dispatcher: this.#agent,
        signal: abort.signal,
        headers: {
          'content-type': 'application/json',
          'user-agent': 'ioc-verdict-webhook',
          'x-ioc-delivery': d.id,
          'x-ioc-timestamp': String(ts),
          'x-ioc-signature': signatureOf(secret, ts, d.body)
        },
        body: d.body
      })
      await res.body.dump({ limit: 64 * 1024 }).catch(() => {})
      return res.statusCode >= 200 && res.statusCode < 300 ? null : `HTTP ${res.statusCode}`
    } catch (err) {
      if (abort.signal.aborted) return `no answer within ${this.#o.timeoutMs} ms`
      const e = err as NodeJS.ErrnoException
      if (e.code === 'EWEBHOOKADDRESS' || (e.cause as NodeJS.ErrnoException | undefined)?.code === 'EWEBHOOKADDRESS') return 'the host resolves to a non-public address'
      return `connection failed (${e.code ?? (e.cause as NodeJS.ErrnoException | undefined)?.code ?? 'error'})`
    } finally {
      clearTimeout(timer)
      this.#aborts.delete(abort)
    }
  }

  /** Stops polling and waits for attempts in flight (each bounded by the timeout). */
  async close (): Promise<void> {
    this.#closed = true
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
    await this.#sweeping
    await this.#polling
    await this.#agent.close()
  }

  /** Aborts attempts in flight (their deliveries stay pending: the lease ends and they are sent again). */
  async destroy (): Promise<void> {
    this.#closed = true
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
    for (const a of this.#aborts) a.abort()
    await this.#sweeping
    await this.#polling?.catch(() => {})
    await this.#agent.destroy()
  }
}
