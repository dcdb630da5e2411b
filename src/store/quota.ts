/**
 * Quota counters: indicators admitted per key and UTC day, checked at admission time.
 *
 * These counters run ahead of the store's usage table: a request reserves its indicators before it is scored,
 * while its history rows (and the store's counters) are written later by the history worker. Both are seeded
 * from the store, so a restart (or a flushed Redis) resumes from what was durably counted. Reserve for the UTC day
 * of the request's timestamp, the same day its history records carry, so the two never drift across midnight.
 */
import { Redis } from 'ioredis'
import { safeCause, scrub, secretsOf } from './redact.ts'
import { StoreError } from '../errors.ts'
import { assertUtcDay, secondsUntilNextUtcMidnight, utcDayOf, utcDayStartMs } from '../history/utc-day.ts'
import type { Store } from './types.ts'

/** Outcome of a reservation: admitted with the new count, or refused with the count unchanged. */
export type ReserveResult =
  | { ok: true, used: number }
  | { ok: false, used: number, retryAfterSeconds: number }

/** Per-key daily quota counter with an atomic check-and-add. */
export interface QuotaCounter {
  /** Adds n to the key's count for `day` only if the result stays <= limit; on refusal nothing is counted. */
  reserve (keyId: string, day: string, n: number, limit: number): Promise<ReserveResult>
  /** Gives back n reserved indicators (a request rejected as a whole after reserving); never below zero. */
  release (keyId: string, day: string, n: number): Promise<void>
  /** Current count of the key for `day`. */
  used (keyId: string, day: string): Promise<number>
  /** Throws when the counter cannot serve (health check). */
  ping (): Promise<void>
  /** Releases resources; idempotent. */
  close (): Promise<void>
}

/** Where counters are seeded from: the store's durable usage counters. */
export type UsageSource = Pick<Store, 'usageForKey'>

/** Options of MemoryQuota. */
export interface MemoryQuotaOptions {
  store: UsageSource
  /** Clock in epoch ms (tests). */
  now?: () => number
}

/** Options of RedisQuota. */
export interface RedisQuotaOptions {
  /** redis:// URL; never logged or put in an error. */
  url: string
  store: UsageSource
  /** Prefix of every Redis key (default `iocv:`), so deployments and tests sharing a Redis stay apart. */
  prefix?: string
  /** Clock in epoch ms (tests). */
  now?: () => number
  /** How long to wait for a connection, in ms. */
  connectTimeoutMs?: number
  /**
   * How long a command waits for its answer on a connection that is open, in ms (default 2 s). A Redis that stops
   * answering then fails admission with QUOTA_UNAVAILABLE (503) instead of holding every request while it is silent;
   * a reservation whose answer came too late may still be counted when Redis resumes.
   */
  commandTimeoutMs?: number
  /** Receives connection errors (already scrubbed); without it they are dropped. */
  onError?: (err: StoreError) => void
}

const kDayMs = 24 * 60 * 60 * 1000
const kDefaultPrefix = 'iocv:'
const kKeepDaysAfter = 2 // Redis counters live until 2 days after their day ends: long enough for late releases
const kDefaultConnectTimeoutMs = 2000 // 2 s: admission must fail fast, not hang, when Redis is away
const kDefaultCommandTimeoutMs = 2000 // likewise when Redis stops answering on an open connection

function checkArgs (keyId: unknown, day: unknown, n: unknown, limit?: unknown): void {
  if (typeof keyId !== 'string' || keyId === '') throw new StoreError('INVALID_REQUEST', 'keyId must be a non-empty string')
  assertUtcDay(day)
  if (!Number.isSafeInteger(n) || (n as number) < 0) throw new StoreError('INVALID_REQUEST', 'n must be a non-negative integer')
  if (limit !== undefined && (!Number.isSafeInteger(limit) || (limit as number) < 0)) {
    throw new StoreError('INVALID_REQUEST', 'limit must be a non-negative integer')
  }
}

/**
 * In-process counters for a single instance. Each (key, day) is seeded once from the store on first use; callers
 * arriving while the seed is loading wait for the same load, then check-and-add synchronously (one JS thread, so
 * the check and the add cannot interleave with another request).
 */
export class MemoryQuota implements QuotaCounter {
  readonly #store: UsageSource
  readonly #now: () => number
  readonly #days = new Map<string, Map<string, number>>()
  readonly #loading = new Map<string, Promise<void>>()
  #closed = false

  constructor (options: MemoryQuotaOptions) {
    this.#store = options.store
    this.#now = options.now ?? Date.now
  }

  async #counts (keyId: string, day: string): Promise<Map<string, number>> {
    if (this.#closed) throw new StoreError('STORE_CLOSED', 'the quota counter is closed')
    let counts = this.#days.get(day)
    if (counts?.has(keyId) === true) return counts
    const k = `${day}\u0000${keyId}`
    let loading = this.#loading.get(k)
    if (loading === undefined) {
      loading = (async () => {
        try {
          const seed = await this.#store.usageForKey(keyId, day)
          let map = this.#days.get(day)
          if (map === undefined) {
            this.#prune()
            map = new Map()
            this.#days.set(day, map)
          }
          map.set(keyId, seed)
        } finally {
          this.#loading.delete(k) // a failed seed is retried by the next call
        }
      })()
      this.#loading.set(k, loading)
    }
    await loading
    counts = this.#days.get(day)
    if (counts === undefined) throw new StoreError('STORE_CLOSED', 'the quota counter is closed')
    return counts
  }

  // Days before yesterday no longer admit requests: drop them so memory stays bounded to about two days of keys.
  #prune (): void {
    const oldest = utcDayOf(this.#now() - kDayMs)
    for (const day of this.#days.keys()) if (day < oldest) this.#days.delete(day)
  }

  /** Atomic check-and-add within this process. */
  async reserve (keyId: string, day: string, n: number, limit: number): Promise<ReserveResult> {
    checkArgs(keyId, day, n, limit)
    const counts = await this.#counts(keyId, day)
    const used = counts.get(keyId) ?? 0
    if (used + n > limit) return { ok: false, used, retryAfterSeconds: secondsUntilNextUtcMidnight(this.#now()) }
    counts.set(keyId, used + n)
    return { ok: true, used: used + n }
  }

  /** Gives back a reservation. */
  async release (keyId: string, day: string, n: number): Promise<void> {
    checkArgs(keyId, day, n)
    const counts = this.#days.get(day)
    const used = counts?.get(keyId)
    // Nothing loaded means nothing was reserved here since the start: there is nothing to give back.
    if (counts === undefined || used === undefined) return
    counts.set(keyId, Math.max(0, used - n))
  }

  /** Current count, seeded from the store on first use. */
  async used (keyId: string, day: string): Promise<number> {
    checkArgs(keyId, day, 0)
    return (await this.#counts(keyId, day)).get(keyId) ?? 0
  }

  /** Always ready while open. */
  async ping (): Promise<void> {
    if (this.#closed) throw new StoreError('STORE_CLOSED', 'the quota counter is closed')
  }

  /** Drops the counters; idempotent. */
  async close (): Promise<void> {
    this.#closed = true
    this.#days.clear()
  }
}

// KEYS[1] counter; ARGV[1] n, ARGV[2] limit. Returns {-1, 0} when the counter is missing (the caller seeds it
// from the store and retries), {0, used} when refused, {1, used} when admitted. One script = one atomic step,
// so concurrent instances can never admit past the limit.
const kReserveScript = `
local v = redis.call('GET', KEYS[1])
if not v then return {-1, 0} end
local used = tonumber(v)
local n = tonumber(ARGV[1])
if used + n > tonumber(ARGV[2]) then return {0, used} end
return {1, redis.call('INCRBY', KEYS[1], n)}
`
// KEYS[1] counter; ARGV[1] n. Never creates the counter and never goes below zero.
const kReleaseScript = `
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local n = tonumber(ARGV[1])
local used = tonumber(v)
if n > used then n = used end
return redis.call('DECRBY', KEYS[1], n)
`

interface QuotaCommands {
  iocvQuotaReserve (key: string, n: number, limit: number): Promise<[number, number]>
  iocvQuotaRelease (key: string, n: number): Promise<number>
}

/**
 * Counters shared by every instance through Redis. A counter missing in Redis (first use of the day, or Redis
 * restarted without persistence) is seeded from the store with SET NX, so concurrent seeders agree and the
 * first one wins; counters expire 2 days after their day.
 */
export class RedisQuota implements QuotaCounter {
  readonly #redis: Redis & QuotaCommands
  readonly #store: UsageSource
  readonly #prefix: string
  readonly #now: () => number
  readonly #secrets: string[]
  #closing: Promise<void> | null = null

  constructor (options: RedisQuotaOptions) {
    if (options === null || typeof options !== 'object' || typeof options.url !== 'string' || options.url === '') {
      throw new StoreError('INVALID_OPTIONS', 'RedisQuota needs a redis:// URL')
    }
    this.#store = options.store
    this.#prefix = options.prefix ?? kDefaultPrefix
    this.#now = options.now ?? Date.now
    this.#secrets = secretsOf(options.url)
    let redis: Redis
    try {
      redis = new Redis(options.url, {
        connectTimeout: options.connectTimeoutMs ?? kDefaultConnectTimeoutMs,
        commandTimeout: options.commandTimeoutMs ?? kDefaultCommandTimeoutMs,
        // One retry, then the command fails: admission reports QUOTA_UNAVAILABLE instead of waiting forever.
        maxRetriesPerRequest: 1,
        // disconnect() arms a timer of this length for a socket that may already be gone (refused connection),
        // which would keep the process alive after close(): 2 s by default.
        disconnectTimeout: 100
      })
    } catch (err) {
      throw this.#wrap(err)
    }
    // Without a listener ioredis prints every reconnection error; route them to the caller instead.
    const onError = options.onError
    redis.on('error', (err) => { onError?.(this.#wrap(err)) })
    redis.defineCommand('iocvQuotaReserve', { numberOfKeys: 1, lua: kReserveScript })
    redis.defineCommand('iocvQuotaRelease', { numberOfKeys: 1, lua: kReleaseScript })
    this.#redis = redis as Redis & QuotaCommands
  }

  #wrap (err: unknown): StoreError {
    if (err instanceof StoreError) return err
    const message = scrub(err instanceof Error ? err.message : String(err), this.#secrets)
    return new StoreError('QUOTA_UNAVAILABLE', `Redis quota counter unavailable: ${message}`, { cause: safeCause(err, this.#secrets) })
  }

  #check (): void {
    if (this.#closing !== null) throw new StoreError('STORE_CLOSED', 'the quota counter is closed')
  }

  #key (keyId: string, day: string): string {
    return `${this.#prefix}quota:${day}:${keyId}`
  }

  // Seeds a missing counter from the store. NX: if another instance seeded it meanwhile (possibly already
  // incremented), its value stands. EXAT sets the expiry once; INCRBY/DECRBY keep it.
  async #seed (keyId: string, day: string): Promise<void> {
    const seed = await this.#store.usageForKey(keyId, day)
    const expireAt = utcDayStartMs(day) + (1 + kKeepDaysAfter) * kDayMs
    // A counter for a long-past day would expire at once and never seed: give it a short life instead.
    // Date.now, not the injectable clock: the expiry is compared with Redis's own (real) clock.
    const expireAtSeconds = Math.ceil(Math.max(expireAt, Date.now() + 60 * 1000) / 1000)
    try {
      await this.#redis.set(this.#key(keyId, day), seed, 'EXAT', expireAtSeconds, 'NX')
    } catch (err) {
      throw this.#wrap(err)
    }
  }

  /** Atomic check-and-add across every instance sharing this Redis. */
  async reserve (keyId: string, day: string, n: number, limit: number): Promise<ReserveResult> {
    checkArgs(keyId, day, n, limit)
    this.#check()
    const key = this.#key(keyId, day)
    for (let attempt = 0; attempt < 3; attempt++) {
      let status: number, used: number
      try {
        [status, used] = await this.#redis.iocvQuotaReserve(key, n, limit)
      } catch (err) {
        throw this.#wrap(err)
      }
      if (status === 1) return { ok: true, used }
      if (status === 0) return { ok: false, used, retryAfterSeconds: secondsUntilNextUtcMidnight(this.#now()) }
      await this.#seed(keyId, day)
    }
    // Seeded three times and still missing: something deletes the keys (eviction policy, FLUSHALL loop).
    throw new StoreError('QUOTA_UNAVAILABLE', 'Redis quota counter could not be initialized')
  }

  /** Gives back a reservation. */
  async release (keyId: string, day: string, n: number): Promise<void> {
    checkArgs(keyId, day, n)
    this.#check()
    try {
      await this.#redis.iocvQuotaRelease(this.#key(keyId, day), n)
    } catch (err) {
      throw this.#wrap(err)
    }
  }

  /** Current count, seeded from the store when missing. */
  async used (keyId: string, day: string): Promise<number> {
    checkArgs(keyId, day, 0)
    this.#check()
    const key = this.#key(keyId, day)
    try {
      let v = await this.#redis.get(key)
      if (v === null) {
        await this.#seed(keyId, day)
        v = await this.#redis.get(key)
      }
      return v === null ? 0 : Number(v)
    } catch (err) {
      throw this.#wrap(err)
    }
  }

  /** Throws QUOTA_UNAVAILABLE when Redis does not answer. */
  async ping (): Promise<void> {
    this.#check()
    try {
      await this.#redis.ping()
    } catch (err) {
      throw this.#wrap(err)
    }
  }

  /** Closes the connection after pending commands; idempotent. */
  async close (): Promise<void> {
    // QUIT waits for pending replies; a client that is not connected has none, and QUIT would wait for a reconnection.
    this.#closing ??= this.#redis.status === 'ready'
      ? this.#redis.quit().then(() => {}, () => { this.#redis.disconnect() })
      : Promise.resolve(this.#redis.disconnect())
    await this.#closing
  }
}
