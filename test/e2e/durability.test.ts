/**
 * Nothing acknowledged is lost: a real `ioc-verdict serve` process takes a stream of concurrent bulks while another
 * connection holds the store's write lock (SQLite `BEGIN EXCLUSIVE`; PostgreSQL `LOCK TABLE ... IN ACCESS EXCLUSIVE
 * MODE` on the history parts table, when IOC_TEST_DATABASE_URL is set), then is killed with SIGKILL mid-stream. After the
 * lock is released and the service restarted on the same data directory, every indicator of every acknowledged (200)
 * bulk is in history exactly once.
 */
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import Database from 'better-sqlite3'
import pg from 'pg'
import { Agent, request } from 'undici'
import { kTestIntelCache, pgSchemaCleanups, type Cleanups } from '../helper.ts'
import { dbPathOf, readHistory, readPostgresHistory, waitFor } from '../fixtures/read-history.ts'

const kRoot = join(import.meta.dirname, '..', '..')
const kStreams = 4
const kBulkSize = 500
/** Bulks acknowledged while the store is locked before the kill. */
const kAckedUnderLock = 24
const kDatabaseUrl = process.env.IOC_TEST_DATABASE_URL

interface Server {
  proc: ChildProcess
  base: string
  key: string | null
  exited: Promise<[number | null, NodeJS.Signals | null]>
  stderr: () => string
}

/** Starts `ioc-verdict serve` on a data directory and waits for its URL (and the bootstrap key on a first start). */
async function startServer (t: Cleanups, dir: string, env: Record<string, string>, firstStart: boolean): Promise<Server> {
  const proc = spawn(process.execPath, [join(kRoot, 'bin', 'ioc-verdict.js'), 'serve'], {
    cwd: kRoot,
    env: {
      PATH: process.env.PATH,
      IOC_DATA_DIR: dir,
      IOC_HOST: '127.0.0.1',
      IOC_PORT: '0',
      IOC_POOL_SIZE: '2',
      IOC_LOG_LEVEL: 'warn',
      IOC_BOOTSTRAP_KEY: firstStart ? '1' : '0',
      IOC_INTEL_CACHE_DIR: kTestIntelCache,
      ...env
    },
    stdio: ['ignore', 'ignore', 'pipe']
  })
  const exited = once(proc, 'exit') as Promise<[number | null, NodeJS.Signals | null]>
  t.after(() => { if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL') })
  let stderr = ''
  proc.stderr!.setEncoding('utf8')
  const banner = await new Promise<{ base: string, key: string | null }>((resolve, reject) => {
    proc.stderr!.on('data', (d: string) => {
      stderr += d
      const base = /ioc-verdict listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(stderr)?.[1]
      const key = /^\s+(iocv_\S+)$/m.exec(stderr)?.[1]
      if (base !== undefined && (key !== undefined || !firstStart)) resolve({ base, key: key ?? null })
    })
    void exited.then(([code]) => reject(new Error(`server exited with ${code} before listening:\n${stderr}`)))
  })
  return { proc, ...banner, exited, stderr: () => stderr }
}

interface Health { checks: { history: { pending: number, journal_bytes: number, status: string } } }

async function health (base: string): Promise<Health> {
  const res = await request(`${base}/api/v2/ioc/health`)
  return await res.body.json() as Health
}

/** A store lock held from another connection, and how the test counts what the service recorded. */
interface Backend {
  env: Record<string, string>
  lock: () => Promise<void>
  release: () => Promise<void>
  /** Records per bulk_request_id in the store. */
  recorded: () => Promise<Map<string, number>>
}

/**
 * Streams bulks until `kAckedUnderLock` were acknowledged with the store locked, kills the process, releases the
 * lock, restarts, waits for the journal to drain and compares acknowledged with recorded indicators.
 */
async function killUnderLock (t: Cleanups, dir: string, backend: Backend): Promise<void> {
  const first = await startServer(t, dir, backend.env, true)
  const key = first.key as string
  const agent = new Agent({ connections: kStreams })
  t.after(async () => await agent.destroy().catch(() => {}))
  const acknowledged = new Map<string, number>()
  let ackedUnderLock = 0
  let locked = false
  let killed = false
  let serial = 0
  const outcomes = new Map<string, number>()

  const stream = async (): Promise<void> => {
    while (!killed) {
      const n = serial++
      const indicators = Array.from({ length: kBulkSize }, (_, i) => {
        const x = n * kBulkSize + i
        return { value: `10.${(x >> 16) & 255}.${(x >> 8) & 255}.${x & 255}` }
      })
      let status = -1
      try {
        const res = await request(`${first.base}/api/v2/ioc/verdict/bulk`, {
          method: 'POST',
          dispatcher: agent,
          headers: { 'content-type': 'application/json', 'x-api-key': key },
          body: JSON.stringify({ indicators })
        })
        status = res.statusCode
        const body = await res.body.json() as { meta?: { bulk_request_id: string, record_count: number } }
        if (status === 200 && body.meta !== undefined) {
          acknowledged.set(body.meta.bulk_request_id, body.meta.record_count)
          if (locked) ackedUnderLock++
        }
      } catch {
        // The kill: connections reset, requests in flight are not acknowledged.
      }
      outcomes.set(String(status), (outcomes.get(String(status)) ?? 0) + 1)
      if (acknowledged.size >= 4 && !locked) {
        locked = true
        await backend.lock()
      }
      if (ackedUnderLock >= kAckedUnderLock && !killed) {
        killed = true
        first.proc.kill('SIGKILL')
      }
    }
  }
  try {
    await Promise.all(Array.from({ length: kStreams }, async () => await stream()))
  } finally {
    await backend.release()
  }
  await first.exited
  for (const status of outcomes.keys()) assert.ok(['200', '503', '-1'].includes(status), `unexpected status ${status}`)
  const before = await backend.recorded()
  const missingAtKill = [...acknowledged.keys()].filter((id) => before.get(id) !== kBulkSize).length
  assert.ok(missingAtKill > 0, 'the kill found acknowledged bulks not yet in the store (the case under test)')

  const second = await startServer(t, dir, backend.env, false)
  await waitFor('the journal to drain into the store', async () => {
    const h = await health(second.base)
    return h.checks.history.pending === 0 && h.checks.history.journal_bytes === 0 && h.checks.history.status === 'ok' ? true : undefined
  })
  second.proc.kill('SIGTERM')
  await second.exited
  const recorded = await backend.recorded()
  let lost = 0
  for (const [id, n] of acknowledged) {
    assert.equal(n, kBulkSize)
    if (recorded.get(id) !== n) lost += n - (recorded.get(id) ?? 0)
  }
  assert.equal(lost, 0, `acknowledged ${acknowledged.size * kBulkSize} indicators, ${lost} not recorded`)
  // Exactly once: no bulk is recorded twice, acknowledged or not (a bulk journalled before the kill and not yet
  // answered may be recorded; it was never acknowledged).
  for (const [id, n] of recorded) assert.equal(n, kBulkSize, `bulk ${id} recorded ${n} times ${kBulkSize}`)
}

test('SIGKILL while the SQLite store is locked under bulk load loses no acknowledged indicator, and none is written twice', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-durability-sqlite-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  let db: Database.Database | null = null
  const backend: Backend = {
    env: {},
    lock: async () => {
      db = new Database(dbPathOf(dir))
      db.exec('BEGIN EXCLUSIVE')
    },
    release: async () => {
      if (db?.inTransaction === true) db.exec('ROLLBACK')
      db?.close()
      db = null
    },
    recorded: async () => {
      const m = new Map<string, number>()
      for (const { record } of readHistory(dir)) if (record.bulk_request_id !== null) m.set(record.bulk_request_id, (m.get(record.bulk_request_id) ?? 0) + 1)
      return m
    }
  }
  await killUnderLock(t, dir, backend)
})

test('SIGKILL while the PostgreSQL history table is locked under bulk load loses no acknowledged indicator', { skip: kDatabaseUrl === undefined ? 'IOC_TEST_DATABASE_URL not set' : false }, async (t) => {
  const schema = `iocv_durable_${randomBytes(4).toString('hex')}`
  const admin = new pg.Client({ connectionString: kDatabaseUrl })
  await admin.connect()
  const locker = new pg.Client({ connectionString: kDatabaseUrl })
  await locker.connect()
  const cleanups = pgSchemaCleanups(t, kDatabaseUrl as string, schema)
  cleanups.after(async () => {
    await locker.end().catch(() => {})
    await admin.end()
  })
  let inTx = false
  const backend: Backend = {
    env: { IOC_STORE: 'postgres', IOC_DATABASE_URL: kDatabaseUrl as string, IOC_DATABASE_SCHEMA: schema },
    lock: async () => {
      await locker.query('BEGIN')
      inTx = true
      await locker.query(`LOCK TABLE ${schema}.history_parts IN ACCESS EXCLUSIVE MODE`)
    },
    release: async () => {
      if (inTx) await locker.query('ROLLBACK')
      inTx = false
    },
    recorded: async () => {
      const m = new Map<string, number>()
      for (const { record } of await readPostgresHistory(admin, schema)) if (record.bulk_request_id !== null) m.set(record.bulk_request_id, (m.get(record.bulk_request_id) ?? 0) + 1)
      return m
    }
  }
  const dir = mkdtempSync(join(tmpdir(), 'iocv-durability-pg-'))
  cleanups.after(() => rmSync(dir, { recursive: true, force: true }))
  await killUnderLock(cleanups, dir, backend)
})
