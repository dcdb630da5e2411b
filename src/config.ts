/**
 * The one configuration schema. Values come from defaults, then an optional JSON config file (IOC_CONFIG),
 * then IOC_* environment variables; everything is validated once at startup into a frozen Config.
 * Nothing else in the project reads process.env.
 */
import { readFileSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The project root (where package.json lives). */
export const kProjectRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..')

/** Validated service configuration. */
export interface Config {
  host: string
  port: number
  /** SQLite file, snapshot cache and history spool live here. */
  dataDir: string
  /** Scoring worker threads; 0 = score inline on the main thread. */
  poolSize: number
  /** Feed manifest path. */
  feeds: string
  /** Compiled snapshot cache; null = <dataDir>/intel. */
  intelCacheDir: string | null
  store: 'sqlite' | 'postgres'
  databaseUrl: string | null
  /** PostgreSQL schema holding the tables (several deployments can share a database). */
  databaseSchema: string
  redisUrl: string | null
  /** Prefix of every Redis key (several deployments can share a Redis). */
  redisPrefix: string
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent'
  /** Create and print one all-permission key on a first start with no keys. */
  bootstrapKey: boolean
  /** Verdicts kept per worker cache shard. */
  cacheSize: number
  /** Indicators being scored at once across the service; beyond it, 503 OVERLOADED. */
  maxInflight: number
  /** Largest request body in bytes. */
  bodyLimit: number
  /** History rows per store transaction. */
  historyBatch: number
  /** Longest a history record waits before its batch is written, in ms. */
  historyFlushMs: number
  /** History records waiting to be written at which new requests get 503 OVERLOADED. */
  historyMaxBacklog: number
  /** History spool size in bytes at which new requests get 503 OVERLOADED. */
  spoolLimit: number
  /** History rows older than this many days are purged; 0 keeps everything. */
  retentionDays: number
  /** Optional folders with fresh ip-location-db CSV files (asn-ipv4-num.csv ...). */
  asnDir: string | null
  countryDir: string | null
  /** Longest graceful shutdown before remaining work is abandoned, in ms. */
  shutdownTimeoutMs: number
  /** A fetched feed body with more than this percentage of rejected lines is refused. */
  feedMaxRejectedPercent: number
  /** A fetched feed body with fewer entries than this percentage of its last good copy's is refused (0 = never). */
  feedMinShrinkPercent: number
  /** Attempts per feed download (1 = no retry). */
  feedAttempts: number
  /** First retry wait in ms (doubled per retry, full jitter, at most 30 s). */
  feedRetryBaseMs: number
}

type Kind = 'string' | 'port' | 'int' | 'bool' | 'path' | 'nullable-path' | 'url'
interface Field { key: keyof Config, kind: Kind, choices?: readonly string[], min?: number, max?: number }

/** Every accepted name, with its Config key, kind and bounds. */
const kFields: Record<string, Field> = {
  IOC_HOST: { key: 'host', kind: 'string' },
  IOC_PORT: { key: 'port', kind: 'port' },
  IOC_DATA_DIR: { key: 'dataDir', kind: 'path' },
  IOC_POOL_SIZE: { key: 'poolSize', kind: 'int', min: 0, max: 256 },
  IOC_FEEDS: { key: 'feeds', kind: 'path' },
  IOC_INTEL_CACHE_DIR: { key: 'intelCacheDir', kind: 'nullable-path' },
  IOC_STORE: { key: 'store', kind: 'string', choices: ['sqlite', 'postgres'] },
  IOC_DATABASE_URL: { key: 'databaseUrl', kind: 'url' },
  IOC_DATABASE_SCHEMA: { key: 'databaseSchema', kind: 'string' },
  IOC_REDIS_URL: { key: 'redisUrl', kind: 'url' },
  IOC_REDIS_PREFIX: { key: 'redisPrefix', kind: 'string' },
  IOC_LOG_LEVEL: { key: 'logLevel', kind: 'string', choices: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] },
  IOC_BOOTSTRAP_KEY: { key: 'bootstrapKey', kind: 'bool' },
  IOC_CACHE_SIZE: { key: 'cacheSize', kind: 'int', min: 0, max: 100_000_000 },
  IOC_MAX_INFLIGHT: { key: 'maxInflight', kind: 'int', min: 1, max: 100_000_000 },
  IOC_BODY_LIMIT: { key: 'bodyLimit', kind: 'int', min: 1024, max: 1024 * 1024 * 1024 },
  IOC_HISTORY_BATCH: { key: 'historyBatch', kind: 'int', min: 1, max: 1_000_000 },
  IOC_HISTORY_FLUSH_MS: { key: 'historyFlushMs', kind: 'int', min: 1, max: 600_000 },
  IOC_HISTORY_MAX_BACKLOG: { key: 'historyMaxBacklog', kind: 'int', min: 1, max: 100_000_000 },
  IOC_SPOOL_LIMIT: { key: 'spoolLimit', kind: 'int', min: 1024, max: Number.MAX_SAFE_INTEGER },
  IOC_RETENTION_DAYS: { key: 'retentionDays', kind: 'int', min: 0, max: 100_000 },
  IOC_ASN_DIR: { key: 'asnDir', kind: 'nullable-path' },
  IOC_COUNTRY_DIR: { key: 'countryDir', kind: 'nullable-path' },
  IOC_SHUTDOWN_TIMEOUT_MS: { key: 'shutdownTimeoutMs', kind: 'int', min: 100, max: 3_600_000 },
  IOC_FEED_MAX_REJECTED_PERCENT: { key: 'feedMaxRejectedPercent', kind: 'int', min: 0, max: 100 },
  IOC_FEED_MIN_SHRINK_PERCENT: { key: 'feedMinShrinkPercent', kind: 'int', min: 0, max: 100 },
  IOC_FEED_ATTEMPTS: { key: 'feedAttempts', kind: 'int', min: 1, max: 10 },
  IOC_FEED_RETRY_BASE_MS: { key: 'feedRetryBaseMs', kind: 'int', min: 1, max: 600_000 }
}

/** Which store to open (the history writer's thread opens its own connection with the same options). */
export type StoreOptions =
  | { kind: 'sqlite', path: string }
  | { kind: 'postgres', url: string, schema?: string }

/** Store options from the config (the history worker opens its own connection with the same options). */
export function storeOptions (config: Readonly<Config>): StoreOptions {
  return config.store === 'postgres'
    ? { kind: 'postgres', url: config.databaseUrl as string, schema: config.databaseSchema }
    : { kind: 'sqlite', path: join(config.dataDir, 'ioc-verdict.db') }
}

/** Defaults, with units. */
export function defaults (): Config {
  return {
    host: '127.0.0.1',
    port: 8080,
    dataDir: join(kProjectRoot, 'data', 'run'),
    poolSize: availableParallelism(),
    feeds: join(kProjectRoot, 'data', 'feeds', 'manifest.json'),
    intelCacheDir: null,
    store: 'sqlite',
    databaseUrl: null,
    databaseSchema: 'public',
    redisUrl: null,
    redisPrefix: 'iocv:',
    logLevel: 'info',
    bootstrapKey: true,
    cacheSize: 100_000, // verdicts per shard
    maxInflight: 200_000, // indicators
    bodyLimit: 16 * 1024 * 1024, // 16 MiB: a 10,000-item bulk with long values and log-only fields fits
    // Records per transaction (whole parts: a scoring worker's chunk of one request is never split). With items
    // stored as parts (src/store/sqlite-history.ts) the size hardly matters to SQLite: 2,000, 5,000 and 20,000 wrote
    // 796,000, 818,000 and 732,000 records/s (bench:history, writer alone, 2026-11-24). It bounds one transaction.
    historyBatch: 20_000,
    historyFlushMs: 100, // ms
    historyMaxBacklog: 500_000, // records (~50 full bulks)
    spoolLimit: 1024 * 1024 * 1024, // 1 GiB
    retentionDays: 90, // days
    asnDir: null,
    countryDir: null,
    shutdownTimeoutMs: 30_000, // ms
    feedMaxRejectedPercent: 50,
    feedMinShrinkPercent: 50,
    feedAttempts: 3,
    feedRetryBaseMs: 1000
  }
}

/** A configuration problem, reported at startup. */
export class ConfigError extends Error {
  readonly code = 'CONFIG_INVALID'
}

function coerce (name: string, field: Field, raw: unknown, base: string): unknown {
  const bad = (why: string): never => { throw new ConfigError(`${name}: ${why}`) }
  switch (field.kind) {
    case 'string': {
      if (typeof raw !== 'string' || raw === '') bad('must be a non-empty string')
      if (field.choices !== undefined && !field.choices.includes(raw as string)) bad(`must be one of ${field.choices.join(', ')}`)
      return raw
    }
    case 'path':
      if (typeof raw !== 'string' || raw === '') bad('must be a path')
      return resolve(base, raw as string)
    case 'nullable-path':
      if (raw === null || raw === '') return null
      if (typeof raw !== 'string') bad('must be a path')
      return resolve(base, raw as string)
    case 'url': {
      if (raw === null || raw === '') return null
      if (typeof raw !== 'string') bad('must be a URL')
      try {
        new URL(raw as string) // eslint-disable-line no-new
      } catch {
        // Never echo the value: it may hold a password.
        bad('is not a valid URL')
      }
      return raw
    }
    case 'bool': {
      if (typeof raw === 'boolean') return raw
      if (raw === '1' || raw === 'true') return true
      if (raw === '0' || raw === 'false') return false
      return bad('must be 0, 1, true or false')
    }
    case 'port':
    case 'int': {
      const n = typeof raw === 'number' ? raw : typeof raw === 'string' && /^\d+$/.test(raw) ? Number(raw) : NaN
      const min = field.kind === 'port' ? 0 : field.min ?? 0
      const max = field.kind === 'port' ? 65535 : field.max ?? Number.MAX_SAFE_INTEGER
      if (!Number.isSafeInteger(n) || n < min || n > max) bad(`must be an integer from ${min} to ${max}`)
      return n
    }
  }
}

/**
 * Builds the configuration from an environment (default: process.env) and optional overrides (CLI flags, tests).
 * Unknown IOC_* names are an error, so a typo never silently falls back to a default.
 */
export function loadConfig (env: Record<string, string | undefined> = process.env, overrides: Partial<Config> = {}): Readonly<Config> {
  const config: Record<string, unknown> = { ...defaults() }
  const apply = (source: Record<string, unknown>, base: string, origin: string): void => {
    for (const [name, raw] of Object.entries(source)) {
      if (!name.startsWith('IOC_') || name === 'IOC_CONFIG' || raw === undefined) continue
      if (name.startsWith('IOC_TEST_')) continue
      const field = kFields[name]
      if (field === undefined) throw new ConfigError(`${origin}: unknown setting ${name}`)
      config[field.key] = coerce(name, field, raw, base)
    }
  }
  const file = env.IOC_CONFIG
  if (file !== undefined && file !== '') {
    let parsed: unknown
    try {
      parsed = JSON.parse(readFileSync(file, 'utf8'))
    } catch (err) {
      throw new ConfigError(`IOC_CONFIG: cannot read config file ${file}`, { cause: err })
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new ConfigError('IOC_CONFIG: the config file must hold a JSON object')
    for (const name of Object.keys(parsed)) {
      if (!name.startsWith('IOC_') || name === 'IOC_CONFIG') throw new ConfigError(`config file: unknown setting ${name}`)
    }
    apply(parsed as Record<string, unknown>, dirname(resolve(file)), 'config file')
  }
  apply(env, process.cwd(), 'environment')
  for (const [k, v] of Object.entries(overrides)) if (v !== undefined) config[k] = v
  if (config.store === 'postgres' && config.databaseUrl === null) throw new ConfigError('IOC_STORE=postgres needs IOC_DATABASE_URL')
  return Object.freeze(config as unknown as Config)
}
