/**
 * The history client's destroy(err): stops now without losing anything acknowledged. Requests keep journalling while
 * the writer is copying a backlog into the store, batch after batch; destroy() refuses later writes with
 * HISTORY_CLOSED, lets the writer end the transaction it is in, and stops its thread. A new client on the same
 * directory replays the journal: every acknowledged record is in the store exactly once, and nothing refused is.
 * With PostgreSQL (IOC_TEST_DATABASE_URL), a writer stuck in a transaction behind a lock is terminated after the
 * bound, and nothing acknowledged is lost either. Service.destroy() stops a whole service the same way.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import pg from 'pg'
import pino from 'pino'
import { loadConfig, type StoreOptions } from '../../src/config.ts'
import { startService } from '../../src/service.ts'
import { kTestIntelCache, pgSchemaCleanups, type Cleanups } from '../helper.ts'
import { startHistory, type HistoryClient } from '../../src/history/client.ts'
import { HistoryItems } from '../../src/history/codec.ts'
import type { Durability } from '../../src/history/journal.ts'
import { kInvalidVerdictMembers } from '../../src/history/record.ts'
import { dbPathOf, readHistory, readPostgresHistory, waitFor } from '../fixtures/read-history.ts'
import { historyEnvelope, itemFragment } from '../fixtures/history-record.ts'

/** One request's history: its envelope and one encoded part of one item. */
function request (id: string): [ReturnType<typeof historyEnvelope>, Uint8Array[]] {
  const value = `${id}.destroy.example`
  const items = new HistoryItems(1)
  items.add('domain', value, value, itemFragment({ type: 'domain', value, normalized: value }, kInvalidVerdictMembers, null, null))
  return [historyEnvelope({ tenant: 't1', request_id: id, count: 1 }), [new Uint8Array(items.encode())]]
}

/**
 * A history client on a SQLite store in `dir`. The writer waits a minute before writing on its own (flushMs), so
 * what it writes, and when, is decided by the test (flush()); it writes `batch` records per transaction.
 */
async function open (t: Cleanups, dir: string, durability: Durability, batch: number, store?: StoreOptions, stopTimeoutMs?: number): Promise<HistoryClient> {
  const client = await startHistory({
    store: store ?? { kind: 'sqlite', path: dbPathOf(dir) },
    legacySpoolDir: join(dir, 'spool'),
    journalDir: join(dir, 'journal'),
    journalLimit: 64 * 1024 * 1024,
    journalSegmentBytes: 64 * 1024,
    durability,
    asyncWindowMs: 50,
    asyncWindowBytes: 1024 * 1024,
    commitTimeoutMs: 10_000,
    batch,
    flushMs: 60_000,
    retentionDays: 0,
    maxBacklog: 1_000_000,
    logger: pino({ level: 'silent' }),
    ...(stopTimeoutMs === undefined ? {} : { stopTimeoutMs })
  })
  t.after(async () => { await client.destroy() })
  return client
}

/**
 * Records acknowledged before destroy(): enough that the writer, five records a transaction, is still copying them
 * when the stop reaches it. With 400 a busy CI machine once delivered the stop only after all 504 were copied.
 */
const kBacklog = 2000

for (const durability of ['sync', 'async'] as const) {
  test(`destroy under write load (${durability} journal) loses no acknowledged record, writes none twice and refuses later writes`, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'iocv-history-destroy-'))
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    const client = await open(t, dir, durability, 5)

    const acknowledged = new Set<string>()
    const refusals = new Map<string, number>()
    let destroyed = false
    let refusedAfterDestroy = 0
    const writer = async (w: number): Promise<void> => {
      for (let n = 0; ; n++) {
        const id = `w${w}-${n}`
        const sentAfterDestroy = destroyed
        try {
          await client.submit(...request(id))
          acknowledged.add(id)
          assert.ok(!sentAfterDestroy, `${id} was taken after destroy()`)
        } catch (err) {
          const code = (err as { code?: string }).code ?? 'none'
          refusals.set(code, (refusals.get(code) ?? 0) + 1)
          if (sentAfterDestroy) {
            assert.equal(code, 'HISTORY_CLOSED')
            refusedAfterDestroy++
          }
          if (sentAfterDestroy || code !== 'HISTORY_CLOSED') return
        }
        // Turns of the event loop let the writer thread's messages in; past the backlog wanted, the load goes on slower.
        if (acknowledged.size >= kBacklog) await new Promise((resolve) => setTimeout(resolve, 1))
        else if (n % 20 === 19) await new Promise((resolve) => setImmediate(resolve))
      }
    }
    const writers = [0, 1, 2, 3].map(async (w) => await writer(w))
    await waitFor('a backlog of acknowledged records', () => acknowledged.size >= kBacklog ? true : undefined)
    // The writer copies the backlog five records per transaction; destroy() comes while it is doing so.
    void client.flush()
    // Looked at every turn of the event loop, not every 50 ms: on an idle machine the writer copies these few hundred
    // records in less than that, and destroy() would come after it finished.
    await waitFor('the writer to be copying the backlog', () => client.state().written > 0 ? true : undefined, 60_000, 0)
    const destroying = client.destroy(new Error('stop now (test)'))
    destroyed = true
    await destroying
    await Promise.all(writers)

    assert.ok(refusedAfterDestroy >= 4, 'every writer was refused after destroy()')
    assert.deepEqual([...refusals.keys()], ['HISTORY_CLOSED'], 'the only refusal is HISTORY_CLOSED')
    assert.equal(client.thread.threadId, -1, 'the writer thread has stopped')
    await client.destroy() // idempotent
    await client.close() // and close() after destroy() resolves
    await assert.rejects(client.submit(...request('late')), { code: 'HISTORY_CLOSED' })
    assert.equal(client.refusal(), 'service is shutting down')

    const storedAtDestroy = readHistory(dir).length
    assert.ok(storedAtDestroy > 0 && storedAtDestroy < acknowledged.size,
      `destroy() came while the backlog was being copied (${storedAtDestroy} of ${acknowledged.size} in the store)`)

    // A new client on the same directory replays the journal from the store's position.
    const reopened = await open(t, dir, durability, 1000)
    await reopened.flush()
    const stored = readHistory(dir).map((r) => r.record.request_id as string)
    assert.equal(stored.length, acknowledged.size, 'every acknowledged record once, nothing more')
    assert.deepEqual(new Set(stored), acknowledged)
    assert.equal(reopened.state().journalBytes, 0, 'the journal is drained')
  })
}

const kDatabaseUrl = process.env.IOC_TEST_DATABASE_URL

test('destroy while the writer waits on a PostgreSQL lock terminates it after the bound; a restart writes every acknowledged record once', { skip: kDatabaseUrl === undefined ? 'IOC_TEST_DATABASE_URL not set' : false }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-history-destroy-pg-'))
  const schema = `iocv_destroy_${randomBytes(4).toString('hex')}`
  const store: StoreOptions = { kind: 'postgres', url: kDatabaseUrl as string, schema }
  const admin = new pg.Client({ connectionString: kDatabaseUrl })
  await admin.connect()
  const locker = new pg.Client({ connectionString: kDatabaseUrl })
  await locker.connect()
  const cleanups = pgSchemaCleanups(t, kDatabaseUrl as string, schema)
  cleanups.after(async () => {
    await locker.end().catch(() => {})
    await admin.end()
    rmSync(dir, { recursive: true, force: true })
  })
  const stored = async (): Promise<string[]> => (await readPostgresHistory(admin, schema)).map((r) => r.record.request_id)

  const client = await open(cleanups, dir, 'sync', 1000, store, 300)
  const acknowledged = new Set<string>()
  for (let i = 0; i < 10; i++) {
    await client.submit(...request(`before-${i}`))
    acknowledged.add(`before-${i}`)
  }
  await client.flush()
  assert.equal((await stored()).length, 10)

  await locker.query('BEGIN')
  await locker.query(`LOCK TABLE ${schema}.history_parts IN ACCESS EXCLUSIVE MODE`)
  for (let i = 0; i < 10; i++) {
    await client.submit(...request(`locked-${i}`))
    acknowledged.add(`locked-${i}`)
  }
  void client.flush()
  await waitFor('the writer to wait on the lock', async () => {
    const { rows } = await admin.query<{ n: string }>(`SELECT count(*) AS n FROM pg_locks WHERE NOT granted AND relation = '${schema}.history_parts'::regclass`)
    return Number(rows[0]?.n) > 0 ? true : undefined
  })
  // The lock is held until destroy() has returned: it returns by the bound, not by the writer finishing.
  await client.destroy(new Error('stop now (test)'))
  assert.equal(client.thread.threadId, -1, 'the writer thread was terminated')
  await assert.rejects(client.submit(...request('late')), { code: 'HISTORY_CLOSED' })
  await locker.query('ROLLBACK')
  assert.equal((await stored()).length, 10, 'the terminated transaction wrote nothing')

  const reopened = await open(cleanups, dir, 'sync', 1000, store)
  await reopened.flush()
  const ids = await stored()
  assert.equal(ids.length, acknowledged.size, 'every acknowledged record once, nothing more')
  assert.deepEqual(new Set(ids), acknowledged)
})

test('Service.destroy stops every part now: later requests get 503 OVERLOADED, app.close() still resolves, a restart has every answered request', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-service-destroy-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  // A writer that would wait a minute: what the answered requests wrote is in the journal only.
  const config = loadConfig({ IOC_DATA_DIR: dir, IOC_LOG_LEVEL: 'silent', IOC_POOL_SIZE: '1', IOC_BOOTSTRAP_KEY: '0', IOC_INTEL_CACHE_DIR: kTestIntelCache, IOC_HISTORY_FLUSH_MS: '60000' })
  const svc = await startService(config)
  t.after(async () => { await svc.app.close() })
  const key = (await svc.store.createKey({ tenant: 't1', permissions: ['verdict'], quota: null })).key
  const verdict = async (n: number): Promise<{ statusCode: number, json: () => { code?: string } }> => await svc.app.inject({
    method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'x-api-key': key, 'x-request-id': `answered-${n}` }, payload: { indicator: { value: `198.51.100.${n}` } }
  })
  for (let n = 0; n < 5; n++) assert.equal((await verdict(n)).statusCode, 200)

  await svc.destroy(new Error('stop now (test)'))
  await svc.destroy() // idempotent
  assert.equal(svc.history.thread.threadId, -1, 'the history writer has stopped')
  const late = await verdict(9)
  assert.equal(late.statusCode, 503)
  assert.equal(late.json().code, 'OVERLOADED')
  await svc.app.close()

  const again = await startService(config)
  t.after(async () => { await again.app.close() })
  await again.history.flush()
  assert.deepEqual(readHistory(dir).map((r) => r.record.request_id).sort(), [0, 1, 2, 3, 4].map((n) => `answered-${n}`))
})
