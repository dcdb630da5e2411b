/**
 * Per-key short-window rate limit (@fastify/rate-limit): requests per minute from the key's `rate_limit`, or the
 * operator's default (IOC_RATE_LIMIT). A key with neither is not limited, so a SIEM bulk feed is never throttled by
 * surprise. Counted after authentication (preParsing: a refused request's body is not parsed) and per key id, in
 * Redis when IOC_REDIS_URL is set (so every instance shares the window), else in memory. Answers to a limited key
 * carry RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset; a 429 carries Retry-After and code RATE_LIMITED.
 */
import rateLimit from '@fastify/rate-limit'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { Redis } from 'ioredis'
import { RateLimitedError } from '../errors.ts'

/** The window every limit counts in. */
const kWindowMs = 60_000

/** Options of the rate limit. */
export interface RateLimitOptions {
  /** Requests per minute for keys without their own limit; 0 = no default. */
  defaultPerMinute: number
  redisUrl: string | null
  redisPrefix: string
}

function limitOf (req: FastifyRequest, options: RateLimitOptions): number | null {
  const key = req.apiKey
  if (key === null) return null
  return key.rateLimit ?? (options.defaultPerMinute > 0 ? options.defaultPerMinute : null)
}

/** Registers the rate limit on every route; requests without a key or a limit pass untouched. */
export async function registerRateLimit (app: FastifyInstance, options: RateLimitOptions): Promise<void> {
  let redis: Redis | null = null
  if (options.redisUrl !== null) {
    // Fail fast: a rate-limit check must not hold a request long while Redis is unreachable; skipOnError then lets
    // the request through (the daily quota still applies).
    redis = new Redis(options.redisUrl, { connectTimeout: 2_000, commandTimeout: 1_000, maxRetriesPerRequest: 1 })
    redis.on('error', (err) => { app.log.warn({ err: { message: err.message } }, 'rate-limit store error') })
    app.addHook('onClose', async () => { await redis?.quit().catch(() => redis?.disconnect()) })
  }
  await app.register(rateLimit, {
    global: true,
    hook: 'preParsing',
    timeWindow: kWindowMs,
    max: async (req) => limitOf(req, options) ?? 0,
    keyGenerator: (req) => req.apiKey?.id ?? '',
    allowList: (req) => limitOf(req, options) === null,
    enableDraftSpec: true,
    skipOnError: true,
    ...(redis === null ? {} : { redis, nameSpace: `${options.redisPrefix}rate:` }),
    errorResponseBuilder: (_req, context) => Object.assign(
      new RateLimitedError(`rate limit of ${context.max} requests per minute reached; retry in ${context.after}`),
      { retryAfter: Math.max(1, Math.ceil(context.ttl / 1000)) }
    )
  })
}
