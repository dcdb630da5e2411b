/**
 * The history writer thread dying loses nothing: requests keep being answered (their history is in the journal),
 * a new thread is started, replays the journal from the store's position, and every acknowledged record is written
 * exactly once.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import Database from 'better-sqlite3'
import { build } from '../helper.ts'
import { dbPathOf, readHistory, waitFor } from '../fixtures/read-history.ts'

interface Health { status: string, checks: { history: { status: string, pending: number, journal_bytes: number, writer_restarts: number } } }

test('a history writer thread killed mid-backlog is replaced, and every acknowledged record is written once', async (t) => {
  const b = await build(t)
  const health = async (): Promise<Health> => (await b.app.inject({ method: 'GET', url: '/api/v2/ioc/health' })).json() as Health
  const sent: string[] = []
  const send = async (): Promise<void> => {
    const requestId = `req-${String(sent.length).padStart(3, '0')}`
    const res = await b.app.inject({
      method: 'POST',
      url: '/api/v2/ioc/verdict',
      headers: { 'x-api-key': b.key, 'x-request-id': requestId },
      payload: { indicator: { value: `198.51.100.${sent.length % 256}` } }
    })
    assert.equal(res.statusCode, 200)
    sent.push(requestId)
  }
  for (let i = 0; i < 5; i++) await send()
  await b.history.flush()
  // (Killed while idle: a thread terminated inside a SQLite call takes the process down with it.)
  const exited = new Promise((resolve) => b.history.thread.once('exit', resolve))
  await b.history.thread.terminate()
  await exited
  // Answered while no writer runs: history goes to the journal.
  for (let i = 0; i < 5; i++) await send()
  const down = await health()
  assert.ok(down.checks.history.journal_bytes > 0)
  // The store is locked while the new thread starts: it waits, then replays.
  const db = new Database(dbPathOf(b.config.dataDir))
  t.after(() => { if (db.inTransaction) db.exec('ROLLBACK'); db.close() })
  db.exec('BEGIN EXCLUSIVE')
  for (let i = 0; i < 5; i++) await send()
  db.exec('ROLLBACK')
  const h = await waitFor('a new writer to drain the journal', async () => {
    const x = await health()
    return x.checks.history.writer_restarts === 1 && x.checks.history.status === 'ok' && x.checks.history.pending === 0 &&
      x.checks.history.journal_bytes === 0
      ? x
      : undefined
  })
  assert.equal(h.status, 'ok')
  await b.history.flush()
  assert.deepEqual(readHistory(b.config.dataDir).map((r) => r.record.request_id), sent)
})
