/**
 * Test helpers: a started service per test (temporary data dir, shared compiled-intel cache, silent logs),
 * keys with chosen permissions, and one engine snapshot per test process.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, type TestContext } from 'node:test'
import { loadConfig, type Config } from '../src/config.ts'
import { Snapshot, type SnapshotData } from '../src/engine/index.ts'
import { loadManifest, loadSnapshot } from '../src/intel/index.ts'
import { startService, type Service } from '../src/service.ts'

/** Compiled intel shared by every test process (keyed by its inputs, so it is never stale). */
export const kTestIntelCache = join(tmpdir(), 'ioc-verdict-test-intel')
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

/** Starts a service for one test and closes it (and removes its data dir) after the test. */
export async function build (t: TestContext, env: Record<string, string> = {}): Promise<Built> {
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
 * One service for every test of a file: built before the first test, closed after the last. The returned object is
 * filled in by then, so tests use it as they would build's result.
 */
export function buildForFile (env: Record<string, string> = {}): Built {
  const svc = {} as Built
  const cleanups: Array<() => unknown> = []
  before(async () => {
    Object.assign(svc, await build({ after: (fn: () => unknown) => { cleanups.push(fn) } } as unknown as TestContext, env))
  })
  after(async () => {
    for (const fn of cleanups.reverse()) await fn()
  })
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
