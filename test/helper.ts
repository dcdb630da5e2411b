/**
 * Test helpers: a started service per test (temporary data dir, shared compiled-intel cache, silent logs),
 * keys with chosen permissions, one engine snapshot per test process, and cut-down registries for tests that compile
 * snapshots of their own.
 */
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import pg from 'pg'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { after, before } from 'node:test'
import { loadConfig, type Config } from '../src/config.ts'
import { Snapshot, type SnapshotData, type ThreatSignal, type Verdict } from '../src/engine/index.ts'
import { loadManifest, loadSnapshot } from '../src/intel/index.ts'
import { startService, type Service } from '../src/service.ts'

/**
 * Compiled intel shared by every test process of this checkout (keyed by its inputs, so it is never stale). One per
 * checkout: the cache keeps the newest two snapshots, and another checkout's compiler code makes other snapshots.
 */
export const kTestIntelCache = join(tmpdir(), `ioc-verdict-test-intel-${createHash('sha256').update(import.meta.dirname).digest('hex').slice(0, 12)}`)
/** The shipped sample feed manifest. */
export const kSampleManifest = join(import.meta.dirname, '..', 'data', 'feeds', 'manifest.json')

/** A service under test plus an all-permission key. */
export interface Built extends Service {
  config: Readonly<Config>
  /** A key with every permission, tenant "t1". */
  key: string
  /** Creates a key (tenant default "t1"). */
  makeKey: (permissions: string[], options?: { tenant?: string, quota?: number | null }) => Promise<string>
}

/** Where a started service registers its cleanup: a test's context (`t`), or a CleanupList. */
export interface Cleanups {
  after: (fn: () => unknown) => void
}

/** Cleanups of services shared by several tests, run in reverse order by run() (in a file's after hook). */
export class CleanupList implements Cleanups {
  private readonly fns: Array<() => unknown> = []

  after (fn: () => unknown): void {
    this.fns.push(fn)
  }

  async run (): Promise<void> {
    for (const fn of this.fns.splice(0).reverse()) await fn()
  }
}

/**
 * The environment for a child process running the service or the CLI: this process's, without any IOC_* name (the
 * suite's own IOC_TEST_* switches are unknown settings to the service, and a developer's settings stay out), plus `env`.
 */
export function serviceEnv (env: Record<string, string> = {}): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {}
  for (const [name, value] of Object.entries(process.env)) if (!name.startsWith('IOC_')) out[name] = value
  return { ...out, ...env }
}

/** Starts a service for one test and closes it (and removes its data dir) after the test (or with `t`'s cleanups). */
export async function build (t: Cleanups, env: Record<string, string> = {}): Promise<Built> {
  const dataDir = mkdtempSync(join(tmpdir(), 'ioc-verdict-test-'))
  const config = loadConfig({
    IOC_DATA_DIR: dataDir,
    IOC_LOG_LEVEL: 'silent',
    IOC_POOL_SIZE: '0',
    IOC_BOOTSTRAP_KEY: '0',
    IOC_INTEL_CACHE_DIR: kTestIntelCache,
    IOC_HISTORY_FLUSH_MS: '20',
    ...env
  })
  const svc = await startService(config)
  t.after(async () => {
    await svc.app.close()
    rmSync(dataDir, { recursive: true, force: true })
  })
  const makeKey = async (permissions: string[], options: { tenant?: string, quota?: number | null } = {}): Promise<string> =>
    (await svc.store.createKey({ tenant: options.tenant ?? 't1', permissions, quota: options.quota ?? null })).key
  const key = await makeKey(['verdict', 'verdict_bulk', 'mgmt', 'admin'])
  return { ...svc, config, key, makeKey }
}

/**
 * Drops a test's schema. DROP SCHEMA waits for every lock on the schema and its tables; a connection the test left
 * open in a transaction would hold one for ever. So the drop waits 60 s at most: then the sessions holding locks in
 * this schema (their names and what they were doing) fail the cleanup, after they are ended and the schema dropped,
 * instead of a hang. Only this schema's sessions are ended: other files' tests run beside it on the same database.
 */
async function dropSchema (databaseUrl: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    await client.query("SET lock_timeout = '60s'")
    try {
      await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
      return
    } catch (err) {
      if ((err as { code?: string }).code !== '55P03') throw err
    }
    const { rows } = await client.query<{ pid: number, application_name: string, state: string, query: string }>(
      'SELECT pid, application_name, state, left(query, 120) AS query FROM pg_stat_activity WHERE pid IN (' +
      'SELECT l.pid FROM pg_locks l, pg_namespace n WHERE n.nspname = $1 AND l.granted AND l.pid <> pg_backend_pid() AND (' +
      '(l.locktype = \'relation\' AND l.relation IN (SELECT oid FROM pg_class WHERE relnamespace = n.oid)) OR ' +
      '(l.locktype = \'object\' AND l.classid = \'pg_namespace\'::regclass AND l.objid = n.oid)))', [schema])
    await client.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [rows.map((r) => r.pid)])
    await client.query("SET lock_timeout = '0'")
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
    throw new Error(`DROP SCHEMA ${schema} waited 60 s on sessions left open: ${JSON.stringify(rows)}`)
  } finally {
    await client.end()
  }
}

/**
 * A fresh PostgreSQL schema for one test. Whatever the test opens on it registers its cleanup on the returned list
 * instead of on `t`: node:test runs a test's after hooks in the order they were added, and DROP SCHEMA run while a
 * store or writer still works in the schema waits on it or deadlocks. The list runs in reverse order, then the drop.
 */
export function pgSchemaCleanups (t: Cleanups, databaseUrl: string, schema: string): CleanupList {
  const list = new CleanupList()
  t.after(async () => {
    try {
      await list.run()
    } finally {
      await dropSchema(databaseUrl, schema)
    }
  })
  return list
}

/**
 * Services of one test sharing a fresh PostgreSQL schema: `build()` builds one more on it. After the test they are
 * closed first, then the schema is dropped (DROP SCHEMA would wait on a connection still open in it).
 */
export function pgServices (t: Cleanups, databaseUrl: string, schema: string, env: Record<string, string> = {}): { build: () => Promise<Built> } {
  const cleanups = pgSchemaCleanups(t, databaseUrl, schema)
  const full = { IOC_STORE: 'postgres', IOC_DATABASE_URL: databaseUrl, IOC_DATABASE_SCHEMA: schema, ...env }
  return {
    build: async () => {
      return await build(cleanups, full)
    }
  }
}

/**
 * One service for every test of a file: built before the first test, closed after the last. The returned object is
 * filled in by then, so tests use it as they would build's result.
 */
export function buildForFile (env: Record<string, string> = {}): Built {
  const svc = {} as Built
  const cleanups = new CleanupList()
  before(async () => {
    Object.assign(svc, await build(cleanups, env))
  })
  after(async () => { await cleanups.run() })
  return svc
}

let shared: Promise<SnapshotData> | null = null

/** The snapshot of the shipped sample feeds and built-in data, compiled once per process. */
export async function sampleSnapshotData (): Promise<SnapshotData> {
  shared ??= (async () => (await loadSnapshot({ feeds: await loadManifest(kSampleManifest), cacheDir: kTestIntelCache })).data)()
  return await shared
}

/** A mapped Snapshot of sampleSnapshotData(). */
export async function sampleSnapshot (): Promise<Snapshot> {
  return new Snapshot(await sampleSnapshotData())
}

/** Rows kept of each registry file by smallRegistries(). */
const kRegistryRows = 2000
const kRegistryFiles = {
  '@ip-location-db/asn': ['asn-ipv4-num.csv', 'asn-ipv6-num.csv'],
  '@ip-location-db/geo-whois-asn-country': ['geo-whois-asn-country-ipv4-num.csv', 'geo-whois-asn-country-ipv6-num.csv']
} as const

/**
 * IOC_ASN_DIR and IOC_COUNTRY_DIR for tests that compile snapshots of their own inputs (fetched feeds) and never read
 * the ASN or country registries in their assertions: the first rows of the installed @ip-location-db packages' own
 * files (real rows, their format), so such a compile reads a few thousand rows instead of about a million (a third
 * of the time). Written once per machine and package version; a compiled snapshot is keyed by these files too.
 */
export function smallRegistries (): { IOC_ASN_DIR: string, IOC_COUNTRY_DIR: string } {
  const require = createRequire(import.meta.url)
  const dirs: string[] = []
  for (const [pkg, files] of Object.entries(kRegistryFiles)) {
    const source = dirname(require.resolve(`${pkg}/package.json`))
    const version = (require(`${pkg}/package.json`) as { version: string }).version
    const dir = join(tmpdir(), 'ioc-verdict-test-registries', `${pkg.split('/')[1] as string}-${version}-${kRegistryRows}`)
    mkdirSync(dir, { recursive: true })
    for (const file of files) {
      const target = join(dir, file)
      if (existsSync(target)) continue
      const tmp = `${target}.${process.pid}.tmp`
      writeFileSync(tmp, headLines(join(source, file), kRegistryRows))
      renameSync(tmp, target)
    }
    dirs.push(dir)
  }
  return { IOC_ASN_DIR: dirs[0] as string, IOC_COUNTRY_DIR: dirs[1] as string }
}

/** The first `n` lines of a file (read from its start only). */
function headLines (path: string, n: number): Buffer {
  const fd = openSync(path, 'r')
  try {
    let buf = Buffer.alloc(0)
    const chunk = Buffer.alloc(64 * 1024)
    for (;;) {
      const got = readSync(fd, chunk, 0, chunk.length, buf.length)
      buf = Buffer.concat([buf, chunk.subarray(0, got)])
      let lines = 0
      for (let i = 0; i < buf.length; i++) {
        if (buf[i] === 10 && ++lines === n) return buf.subarray(0, i + 1)
      }
      if (got === 0) return buf
    }
  } finally {
    closeSync(fd)
  }
}

/** A verdict's signal by id (fails the test, naming the signals it has, when there is none). */
export function signal (v: Verdict, id: string): ThreatSignal {
  const s = v.signals.find((x) => x.signal_id === id)
  assert.ok(s !== undefined, `${v.indicator.value} has signal ${id}; it has ${v.signals.map((x) => x.signal_id).join(', ')}`)
  return s
}

/** A signal's signed contribution to the score (fails the test when it has none). */
export function contribution (s: ThreatSignal): number {
  const c = s.evidence?.contribution
  assert.equal(typeof c, 'number')
  return c as number
}

/** A verdict's recommended actions, in order. */
export function actions (v: Verdict): string[] {
  return v.recommended_actions.map((a) => a.action)
}

/** The preload that logs every SQLite database opened and closed (test/fixtures/sqlite-open-log.cjs). */
export const kSqliteOpenLog = join(import.meta.dirname, 'fixtures', 'sqlite-open-log.cjs')

/** A database a thread opened and never closed, from a log written by kSqliteOpenLog. */
export interface LeftOpen { pid: number, thread: number, path: string }

/** The databases of a kSqliteOpenLog log that were opened and never closed (an empty or missing log: none). */
export function sqliteLeftOpen (logPath: string): { opened: number, left: LeftOpen[] } {
  let text = ''
  try {
    text = readFileSync(logPath, 'utf8')
  } catch {}
  const open = new Map<string, LeftOpen>()
  let opened = 0
  for (const line of text.split('\n')) {
    const m = /^(\d+) (\d+) (open|close) (\d+) (.*)$/.exec(line)
    if (m === null) continue
    const key = `${m[1] as string} ${m[2] as string} ${m[4] as string}`
    if (m[3] === 'open') {
      opened++
      open.set(key, { pid: Number(m[1]), thread: Number(m[2]), path: m[5] as string })
    } else {
      open.delete(key)
    }
  }
  return { opened, left: [...open.values()] }
}
