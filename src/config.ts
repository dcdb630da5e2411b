/**
 * The one configuration schema. Values come from defaults, then an optional JSON config file (IOC_CONFIG),
 * then IOC_* environment variables; everything is validated once at startup into a frozen Config.
 * Nothing else in the project reads process.env.
 */
import { readFileSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ConfigError } from './errors.ts'
import { canonicalCidr } from './store/api-keys.ts'

/** The project root (where package.json lives). */
export const kProjectRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..')

/** Validated service configuration. */
export interface Config {
  host: string
  port: number
  /** SQLite file, snapshot cache and history journal live here. */
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
  /** This instance's name in the fleet (status, logs), or null: host name, pid and a random suffix. */
  instanceName: string | null
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent'
  /** Create and print one all-permission key on a first start with no keys. */
  bootstrapKey: boolean
  /** Verdicts kept per worker cache shard. */
  cacheSize: number
  /** Indicators being scored at once across the service; beyond it, 503 OVERLOADED. */
  maxInflight: number
  /** A dashboard session ends after this long without a request, in ms. */
  sessionIdleMs: number
  /** A dashboard session ends this long after sign-in whatever its use, in ms. */
  sessionMaxMs: number
  /** Requests per minute for keys without a rate_limit of their own; 0 = no default (such keys are not limited). */
  rateLimit: number
  /** Proxies (addresses or CIDR blocks) whose X-Forwarded-For and X-Forwarded-Proto are believed; null = none. */
  trustProxy: string[] | null
  /** Largest request body in bytes. */
  bodyLimit: number
  /** History rows per store transaction. */
  historyBatch: number
  /** Longest a history record waits before its batch is written, in ms. */
  historyFlushMs: number
  /** History records waiting to be written at which new requests get 503 OVERLOADED. */
  historyMaxBacklog: number
  /** History journal bytes not yet in the store at which new requests get 503 OVERLOADED. */
  journalLimit: number
  /** Size past which the journal begins a new file (files wholly in the store are deleted), in bytes. */
  journalSegmentBytes: number
  /** Most fill bytes written ahead of the journal's frames at a time, so that group writes do not grow the file; 0: none. */
  journalPreallocateBytes: number
  /** sync: a request's history is synced to the journal before its answer; async: within the window below. */
  historyDurability: 'sync' | 'async'
  /** async durability: longest time history waits before it is synced, in ms. */
  historyAsyncWindowMs: number
  /** async durability: bytes waiting to be synced beyond which answers wait for the sync (as in sync mode). */
  historyAsyncWindowBytes: number
  /** Longest a request waits for its history to be synced before it is answered 503 OVERLOADED, in ms. */
  historyCommitTimeoutMs: number
  /** History rows older than this many days are purged; 0 keeps everything. */
  retentionDays: number
  /** Retro-hunt lookback in days (0 turns the retro-hunt off); never past retentionDays. */
  retroHuntDays: number
  /** Share of the time a retro-hunt pass works beside verdicts, in percent (100: without pauses). */
  retroHuntDutyPercent: number
  /** Run retro-hunt passes at the lowest CPU priority (nice 19 on Linux); false: normal priority, paced alone. */
  retroHuntLowPriority: boolean
  /** Accept webhook URLs resolving to loopback, link-local or private addresses (and http://): labs and tests only. */
  webhookAllowPrivate: boolean
  /** First wait before a failed webhook delivery is retried, in ms (doubled per attempt, full jitter, at most 1 h). */
  webhookRetryBaseMs: number
  /** Longest a webhook delivery attempt may take, in ms. */
  webhookTimeoutMs: number
  /** Key sealing webhook secrets in the store (32 bytes, hex or base64); null: a key file in the data directory. */
  webhookSecretKey: string | null
  /** Optional folders with fresh ip-location-db CSV files (asn-ipv4-num.csv ...). */
  asnDir: string | null
  countryDir: string | null
  /** Longest graceful shutdown before remaining work is abandoned, in ms. */
  shutdownTimeoutMs: number
  /** Longest time a client may take to send a request's headers, in ms (then the connection is closed). */
  headersTimeoutMs: number
  /** Longest time a client may take to send a whole request, headers and body, in ms (then 408 and close). */
  requestTimeoutMs: number
  /** How long an idle keep-alive connection stays open, in ms. */
  keepAliveTimeoutMs: number
  sendTimeoutMs: number
  /** Open connections at most; connections beyond it are closed at once, so file descriptors stay bounded. */
  maxConnections: number
  /** Open connections from one peer address at most (0: no bound of its own); more are closed as they arrive. */
  maxConnectionsPerAddress: number
  /** A fetched feed body with more than this percentage of rejected lines is refused. */
  feedMaxRejectedPercent: number
  /** A fetched feed body with fewer entries than this percentage of its last good copy's is refused (0 = never). */
  feedMinShrinkPercent: number
  /** Attempts per feed download (1 = no retry). */
  feedAttempts: number
  /** First retry wait in ms (doubled per retry, full jitter, at most 30 s). */
  feedRetryBaseMs: number
  /**
   * The environment variables a feed's headers may name (`${NAME}` in the manifest), read once at start: every
   * variable of the environment but the IOC_* settings, which hold the service's own secrets (a database URL).
   */
  feedVariables: Readonly<Record<string, string>>
  /** What the service logs at start about the configuration (a deprecated setting in use). */
  warnings: readonly string[]
}

type Kind = 'string' | 'port' | 'int' | 'bool' | 'path' | 'nullable-path' | 'url' | 'addresses' | 'secret'
interface Field {
  key: keyof Config
  kind: Kind
  /** A string's allowed values; a URL's allowed schemes (`redis:`). */
  choices?: readonly string[]
  min?: number
  max?: number
  /** The value when the setting is not given. */
  default: unknown
  /** The default as the docs show it, where the value itself depends on the machine or install path. */
  shown?: string
  /** A former name: the setting that replaces it (a start that uses it logs a warning). */
  replacedBy?: string
  /** What the setting does, for the docs table (configTable). */
  doc: string
}

/**
 * The one configuration schema: every accepted name, with its Config key, kind, bounds, default and meaning. Parsing,
 * validation, defaults() and the docs table (configTable, `npm run docs:config`) all come from here.
 */
const kFields: Record<string, Field> = {
  IOC_HOST: { key: 'host', kind: 'string', default: '127.0.0.1', doc: 'listen address' },
  IOC_PORT: { key: 'port', kind: 'port', default: 8080, doc: 'listen port (0 = any free port)' },
  IOC_DATA_DIR: { key: 'dataDir', kind: 'path', default: join(kProjectRoot, 'data', 'run'), shown: './data/run', doc: 'SQLite file, snapshot cache, history journal (made with mode 0700 when missing: it holds every tenant\'s history)' },
  IOC_POOL_SIZE: { key: 'poolSize', kind: 'int', min: 0, max: 256, default: availableParallelism(), shown: 'CPU count', doc: 'scoring worker threads; 0 scores inline on the main thread' },
  IOC_FEEDS: { key: 'feeds', kind: 'path', default: join(kProjectRoot, 'data', 'feeds', 'manifest.json'), shown: 'data/feeds/manifest.json', doc: 'feed manifest' },
  IOC_INTEL_CACHE_DIR: { key: 'intelCacheDir', kind: 'nullable-path', default: null, shown: '<data dir>/intel', doc: 'compiled snapshot cache' },
  IOC_STORE: { key: 'store', kind: 'string', choices: ['sqlite', 'postgres'], default: 'sqlite', doc: '`sqlite` or `postgres`' },
  IOC_DATABASE_URL: { key: 'databaseUrl', kind: 'url', choices: ['postgres:', 'postgresql:'], default: null, doc: 'PostgreSQL URL (with `IOC_STORE=postgres`)' },
  IOC_DATABASE_SCHEMA: { key: 'databaseSchema', kind: 'string', default: 'public', doc: 'PostgreSQL schema of the tables (several deployments can share a database)' },
  IOC_REDIS_URL: { key: 'redisUrl', kind: 'url', choices: ['redis:', 'rediss:'], default: null, doc: 'Redis URL: shared quota counters across instances' },
  IOC_REDIS_PREFIX: { key: 'redisPrefix', kind: 'string', default: 'iocv:', doc: 'prefix of every Redis key (several deployments can share a Redis)' },
  IOC_INSTANCE_NAME: { key: 'instanceName', kind: 'string', default: null, shown: 'host:pid:random', doc: 'this instance\'s name in the fleet\'s status (`intel status`, the sources route) when several share PostgreSQL' },
  IOC_LOG_LEVEL: { key: 'logLevel', kind: 'string', choices: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], default: 'info', doc: 'pino level. At `info` each request writes one access line as it is answered (`request completed`, or `request errored`: method, URL with its query redacted, client address, status, time taken, request id); `debug` adds a line as each request arrives (`incoming request`); `warn` writes no line per request' },
  IOC_BOOTSTRAP_KEY: { key: 'bootstrapKey', kind: 'bool', default: true, shown: '1', doc: 'create and print one all-permission key on a first start with no keys (instances starting together on one empty PostgreSQL schema make one between them)' },
  IOC_CACHE_SIZE: { key: 'cacheSize', kind: 'int', min: 0, max: 100_000_000, default: 100_000, doc: 'verdicts per worker cache shard (off the heap: 768 bytes of ring each, at most 512 MiB per shard)' },
  IOC_MAX_INFLIGHT: { key: 'maxInflight', kind: 'int', min: 1, max: 100_000_000, default: 200_000, doc: 'indicators being scored at once; a request that would pass it while others are in flight gets 503 OVERLOADED (one alone is always admitted, so a bulk larger than the bound still runs)' },
  IOC_RATE_LIMIT: { key: 'rateLimit', kind: 'int', min: 0, max: 1_000_000, default: 0, doc: 'requests per minute for keys without a `rate_limit` of their own; 0 = none (such keys are not limited)' },
  IOC_TRUST_PROXY: { key: 'trustProxy', kind: 'addresses', default: null, doc: 'addresses or CIDR blocks of reverse proxies (comma-separated) whose `X-Forwarded-For` and `X-Forwarded-Proto` are believed: the client address of sign-in limits and `allowed_cidrs`, and HTTPS for the session cookie' },
  IOC_SESSION_IDLE_MS: { key: 'sessionIdleMs', kind: 'int', min: 1000, max: 7 * 86_400_000, default: 30 * 60_000, doc: 'a dashboard session ends after this long without a request, ms' },
  IOC_SESSION_MAX_MS: { key: 'sessionMaxMs', kind: 'int', min: 1000, max: 30 * 86_400_000, default: 12 * 3_600_000, doc: 'a dashboard session ends this long after sign-in, ms' },
  // 16 MiB: a 10,000-item bulk with long values and log-only fields fits.
  IOC_BODY_LIMIT: { key: 'bodyLimit', kind: 'int', min: 1024, max: 1024 * 1024 * 1024, default: 16 * 1024 * 1024, doc: 'largest request body, bytes' },
  // Records per transaction (whole parts: a scoring worker's chunk of one request is never split). With items stored
  // as parts the size hardly matters to SQLite: 2,000, 5,000 and 20,000 wrote 796,000, 818,000 and 732,000 records/s
  // (bench:history, writer alone, 2026-11-24). It bounds one transaction.
  IOC_HISTORY_BATCH: { key: 'historyBatch', kind: 'int', min: 1, max: 1_000_000, default: 100_000, doc: 'history records per transaction (whole parts)' },
  IOC_HISTORY_FLUSH_MS: { key: 'historyFlushMs', kind: 'int', min: 1, max: 600_000, default: 100, doc: 'longest a history record waits before its batch is written, ms' },
  // About 50 full bulks.
  IOC_HISTORY_MAX_BACKLOG: { key: 'historyMaxBacklog', kind: 'int', min: 1, max: 100_000_000, default: 500_000, doc: 'history records waiting to be written at which new requests get 503 OVERLOADED' },
  IOC_JOURNAL_LIMIT: { key: 'journalLimit', kind: 'int', min: 1024, max: Number.MAX_SAFE_INTEGER, default: 1024 * 1024 * 1024, doc: 'history journal bytes (records answered, not yet in the store) at which new requests get 503 OVERLOADED' },
  // The spool's limit before the journal replaced it: the same bound, under its old name.
  IOC_SPOOL_LIMIT: { key: 'journalLimit', kind: 'int', min: 1024, max: Number.MAX_SAFE_INTEGER, default: 1024 * 1024 * 1024, replacedBy: 'IOC_JOURNAL_LIMIT', doc: 'deprecated: the former name of `IOC_JOURNAL_LIMIT` (a start with it logs a warning)' },
  IOC_JOURNAL_SEGMENT_BYTES: { key: 'journalSegmentBytes', kind: 'int', min: 4096, max: 1024 * 1024 * 1024, default: 64 * 1024 * 1024, doc: 'bytes per journal file before the next one starts' },
  IOC_JOURNAL_PREALLOCATE_BYTES: { key: 'journalPreallocateBytes', kind: 'int', min: 0, max: 1024 * 1024 * 1024, default: 4 * 1024 * 1024, doc: 'most bytes of fill written ahead of the journal\'s records at a time, so that a synced write does not also grow the file (about a third cheaper on ext4 and XFS); 0 writes none (copy-on-write file systems such as btrfs and ZFS gain nothing from it)' },
  IOC_HISTORY_DURABILITY: { key: 'historyDurability', kind: 'string', choices: ['sync', 'async'], default: 'sync', doc: '`sync`: history is fsynced before the answer; `async`: within the window below' },
  IOC_HISTORY_ASYNC_WINDOW_MS: { key: 'historyAsyncWindowMs', kind: 'int', min: 1, max: 10_000, default: 50, doc: 'async durability: longest an answered record waits for its fsync, ms' },
  IOC_HISTORY_ASYNC_WINDOW_BYTES: { key: 'historyAsyncWindowBytes', kind: 'int', min: 1024, max: 1024 * 1024 * 1024, default: 16 * 1024 * 1024, doc: 'async durability: most answered bytes not yet fsynced' },
  IOC_HISTORY_COMMIT_TIMEOUT_MS: { key: 'historyCommitTimeoutMs', kind: 'int', min: 100, max: 600_000, default: 10_000, doc: 'longest a request waits for its history to be durable before 503 OVERLOADED, ms' },
  IOC_RETENTION_DAYS: { key: 'retentionDays', kind: 'int', min: 0, max: 100_000, default: 90, doc: 'history purge age in days (0 keeps everything); usage counters are kept' },
  IOC_RETRO_HUNT_DAYS: { key: 'retroHuntDays', kind: 'int', min: 0, max: 100_000, default: 30, doc: 'retro-hunt lookback in days: on each snapshot swap, history of this many days is matched against what the new snapshot raises (0 = off; never past `IOC_RETENTION_DAYS`)' },
  // A pass is CPU-bound; paced, it leaves the scoring threads their cores (docs/PERFORMANCE.md "Retro-hunt").
  IOC_RETRO_HUNT_DUTY_PERCENT: { key: 'retroHuntDutyPercent', kind: 'int', min: 1, max: 100, default: 20, doc: 'share of the time a retro-hunt pass works, percent (it pauses the rest; 100 = no pauses)' },
  // Lowest priority: a pass takes a core only when verdicts leave one idle, and may wait long on a machine kept busy.
  IOC_RETRO_HUNT_LOW_PRIORITY: { key: 'retroHuntLowPriority', kind: 'bool', default: true, shown: '1', doc: 'run retro-hunt passes on a thread at the lowest CPU priority (nice 19, Linux), so they wait for idle cores; 0 = normal priority, paced by the duty percent alone' },
  IOC_WEBHOOK_ALLOW_PRIVATE: { key: 'webhookAllowPrivate', kind: 'bool', default: false, shown: '0', doc: 'accept webhook URLs that resolve to loopback, link-local or private addresses, and http:// (SSRF guard off: labs and tests only)' },
  IOC_WEBHOOK_RETRY_BASE_MS: { key: 'webhookRetryBaseMs', kind: 'int', min: 1, max: 3_600_000, default: 30_000, doc: 'first wait before a failed webhook delivery is retried, ms (doubled per attempt, full jitter, at most 1 h; retried for 24 h)' },
  IOC_WEBHOOK_TIMEOUT_MS: { key: 'webhookTimeoutMs', kind: 'int', min: 100, max: 600_000, default: 10_000, doc: 'longest a webhook delivery attempt may take, ms' },
  IOC_WEBHOOK_SECRET_KEY: { key: 'webhookSecretKey', kind: 'secret', default: null, shown: '<data dir>/webhook.key', doc: 'key sealing webhook signing secrets in the store: 32 bytes as 64 hex digits or base64 (every instance of a fleet needs the same); unset: a key file made in the data directory' },
  IOC_ASN_DIR: { key: 'asnDir', kind: 'nullable-path', default: null, shown: 'npm package', doc: 'folder with fresh ip-location-db `asn-ipv{4,6}-num.csv` files' },
  IOC_COUNTRY_DIR: { key: 'countryDir', kind: 'nullable-path', default: null, shown: 'npm package', doc: 'folder with fresh ip-location-db `geo-whois-asn-country-ipv{4,6}-num.csv` files' },
  IOC_SHUTDOWN_TIMEOUT_MS: { key: 'shutdownTimeoutMs', kind: 'int', min: 100, max: 3_600_000, default: 30_000, doc: 'longest graceful shutdown before remaining work is abandoned, ms' },
  IOC_HEADERS_TIMEOUT_MS: { key: 'headersTimeoutMs', kind: 'int', min: 100, max: 600_000, default: 10_000, doc: 'time for a client to send the request headers, ms' },
  // A 16 MiB body (the default limit) must arrive at 0.55 MB/s at least; a stalled body is cut after this.
  IOC_REQUEST_TIMEOUT_MS: { key: 'requestTimeoutMs', kind: 'int', min: 100, max: 3_600_000, default: 30_000, doc: 'time for a client to send the whole request, ms' },
  // Longer than the idle timeout of a reverse proxy in front (60 s for nginx and most load balancers), so the proxy,
  // not this service, closes idle connections and never sends a request on a connection being closed.
  IOC_KEEP_ALIVE_TIMEOUT_MS: { key: 'keepAliveTimeoutMs', kind: 'int', min: 100, max: 3_600_000, default: 65_000, doc: 'idle keep-alive connections are closed after this, ms' },
  // Above the keep-alive timeout: an idle keep-alive connection is the keep-alive timeout's to close.
  IOC_SEND_TIMEOUT_MS: { key: 'sendTimeoutMs', kind: 'int', min: 1_000, max: 3_600_000, default: 120_000, doc: 'a connection on which nothing moves for this long (a client that stopped reading its answer) is cut, ms' },
  IOC_MAX_CONNECTIONS: { key: 'maxConnections', kind: 'int', min: 1, max: 10_000_000, default: 4096, doc: 'open connections at most; more are closed as they arrive' },
  IOC_MAX_CONNECTIONS_PER_ADDRESS: { key: 'maxConnectionsPerAddress', kind: 'int', min: 0, max: 10_000_000, default: 1024, doc: 'open connections from one peer address at most, so one client cannot take all of `IOC_MAX_CONNECTIONS`; more are closed as they arrive; 0 = no bound of its own. Proxies listed in `IOC_TRUST_PROXY` are not bounded (every client\'s connections come through them)' },
  IOC_FEED_MAX_REJECTED_PERCENT: { key: 'feedMaxRejectedPercent', kind: 'int', min: 0, max: 100, default: 50, doc: 'a fetched feed with more rejected lines than this percentage is refused (the last good copy stays)' },
  IOC_FEED_MIN_SHRINK_PERCENT: { key: 'feedMinShrinkPercent', kind: 'int', min: 0, max: 100, default: 50, doc: 'a fetched feed with fewer entries than this percentage of its last good copy is refused; 0 = never' },
  IOC_FEED_ATTEMPTS: { key: 'feedAttempts', kind: 'int', min: 1, max: 10, default: 3, doc: 'attempts per feed download (1 = no retry)' },
  IOC_FEED_RETRY_BASE_MS: { key: 'feedRetryBaseMs', kind: 'int', min: 1, max: 600_000, default: 1000, doc: 'first retry wait, ms (doubled per retry, full jitter, at most 30 s)' }
}

/** The settings as a Markdown table (setting, default, meaning), from the schema: `npm run docs:config`. */
export function configTable (): string {
  const rows = Object.entries(kFields).map(([name, f]) => {
    const shown = f.shown ?? (f.default === null ? '-' : typeof f.default === 'boolean' ? (f.default ? '1' : '0') : String(f.default))
    return `| \`${name}\` | ${shown} | ${f.doc} |`
  })
  return ['| Setting | Default | Meaning |', '| --- | --- | --- |', ...rows].join('\n')
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

/** Defaults (kFields). */
export function defaults (): Config {
  const out: Record<string, unknown> = { feedVariables: Object.freeze({}), warnings: Object.freeze([]) }
  for (const f of Object.values(kFields)) out[f.key] = f.default
  return out as unknown as Config
}

/** The setting of each Config key (the first name listed for it: IOC_JOURNAL_LIMIT before its old name). */
const kNameOf = new Map<string, string>()
for (const [name, f] of Object.entries(kFields)) if (!kNameOf.has(f.key)) kNameOf.set(f.key, name)

/** The environment's variables but the IOC_* settings, for feed headers (Config.feedVariables). */
function feedVariablesOf (env: Record<string, string | undefined>): Readonly<Record<string, string>> {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(env)) if (!name.startsWith('IOC_') && value !== undefined) out[name] = value
  return Object.freeze(out)
}

function coerce (name: string, field: Field, raw: unknown, base: string): unknown {
  const bad = (why: string): never => { throw new ConfigError(`${name}: ${why}`) }
  switch (field.kind) {
    case 'string': {
      if (typeof raw !== 'string' || raw === '') bad('must be a non-empty string')
      if (field.choices !== undefined && !field.choices.includes(raw as string)) bad(`must be one of ${field.choices.join(', ')}`)
      return raw
    }
    case 'secret':
      // Never echoed: the value is a key.
      if (raw === null || raw === '') return null
      if (typeof raw !== 'string') bad('must be a string')
      return raw
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
      let url: URL | null = null
      try {
        url = new URL(raw as string)
      } catch {
        // Never echo the value: it may hold a password.
        bad('is not a valid URL')
      }
      if (field.choices !== undefined && !field.choices.includes(url?.protocol ?? '')) bad(`must be a ${field.choices.map((c) => `${c}//`).join(' or ')} URL`)
      return raw
    }
    case 'addresses': {
      if (raw === null || raw === '') return null
      const list = typeof raw === 'string' ? raw.split(',').map((a) => a.trim()) : Array.isArray(raw) ? raw : bad('must list addresses or CIDR blocks')
      // As a key's allowed_cidrs: dotted-decimal IPv4 and standard IPv6 (ipaddr.js, as the proxy check reads them,
      // takes 010.0.0.1 as octal).
      if (!list.every((a) => canonicalCidr(a) !== null)) bad('must list addresses or CIDR blocks, comma-separated')
      return list
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
 * Builds the configuration from an environment (default: process.env) and optional overrides (CLI flags, tests),
 * each validated as its setting is. Unknown IOC_* names are an error, so a typo never silently falls back to a default.
 */
export function loadConfig (env: Record<string, string | undefined> = process.env, overrides: Partial<Config> = {}): Readonly<Config> {
  const config: Record<string, unknown> = { ...defaults(), feedVariables: feedVariablesOf(env) }
  const warnings: string[] = []
  const apply = (source: Record<string, unknown>, base: string, origin: string): void => {
    for (const [name, raw] of Object.entries(source)) {
      if (!name.startsWith('IOC_') || name === 'IOC_CONFIG' || raw === undefined) continue
      const field = kFields[name]
      if (field === undefined) throw new ConfigError(`${origin}: unknown setting ${name}`)
      config[field.key] = coerce(name, field, raw, base)
      if (field.replacedBy !== undefined) warnings.push(`${name} is deprecated: set ${field.replacedBy} instead (${origin})`)
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
  for (const [key, value] of Object.entries(overrides)) {
    if (value === undefined) continue
    const name = kNameOf.get(key)
    if (name === undefined) throw new ConfigError(`override: unknown setting ${key}`)
    config[key] = coerce(name, kFields[name] as Field, value, process.cwd())
  }
  if (config.store === 'postgres' && config.databaseUrl === null) throw new ConfigError('IOC_STORE=postgres needs IOC_DATABASE_URL')
  if ((config.headersTimeoutMs as number) > (config.requestTimeoutMs as number)) {
    throw new ConfigError('IOC_HEADERS_TIMEOUT_MS must not exceed IOC_REQUEST_TIMEOUT_MS (headers are part of the request)')
  }
  config.warnings = Object.freeze(warnings)
  return Object.freeze(config as unknown as Config)
}
