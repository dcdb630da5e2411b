/**
 * Configuration (docs/OPERATIONS.md "Configuration"): defaults, every IOC_* setting from the environment and from a
 * JSON file named by IOC_CONFIG (the environment wins), and CONFIG_INVALID for a bad value or an unknown name.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { test } from 'node:test'
import { configTable, defaults, kProjectRoot, loadConfig, storeOptions, type Config } from '../../src/config.ts'
import { ConfigError } from '../../src/errors.ts'

function configError (env: Record<string, string | undefined>, pattern: RegExp): void {
  assert.throws(() => loadConfig(env), (err: unknown) => {
    assert.ok(err instanceof ConfigError, String(err))
    assert.equal(err.code, 'CONFIG_INVALID')
    assert.match(err.message, pattern)
    return true
  })
}

test('with no IOC_* names the configuration is the documented defaults, frozen', () => {
  const c = loadConfig({ PATH: '/usr/bin', HOME: '/root' })
  assert.deepEqual({ ...c }, {
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
    instanceName: null,
    logLevel: 'info',
    bootstrapKey: true,
    cacheSize: 100_000,
    maxInflight: 200_000,
    rateLimit: 0,
    trustProxy: null,
    sessionIdleMs: 30 * 60_000,
    sessionMaxMs: 12 * 3_600_000,
    bodyLimit: 16 * 1024 * 1024,
    historyBatch: 100_000,
    historyFlushMs: 100,
    historyMaxBacklog: 500_000,
    journalLimit: 1024 * 1024 * 1024,
    journalSegmentBytes: 64 * 1024 * 1024,
    journalPreallocateBytes: 4 * 1024 * 1024,
    historyDurability: 'sync',
    historyAsyncWindowMs: 50,
    historyAsyncWindowBytes: 16 * 1024 * 1024,
    historyCommitTimeoutMs: 10_000,
    retentionDays: 90,
    retroHuntDays: 30,
    retroHuntDutyPercent: 20,
    retroHuntLowPriority: true,
    webhookAllowPrivate: false,
    webhookRetryBaseMs: 30_000,
    webhookTimeoutMs: 10_000,
    webhookSecretKey: null,
    asnDir: null,
    countryDir: null,
    shutdownTimeoutMs: 30_000,
    headersTimeoutMs: 10_000,
    requestTimeoutMs: 30_000,
    keepAliveTimeoutMs: 65_000,
    sendTimeoutMs: 120_000,
    maxConnections: 4096,
    maxConnectionsPerAddress: 1024,
    feedMaxRejectedPercent: 50,
    feedMinShrinkPercent: 50,
    feedAttempts: 3,
    feedRetryBaseMs: 1000,
    feedVariables: { PATH: '/usr/bin', HOME: '/root' },
    warnings: []
  } satisfies Config)
  assert.deepEqual({ ...c, feedVariables: {} }, { ...defaults() })
  assert.ok(Object.isFrozen(c))
})

/** Every setting with a value other than its default, and what it becomes. */
const kEvery: Array<[string, string, keyof Config, unknown]> = [
  ['IOC_HOST', '::1', 'host', '::1'],
  ['IOC_PORT', '0', 'port', 0],
  ['IOC_DATA_DIR', '/srv/iocv', 'dataDir', '/srv/iocv'],
  ['IOC_POOL_SIZE', '0', 'poolSize', 0],
  ['IOC_FEEDS', '/etc/iocv/feeds.json', 'feeds', '/etc/iocv/feeds.json'],
  ['IOC_INTEL_CACHE_DIR', '/var/cache/iocv', 'intelCacheDir', '/var/cache/iocv'],
  ['IOC_STORE', 'postgres', 'store', 'postgres'],
  ['IOC_DATABASE_URL', 'postgres://u:secret@127.0.0.1:5432/db', 'databaseUrl', 'postgres://u:secret@127.0.0.1:5432/db'],
  ['IOC_DATABASE_SCHEMA', 'tenant_a', 'databaseSchema', 'tenant_a'],
  ['IOC_REDIS_URL', 'redis://127.0.0.1:6379/2', 'redisUrl', 'redis://127.0.0.1:6379/2'],
  ['IOC_REDIS_PREFIX', 'a:', 'redisPrefix', 'a:'],
  ['IOC_INSTANCE_NAME', 'iocv-a', 'instanceName', 'iocv-a'],
  ['IOC_LOG_LEVEL', 'debug', 'logLevel', 'debug'],
  ['IOC_BOOTSTRAP_KEY', 'false', 'bootstrapKey', false],
  ['IOC_CACHE_SIZE', '0', 'cacheSize', 0],
  ['IOC_MAX_INFLIGHT', '1', 'maxInflight', 1],
  ['IOC_RATE_LIMIT', '600', 'rateLimit', 600],
  ['IOC_TRUST_PROXY', '10.0.0.1, 192.168.0.0/16,::1', 'trustProxy', ['10.0.0.1', '192.168.0.0/16', '::1']],
  ['IOC_SESSION_IDLE_MS', '60000', 'sessionIdleMs', 60_000],
  ['IOC_SESSION_MAX_MS', '3600000', 'sessionMaxMs', 3_600_000],
  ['IOC_BODY_LIMIT', '1024', 'bodyLimit', 1024],
  ['IOC_HISTORY_BATCH', '1000000', 'historyBatch', 1_000_000],
  ['IOC_HISTORY_FLUSH_MS', '600000', 'historyFlushMs', 600_000],
  ['IOC_HISTORY_MAX_BACKLOG', '7', 'historyMaxBacklog', 7],
  ['IOC_JOURNAL_LIMIT', '2048', 'journalLimit', 2048],
  ['IOC_SPOOL_LIMIT', '4096', 'journalLimit', 4096],
  ['IOC_JOURNAL_SEGMENT_BYTES', '8192', 'journalSegmentBytes', 8192],
  ['IOC_JOURNAL_PREALLOCATE_BYTES', '0', 'journalPreallocateBytes', 0],
  ['IOC_HISTORY_DURABILITY', 'async', 'historyDurability', 'async'],
  ['IOC_HISTORY_ASYNC_WINDOW_MS', '20', 'historyAsyncWindowMs', 20],
  ['IOC_HISTORY_ASYNC_WINDOW_BYTES', '65536', 'historyAsyncWindowBytes', 65536],
  ['IOC_HISTORY_COMMIT_TIMEOUT_MS', '5000', 'historyCommitTimeoutMs', 5000],
  ['IOC_RETENTION_DAYS', '0', 'retentionDays', 0],
  ['IOC_RETRO_HUNT_DAYS', '0', 'retroHuntDays', 0],
  ['IOC_RETRO_HUNT_DUTY_PERCENT', '100', 'retroHuntDutyPercent', 100],
  ['IOC_RETRO_HUNT_LOW_PRIORITY', '0', 'retroHuntLowPriority', false],
  ['IOC_WEBHOOK_ALLOW_PRIVATE', '1', 'webhookAllowPrivate', true],
  ['IOC_WEBHOOK_RETRY_BASE_MS', '50', 'webhookRetryBaseMs', 50],
  ['IOC_WEBHOOK_TIMEOUT_MS', '1000', 'webhookTimeoutMs', 1000],
  ['IOC_WEBHOOK_SECRET_KEY', 'a'.repeat(64), 'webhookSecretKey', 'a'.repeat(64)],
  ['IOC_ASN_DIR', '/opt/asn', 'asnDir', '/opt/asn'],
  ['IOC_COUNTRY_DIR', '/opt/country', 'countryDir', '/opt/country'],
  ['IOC_SHUTDOWN_TIMEOUT_MS', '100', 'shutdownTimeoutMs', 100],
  ['IOC_HEADERS_TIMEOUT_MS', '2000', 'headersTimeoutMs', 2000],
  ['IOC_REQUEST_TIMEOUT_MS', '15000', 'requestTimeoutMs', 15_000],
  ['IOC_KEEP_ALIVE_TIMEOUT_MS', '1000', 'keepAliveTimeoutMs', 1000],
  ['IOC_SEND_TIMEOUT_MS', '5000', 'sendTimeoutMs', 5000],
  ['IOC_MAX_CONNECTIONS', '10', 'maxConnections', 10],
  ['IOC_MAX_CONNECTIONS_PER_ADDRESS', '0', 'maxConnectionsPerAddress', 0],
  ['IOC_FEED_MAX_REJECTED_PERCENT', '10', 'feedMaxRejectedPercent', 10],
  ['IOC_FEED_MIN_SHRINK_PERCENT', '0', 'feedMinShrinkPercent', 0],
  ['IOC_FEED_ATTEMPTS', '1', 'feedAttempts', 1],
  ['IOC_FEED_RETRY_BASE_MS', '10', 'feedRetryBaseMs', 10]
]

test('every IOC_* setting is read from the environment into its key, and only that key changes', () => {
  const base = defaults()
  const settings = Object.keys(base).filter((k) => k !== 'feedVariables' && k !== 'warnings')
  assert.deepEqual(new Set(kEvery.map(([, , key]) => key)), new Set(settings), 'a case for every configuration key')
  for (const [name, raw, key, expected] of kEvery) {
    const env: Record<string, string> = { [name]: raw }
    if (name === 'IOC_STORE') env.IOC_DATABASE_URL = 'postgres://127.0.0.1/test'
    const c = loadConfig(env)
    assert.deepEqual(c[key], expected, name)
    for (const other of Object.keys(base) as Array<keyof Config>) {
      if (other !== key && other !== 'warnings' && !(name === 'IOC_STORE' && other === 'databaseUrl')) assert.deepEqual(c[other], base[other], `${name} left ${other} alone`)
    }
  }
})

test('paths resolve against the working directory, and an empty optional path or URL is null', () => {
  const c = loadConfig({ IOC_DATA_DIR: 'rel/data', IOC_FEEDS: './feeds.json', IOC_ASN_DIR: '', IOC_INTEL_CACHE_DIR: '', IOC_REDIS_URL: '', IOC_DATABASE_URL: '' })
  assert.equal(c.dataDir, resolve(process.cwd(), 'rel/data'))
  assert.equal(c.feeds, resolve(process.cwd(), 'feeds.json'))
  assert.equal(c.asnDir, null)
  assert.equal(c.intelCacheDir, null)
  assert.equal(c.redisUrl, null)
  assert.equal(c.databaseUrl, null)
})

test('booleans take 0, 1, true and false', () => {
  for (const [raw, expected] of [['0', false], ['1', true], ['true', true], ['false', false]] as const) {
    assert.equal(loadConfig({ IOC_BOOTSTRAP_KEY: raw }).bootstrapKey, expected, raw)
  }
})

test('a bad value is CONFIG_INVALID naming the setting, at each bound of each kind', () => {
  const cases: Array<[string, string, RegExp]> = [
    ['IOC_PORT', '65536', /IOC_PORT: must be an integer from 0 to 65535/],
    ['IOC_PORT', '-1', /IOC_PORT/],
    ['IOC_PORT', '80.5', /IOC_PORT/],
    ['IOC_POOL_SIZE', '257', /IOC_POOL_SIZE: must be an integer from 0 to 256/],
    ['IOC_POOL_SIZE', 'two', /IOC_POOL_SIZE/],
    ['IOC_POOL_SIZE', '', /IOC_POOL_SIZE/],
    ['IOC_MAX_INFLIGHT', '0', /IOC_MAX_INFLIGHT: must be an integer from 1/],
    ['IOC_BODY_LIMIT', '1023', /IOC_BODY_LIMIT: must be an integer from 1024/],
    ['IOC_HISTORY_FLUSH_MS', '600001', /IOC_HISTORY_FLUSH_MS/],
    ['IOC_SHUTDOWN_TIMEOUT_MS', '99', /IOC_SHUTDOWN_TIMEOUT_MS/],
    ['IOC_SPOOL_LIMIT', '1e9', /IOC_SPOOL_LIMIT/],
    ['IOC_RETENTION_DAYS', '100001', /IOC_RETENTION_DAYS/],
    ['IOC_CACHE_SIZE', '100000001', /IOC_CACHE_SIZE/],
    ['IOC_STORE', 'mysql', /IOC_STORE: must be one of sqlite, postgres/],
    ['IOC_LOG_LEVEL', 'verbose', /IOC_LOG_LEVEL: must be one of/],
    ['IOC_HOST', '', /IOC_HOST: must be a non-empty string/],
    ['IOC_DATA_DIR', '', /IOC_DATA_DIR: must be a path/],
    ['IOC_BOOTSTRAP_KEY', 'yes', /IOC_BOOTSTRAP_KEY: must be 0, 1, true or false/],
    ['IOC_TRUST_PROXY', '10.0.0.1,proxy.internal', /IOC_TRUST_PROXY: must list addresses or CIDR blocks/],
    ['IOC_TRUST_PROXY', 'true', /IOC_TRUST_PROXY: must list addresses or CIDR blocks/],
    // inet_aton's forms, which the proxy check would read as other addresses (010.0.0.1 as octal 8.0.0.1).
    ['IOC_TRUST_PROXY', '010.0.0.1', /IOC_TRUST_PROXY: must list addresses or CIDR blocks/],
    ['IOC_TRUST_PROXY', '10.0.0.0/8,0x7f.0.0.1', /IOC_TRUST_PROXY: must list addresses or CIDR blocks/],
    ['IOC_TRUST_PROXY', '127.1', /IOC_TRUST_PROXY: must list addresses or CIDR blocks/],
    ['IOC_TRUST_PROXY', '10.0.0.0/08', /IOC_TRUST_PROXY: must list addresses or CIDR blocks/],
    ['IOC_REDIS_URL', 'not a url', /IOC_REDIS_URL: is not a valid URL/]
  ]
  for (const [name, raw, pattern] of cases) configError({ [name]: raw }, pattern)
})

test('a malformed URL is refused without echoing it (it may hold a password)', () => {
  assert.throws(() => loadConfig({ IOC_DATABASE_URL: 'postgres://user:hunter2@[bad' }), (err: unknown) => {
    assert.ok(err instanceof ConfigError)
    assert.ok(!err.message.includes('hunter2'), err.message)
    return true
  })
})

test('an unknown IOC_* name is refused, so a typo never falls back to a default; other names are ignored', () => {
  configError({ IOC_PORTT: '8080' }, /environment: unknown setting IOC_PORTT/)
  configError({ IOC_: '1' }, /unknown setting IOC_/)
  const c = loadConfig({ ioc_port: '1', PORT: '1', IOC_PORT: undefined })
  assert.equal(c.port, 8080)
})

test('IOC_SPOOL_LIMIT, the former name of IOC_JOURNAL_LIMIT, still sets it and warns that it is deprecated', () => {
  const c = loadConfig({ IOC_SPOOL_LIMIT: '4096' })
  assert.equal(c.journalLimit, 4096)
  assert.deepEqual(c.warnings, ['IOC_SPOOL_LIMIT is deprecated: set IOC_JOURNAL_LIMIT instead (environment)'])
  assert.deepEqual(loadConfig({ IOC_JOURNAL_LIMIT: '4096' }).warnings, [])
  assert.ok(configTable().includes('| `IOC_SPOOL_LIMIT` | 1073741824 | deprecated: the former name of `IOC_JOURNAL_LIMIT`'))
})

test('the test suite\'s IOC_TEST_* switches are unknown settings to the service, like any other IOC_* typo', () => {
  configError({ IOC_TEST_DATABASE_URL: 'postgres://127.0.0.1/x' }, /environment: unknown setting IOC_TEST_DATABASE_URL/)
})

test('feed headers see every environment variable but the IOC_* settings, as the environment was at start', () => {
  const env: Record<string, string> = { ABUSECH_AUTH_KEY: 'k-1', PATH: '/bin', IOC_DATABASE_URL: 'postgres://u:secret@127.0.0.1/db' }
  const c = loadConfig(env)
  assert.deepEqual(c.feedVariables, { ABUSECH_AUTH_KEY: 'k-1', PATH: '/bin' })
  assert.ok(Object.isFrozen(c.feedVariables))
  env.ABUSECH_AUTH_KEY = 'changed'
  assert.equal(c.feedVariables.ABUSECH_AUTH_KEY, 'k-1')
})

test('IOC_STORE=postgres needs IOC_DATABASE_URL, and storeOptions follows the store', () => {
  configError({ IOC_STORE: 'postgres' }, /IOC_STORE=postgres needs IOC_DATABASE_URL/)
  // A URL of another scheme is named at start, never echoed (it may hold a password).
  configError({ IOC_REDIS_URL: 'notaurl://u:hunter2@127.0.0.1:6379' }, /^IOC_REDIS_URL: must be a redis:\/\/ or rediss:\/\/ URL$/)
  configError({ IOC_STORE: 'postgres', IOC_DATABASE_URL: 'mysql://u:hunter2@127.0.0.1/db' }, /^IOC_DATABASE_URL: must be a postgres:\/\/ or postgresql:\/\/ URL$/)
  assert.equal(loadConfig({ IOC_REDIS_URL: 'rediss://127.0.0.1:6380' }).redisUrl, 'rediss://127.0.0.1:6380')
  const pg = loadConfig({ IOC_STORE: 'postgres', IOC_DATABASE_URL: 'postgres://127.0.0.1/db', IOC_DATABASE_SCHEMA: 's1' })
  assert.deepEqual(storeOptions(pg), { kind: 'postgres', url: 'postgres://127.0.0.1/db', schema: 's1' })
  const lite = loadConfig({ IOC_DATA_DIR: '/srv/iocv' })
  assert.deepEqual(storeOptions(lite), { kind: 'sqlite', path: join('/srv/iocv', 'ioc-verdict.db') })
})

test('overrides win over the environment, and an undefined override changes nothing', () => {
  const c = loadConfig({ IOC_PORT: '9000', IOC_HOST: '0.0.0.0' }, { port: 1234, host: undefined } as unknown as Partial<Config>)
  assert.equal(c.port, 1234)
  assert.equal(c.host, '0.0.0.0')
  assert.equal(loadConfig({}, { dataDir: 'rel/data', journalLimit: 4096 }).dataDir, resolve(process.cwd(), 'rel/data'))
})

test('an override is validated as its setting is: out of bounds, of the wrong kind or unknown, it is CONFIG_INVALID', () => {
  const cases: Array<[Partial<Config>, RegExp]> = [
    [{ port: 70_000 }, /IOC_PORT: must be an integer from 0 to 65535/],
    [{ poolSize: -1 }, /IOC_POOL_SIZE/],
    [{ cacheSize: 1.5 }, /IOC_CACHE_SIZE/],
    [{ journalLimit: 10 }, /IOC_JOURNAL_LIMIT/],
    [{ store: 'mysql' as never }, /IOC_STORE: must be one of sqlite, postgres/],
    [{ logLevel: '' as never }, /IOC_LOG_LEVEL/],
    [{ redisUrl: 'not a url' }, /IOC_REDIS_URL: is not a valid URL/],
    [{ headersTimeoutMs: 60_000, requestTimeoutMs: 30_000 }, /must not exceed IOC_REQUEST_TIMEOUT_MS/],
    [{ nope: 1 } as never, /override: unknown setting nope/]
  ]
  for (const [overrides, pattern] of cases) {
    assert.throws(() => loadConfig({}, overrides), (err: unknown) => {
      assert.ok(err instanceof ConfigError, String(err))
      assert.match(err.message, pattern)
      return true
    }, JSON.stringify(overrides))
  }
})

test('a JSON file named by IOC_CONFIG sets the same names, its paths resolve against its folder, and the environment wins', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-config-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'iocv.json')
  writeFileSync(file, JSON.stringify({ IOC_PORT: 9100, IOC_HOST: '0.0.0.0', IOC_DATA_DIR: 'state', IOC_BOOTSTRAP_KEY: false, IOC_INTEL_CACHE_DIR: null }))
  const c = loadConfig({ IOC_CONFIG: file, IOC_HOST: '127.0.0.2' })
  assert.equal(c.port, 9100, 'numbers may be JSON numbers')
  assert.equal(c.host, '127.0.0.2', 'the environment wins over the file')
  assert.equal(c.dataDir, join(dir, 'state'))
  assert.equal(c.bootstrapKey, false)
  assert.equal(c.intelCacheDir, null)
  assert.equal(loadConfig({ IOC_CONFIG: '' }).port, 8080, 'an empty IOC_CONFIG names no file')
})

test('a config file that is missing, not JSON, not an object, or holds an unknown or bad setting is CONFIG_INVALID', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-config-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const write = (name: string, text: string): string => {
    const p = join(dir, name)
    writeFileSync(p, text)
    return p
  }
  configError({ IOC_CONFIG: join(dir, 'absent.json') }, /IOC_CONFIG: cannot read config file/)
  configError({ IOC_CONFIG: write('broken.json', '{"IOC_PORT": ') }, /IOC_CONFIG: cannot read config file/)
  configError({ IOC_CONFIG: write('array.json', '[1]') }, /must hold a JSON object/)
  configError({ IOC_CONFIG: write('null.json', 'null') }, /must hold a JSON object/)
  configError({ IOC_CONFIG: write('other.json', '{"port": 1}') }, /config file: unknown setting port/)
  configError({ IOC_CONFIG: write('nested.json', '{"IOC_CONFIG": "x"}') }, /config file: unknown setting IOC_CONFIG/)
  configError({ IOC_CONFIG: write('typo.json', '{"IOC_POLL_SIZE": 2}') }, /config file: unknown setting IOC_POLL_SIZE/)
  configError({ IOC_CONFIG: write('bad.json', '{"IOC_POOL_SIZE": -1}') }, /IOC_POOL_SIZE: must be an integer/)
  configError({ IOC_CONFIG: write('float.json', '{"IOC_PORT": 1.5}') }, /IOC_PORT/)
  configError({ IOC_CONFIG: write('proto.json', '{"__proto__": {"IOC_PORT": 1}}') }, /unknown setting __proto__/)
})

test('the docs table (npm run docs:config) has one row per setting, in schema order, with its default', () => {
  const rows = configTable().split('\n').slice(2).map((line) => line.split(' | '))
  assert.deepEqual(rows.map((r) => r[0]), kEvery.map(([name]) => `| \`${name}\``))
  const shown = new Map(rows.map((r) => [(r[0] as string).slice(3, -1), r[1]]))
  assert.equal(shown.get('IOC_PORT'), '8080')
  assert.equal(shown.get('IOC_BOOTSTRAP_KEY'), '1')
  assert.equal(shown.get('IOC_DATABASE_URL'), '-')
  assert.equal(shown.get('IOC_POOL_SIZE'), 'CPU count')
  assert.equal(shown.get('IOC_JOURNAL_LIMIT'), String(defaults().journalLimit))
  for (const r of rows) assert.ok((r[2] as string).length > 3, `${r[0]} has a meaning`)
})

test('docs/OPERATIONS.md holds the table as npm run docs:config prints it', () => {
  const doc = readFileSync(join(kProjectRoot, 'docs', 'OPERATIONS.md'), 'utf8')
  assert.ok(doc.includes(`${configTable()}\n`), 'regenerate the table in docs/OPERATIONS.md "Configuration" with npm run docs:config')
})
