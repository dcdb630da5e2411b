/**
 * Retention: history rows older than IOC_RETENTION_DAYS are purged (the history worker purges at start and hourly);
 * usage counters are billing records and are kept. On PostgreSQL (IOC_TEST_DATABASE_URL) a day's partitions are
 * dropped once the whole day is older than the retention period.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test, type TestContext } from 'node:test'
import pg from 'pg'
import pino from 'pino'
import { startHistory } from '../../src/history/client.ts'
import { openStore, utcDayOf, type HistoryRecord, type StoreOptions } from '../../src/store/index.ts'
import { build, pgSchemaCleanups } from '../helper.ts'
import { dbPathOf, readHistory, waitFor } from '../fixtures/read-history.ts'
import { historyRecord } from '../fixtures/history-record.ts'

const kDayMs = 86_400_000

function record (requestId: string, date: Date): HistoryRecord {
  return historyRecord({ date: date.toISOString(), request_id: requestId, tenant: 't1', evidence_details: 'summary', label_details: 'top' })
}

function tempDir (t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-retention-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** Writes an old and a fresh record into the data directory's database, as an earlier run would have. */
async function seed (dir: string): Promise<{ oldDay: string }> {
  const store = await openStore({ kind: 'sqlite', path: dbPathOf(dir) })
  const old = new Date(Date.now() - 3 * kDayMs)
  await store.writeHistory([record('old', old), record('fresh', new Date())])
  await store.close()
  return { oldDay: utcDayOf(old.getTime()) }
}

async function startWriter (dir: string, retentionDays: number, store: StoreOptions = { kind: 'sqlite', path: dbPathOf(dir) }): Promise<Awaited<ReturnType<typeof startHistory>>> {
  return await startHistory({
    store,
    legacySpoolDir: join(dir, 'spool'),
    journalDir: join(dir, 'journal'),
    journalLimit: 64 * 1024 * 1024,
    journalSegmentBytes: 1024 * 1024,
    durability: 'sync',
    asyncWindowMs: 50,
    asyncWindowBytes: 1024 * 1024,
    commitTimeoutMs: 10_000,
    batch: 100,
    flushMs: 10,
    retentionDays,
    maxBacklog: 1_000_000,
    logger: pino({ level: 'silent' })
  })
}

test('purgeHistory deletes rows dated before the cutoff and keeps the usage counters', async (t) => {
  const b = await build(t, { IOC_RETENTION_DAYS: '1' })
  const old = new Date(Date.now() - 2 * kDayMs)
  await b.store.writeHistory([record('old-1', old), record('old-2', new Date(old.getTime() + 1000)), record('fresh', new Date())])
  assert.equal(await b.store.purgeHistory(new Date(Date.now() - kDayMs)), 2)
  assert.deepEqual(readHistory(b.config.dataDir).map((r) => r.record.request_id), ['fresh'])
  assert.equal((await b.store.usage('t1', 'aaaaaaaaaaaa', utcDayOf(old.getTime()))).total, 2, 'billing counters survive the purge')
  assert.equal(await b.store.purgeHistory(new Date(Date.now() - kDayMs)), 0, 'a second purge finds nothing')
})

test('the history writer purges rows older than the retention period when it starts', async (t) => {
  const dir = tempDir(t)
  const { oldDay } = await seed(dir)
  const writer = await startWriter(dir, 1)
  t.after(async () => await writer.close())
  const left = await waitFor('the purge at start', () => {
    const rows = readHistory(dir).map((r) => r.record.request_id)
    return rows.includes('old') ? undefined : rows
  })
  assert.deepEqual(left, ['fresh'])
  const store = await openStore({ kind: 'sqlite', path: dbPathOf(dir) })
  t.after(async () => await store.close())
  assert.equal(await store.usageForKey('aaaaaaaaaaaa', oldDay), 1)
})

test('a retention of 0 days keeps every row', async (t) => {
  const dir = tempDir(t)
  await seed(dir)
  const writer = await startWriter(dir, 0)
  await writer.flush()
  await writer.close()
  assert.deepEqual(readHistory(dir).map((r) => r.record.request_id), ['old', 'fresh'])
})

const kDatabaseUrl = process.env.IOC_TEST_DATABASE_URL

test('PostgreSQL: the history writer drops the partitions of days older than the retention period when it starts', { skip: kDatabaseUrl === undefined ? 'IOC_TEST_DATABASE_URL not set' : false }, async (t) => {
  const dir = tempDir(t)
  const schema = `iocv_retention_${randomBytes(4).toString('hex')}`
  const options: StoreOptions = { kind: 'postgres', url: kDatabaseUrl as string, schema }
  const cleanups = pgSchemaCleanups(t, kDatabaseUrl as string, schema)
  const admin = new pg.Client({ connectionString: kDatabaseUrl })
  await admin.connect()
  cleanups.after(async () => await admin.end())
  const store = await openStore(options)
  cleanups.after(async () => await store.close())
  const old = new Date(Date.now() - 3 * kDayMs)
  const oldDay = utcDayOf(old.getTime())
  await store.writeHistory([record('old', old), record('fresh', new Date())])
  const partitions = async (): Promise<number> => Number((await admin.query(
    `SELECT count(*) AS n FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE nspname = '${schema}' AND relname ~ $1`,
    [`^history_(requests|parts|blocks)_d${oldDay.replaceAll('-', '')}$`])).rows[0]?.n)
  assert.equal(await partitions(), 3)
  const writer = await startWriter(dir, 1, options)
  cleanups.after(async () => await writer.close())
  const left = await waitFor('the purge at start', async () => {
    const ids = (await store.searchHistory('t1', {}, 10, null)).results.map((r) => r.request_id)
    return ids.includes('old') ? undefined : ids
  })
  assert.deepEqual(left, ['fresh'])
  assert.equal(await partitions(), 0, 'the old day\'s partitions are dropped')
  assert.equal(await store.usageForKey('aaaaaaaaaaaa', oldDay), 1, 'billing counters survive the purge')
})
