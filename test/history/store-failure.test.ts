/**
 * History never waits for the store and is never lost: while the store refuses writes, verdicts are still answered
 * (their history is in the journal), health reports the backlog live, and after recovery every record is written
 * once, in order. Past the journal limit new verdict requests get 503 OVERLOADED instead of records being dropped.
 *
 * The fault is real: the test holds SQLite's write lock on the service's database file from another connection.
 * The history writer then waits out the store's busy timeout (5 s, src/store/sqlite.ts) before each failed
 * attempt, which bounds how long these tests take.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { setTimeout as sleep } from 'node:timers/promises'
import { test, type TestContext } from 'node:test'
import Database from 'better-sqlite3'
import { loadConfig } from '../../src/config.ts'
import { createLogger, startService } from '../../src/service.ts'
import { build, kTestIntelCache, type Built } from '../helper.ts'
import { dbPathOf, readHistory, today, waitFor } from '../fixtures/read-history.ts'

interface Health {
  status: string
  reasons: string[]
  checks: { history: { status: string, pending: number, written: number, legacy_spool_bytes: number, spool_bytes: number, journal_bytes: number, journal_limit: number } }
}

async function health (b: Built): Promise<Health> {
  return (await b.app.inject({ method: 'GET', url: '/api/v2/ioc/health' })).json() as Health
}

/** Takes SQLite's write lock on the service's database; released by the returned function (and after the test). */
function lockStore (t: TestContext, b: Pick<Built, 'config'>): () => void {
  const db = new Database(dbPathOf(b.config.dataDir))
  db.exec('BEGIN EXCLUSIVE')
  const release = (): void => {
    if (db.inTransaction) db.exec('ROLLBACK')
  }
  t.after(() => { release(); db.close() })
  return release
}

interface Sent { requestId: string, n: number }

/** Sends request `i` of a run: mostly singles, every third a bulk of four. Returns the response. */
async function send (b: Built, requestId: string, i: number): Promise<{ status: number, code?: string, retryAfter?: string, n: number }> {
  const headers = { 'x-api-key': b.key, 'x-request-id': requestId }
  const res = i % 3 === 2
    ? await b.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict/bulk', headers, payload: { indicators: [0, 1, 2, 3].map((k) => ({ value: `198.51.${i % 256}.${k}` })) } })
    : await b.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers, payload: { indicator: { value: `203.0.113.${i % 256}` } } })
  const body = res.json() as { code?: string }
  return { status: res.statusCode, ...(body.code === undefined ? {} : { code: body.code }), ...(typeof res.headers['retry-after'] === 'string' ? { retryAfter: res.headers['retry-after'] } : {}), n: i % 3 === 2 ? 4 : 1 }
}

/** Waits until the writer has nothing spooled, pending or in transit and health is ok again. */
async function drained (b: Built): Promise<Health> {
  return await waitFor('the spool to drain', async () => {
    const h = await health(b)
    return h.status === 'ok' && h.checks.history.journal_bytes === 0 && h.checks.history.pending === 0 ? h : undefined
  })
}

/** Asserts that the rows, in insertion order, are exactly the acknowledged requests' records, in request order. */
function assertWrittenOnceInOrder (b: Built, sent: Sent[]): number {
  const rows = readHistory(b.config.dataDir)
  const expected = sent.flatMap((s) => Array.from({ length: s.n }, () => s.requestId))
  assert.deepEqual(rows.map((r) => r.record.request_id), expected)
  return rows.length
}

test('while the store refuses writes, verdicts are answered, health is degraded, and after recovery every record is written once, in order', async (t) => {
  const b = await build(t)
  const release = lockStore(t, b)
  const sent: Sent[] = []
  let i = 0
  const sendOk = async (): Promise<void> => {
    const requestId = `req-${String(i).padStart(4, '0')}`
    const r = await send(b, requestId, i++)
    assert.equal(r.status, 200, 'history is not on the request path')
    sent.push({ requestId, n: r.n })
  }
  for (let k = 0; k < 9; k++) await sendOk()

  const degraded = await waitFor('health to report the failing store', async () => {
    const h = await health(b)
    return h.status === 'degraded' ? h : undefined
  })
  assert.equal(degraded.checks.history.status, 'store_failing')
  assert.ok(degraded.checks.history.journal_bytes > 0)
  assert.equal(degraded.checks.history.legacy_spool_bytes, 0, 'nothing goes to the old spool')
  assert.equal(degraded.checks.history.spool_bytes, 0, 'the deprecated name says the same')
  assert.ok(degraded.reasons.length > 0 && degraded.reasons.every((r) => r.length > 0), 'degraded names its reason')
  assert.equal((await b.app.inject({ method: 'GET', url: '/api/v2/ioc/health' })).statusCode, 200, 'degraded is still 200')

  // Requests arriving while records wait queue behind them, and the journal's size in health grows with them.
  for (let k = 0; k < 9; k++) await sendOk()
  assert.ok((await health(b)).checks.history.journal_bytes > degraded.checks.history.journal_bytes, 'journal_bytes is live')

  release()
  const ok = await drained(b)
  assert.deepEqual(ok.reasons, [])
  await b.history.flush()
  const rows = assertWrittenOnceInOrder(b, sent)
  assert.equal(ok.checks.history.written, rows)
  assert.equal((await b.store.usage('t1', null, today())).total, rows, 'usage counts each row once')

  // The writer is healthy again: new records go straight to the store.
  await sendOk()
  await b.history.flush()
  assertWrittenOnceInOrder(b, sent)
})

test('past the journal limit new verdict requests get 503 OVERLOADED with Retry-After, and nothing acknowledged is lost', async (t) => {
  const b = await build(t, { IOC_JOURNAL_LIMIT: '1024' })
  const release = lockStore(t, b)
  const acknowledged: Sent[] = []
  const refused: string[] = []
  let i = 0
  const refusal = await waitFor('a request refused for the full journal', async () => {
    const requestId = `req-${String(i).padStart(4, '0')}`
    const r = await send(b, requestId, i++)
    if (r.status === 200) {
      acknowledged.push({ requestId, n: r.n })
      return undefined
    }
    refused.push(requestId)
    return r
  }, 120_000)
  assert.equal(refusal.status, 503)
  assert.equal(refusal.code, 'OVERLOADED')
  assert.ok(Number(refusal.retryAfter) > 0, 'Retry-After in seconds')
  const h = await waitFor('health to report the store failure', async () => {
    const x = await health(b)
    return x.status === 'degraded' ? x : undefined
  })
  assert.ok(h.checks.history.journal_bytes >= 1024)
  assert.equal(h.checks.history.journal_limit, 1024)
  // Both endpoints refuse while the journal is over its limit, and a refusal is not recorded.
  for (let k = 0; k < 3; k++) {
    const requestId = `refused-${k}`
    const r = await send(b, requestId, k)
    assert.equal(r.status, 503)
    assert.equal(r.code, 'OVERLOADED')
    refused.push(requestId)
  }

  release()
  await drained(b)
  await b.history.flush()
  const rows = assertWrittenOnceInOrder(b, acknowledged)
  assert.ok(rows > 0)
  assert.equal(readHistory(b.config.dataDir).filter((r) => refused.includes(r.record.request_id)).length, 0)
  assert.equal((await b.store.usage('t1', null, today())).total, rows)

  // With the journal drained, requests are admitted again.
  const again = await send(b, 'after', 0)
  assert.equal(again.status, 200)
})

test('a failing store is one warn line with its code when it starts failing, and one info line when it writes again', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-store-log-'))
  const lines: Array<Record<string, unknown>> = []
  const sink = new Writable({ write (chunk: Buffer, _enc, cb) { lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>); cb() } })
  const config = loadConfig({ IOC_DATA_DIR: dir, IOC_LOG_LEVEL: 'info', IOC_POOL_SIZE: '0', IOC_BOOTSTRAP_KEY: '0', IOC_INTEL_CACHE_DIR: kTestIntelCache, IOC_HISTORY_FLUSH_MS: '20' })
  const svc = await startService(config, { logger: createLogger(config, sink) })
  t.after(async () => { await svc.app.close(); rmSync(dir, { recursive: true, force: true }) })
  const key = (await svc.store.createKey({ tenant: 't1', permissions: ['verdict'] })).key
  const storeLines = (): Array<Record<string, unknown>> => lines.filter((l) => typeof l.msg === 'string' && l.msg.startsWith('history store'))
  const single = async (value: string): Promise<void> => {
    const res = await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'x-api-key': key }, payload: { indicator: { value } } })
    assert.equal(res.statusCode, 200)
  }

  const release = lockStore(t, { config })
  await single('203.0.113.7')
  const failing = await waitFor('the store failure\'s log line', async () => storeLines()[0])
  assert.equal(failing.level, 40)
  assert.equal(failing.msg, 'history store failing; records wait in the journal')
  assert.match(String(failing.reason), /: STORE_UNAVAILABLE \(SQLITE_BUSY\)$/)
  assert.ok(Number(failing.pending) >= 1)
  // The writer retries (each attempt waits out SQLite's 5 s busy timeout) without another line.
  await single('203.0.113.8')
  await sleep(6_000)
  assert.equal(storeLines().length, 1, 'retries of the same failure log nothing more')

  release()
  const again = await waitFor('the recovery\'s log line', async () => storeLines()[1])
  assert.equal(again.level, 30)
  assert.equal(again.msg, 'history store writes again')
  await svc.history.flush()
  await single('203.0.113.9')
  await svc.history.flush()
  assert.equal(storeLines().length, 2, 'a healthy store logs nothing per batch')
  assert.ok(!JSON.stringify(storeLines()).includes(dir), 'no path or message in the lines')
})
