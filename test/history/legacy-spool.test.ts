/**
 * The history spool of versions before the journal (src/history/legacy-spool.ts), as the writer replays it: frames replay in order, a restart resumes at the committed
 * offset, and a torn final frame (a crash mid-append) is neither replayed nor allowed to corrupt later frames.
 */
import assert from 'node:assert/strict'
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test, type TestContext } from 'node:test'
import { LegacySpool } from '../../src/history/legacy-spool.ts'
import type { HistoryRow } from '../../src/store/index.ts'

function tempSpoolDir (t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-spool-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

function records (from: number, n: number): HistoryRow[] {
  return Array.from({ length: n }, (_, i) => {
    const date = new Date(Date.UTC(2024, 0, 1, 0, 0, from + i)).toISOString()
    const value = `192.0.2.${(from + i) % 256}`
    return {
      uid: `u-${from + i}`,
      ts: Date.parse(date),
      date,
      day: '2024-01-01',
      tenant: 't1',
      requestId: `r-${from + i}`,
      bulkRequestId: null,
      httpStatus: 200,
      authType: 'api_key',
      apikey: 'aaaaaaaaaaaa',
      userId: null,
      indicatorType: 'ip',
      indicatorValue: value,
      indicatorNormalized: value,
      envelope: JSON.stringify({ date, request_id: `r-${from + i}` }),
      item: `"indicator":${JSON.stringify({ type: 'ip', value, normalized: value })}`
    }
  })
}

/** Replays everything left in the spool, committing each frame, and returns the request ids in replay order. */
function drain (spool: LegacySpool): string[] {
  const ids: string[] = []
  for (let frame = spool.peek(); frame !== null; frame = spool.peek()) {
    ids.push(...frame.records.map((r) => r.requestId))
    spool.commit(frame.next)
  }
  return ids
}

test('an empty spool has no backlog and nothing to peek', (t) => {
  const spool = new LegacySpool(tempSpoolDir(t))
  t.after(() => spool.close())
  assert.equal(spool.backlog, 0)
  assert.equal(spool.peek(), null)
})

test('appended batches are peeked oldest first, whole, and only advance when committed', (t) => {
  const spool = new LegacySpool(tempSpoolDir(t))
  t.after(() => spool.close())
  spool.append(records(0, 3))
  spool.append(records(3, 2))
  const first = spool.peek()
  assert.ok(first !== null)
  assert.deepEqual(first.records, records(0, 3))
  // Peeking again without a commit returns the same frame: a failed store write retries it.
  assert.deepEqual(spool.peek()?.records, records(0, 3))
  spool.commit(first.next)
  const second = spool.peek()
  assert.deepEqual(second?.records, records(3, 2))
  assert.ok(spool.backlog > 0)
})

test('committing the last frame empties the spool and removes its offset file', (t) => {
  const dir = tempSpoolDir(t)
  const spool = new LegacySpool(dir)
  t.after(() => spool.close())
  spool.append(records(0, 2))
  spool.append(records(2, 2))
  assert.deepEqual(drain(spool), ['r-0', 'r-1', 'r-2', 'r-3'])
  assert.equal(spool.backlog, 0)
  assert.equal(spool.size, 0)
  assert.equal(existsSync(join(dir, 'history.spool.offset')), false)
  // The reset spool keeps working.
  spool.append(records(4, 1))
  assert.deepEqual(drain(spool), ['r-4'])
})

test('a restarted spool resumes at the committed offset and never replays a committed frame', (t) => {
  const dir = tempSpoolDir(t)
  const a = new LegacySpool(dir)
  a.append(records(0, 2))
  a.append(records(2, 2))
  a.append(records(4, 2))
  const f = a.peek()
  assert.ok(f !== null)
  a.commit(f.next)
  assert.equal(Number(readFileSync(join(dir, 'history.spool.offset'), 'utf8')), f.next)
  a.close()

  const b = new LegacySpool(dir)
  t.after(() => b.close())
  assert.deepEqual(drain(b), ['r-2', 'r-3', 'r-4', 'r-5'])
})

test('a torn final frame is ignored on restart, and batches appended after it replay intact', (t) => {
  const dir = tempSpoolDir(t)
  const a = new LegacySpool(dir)
  a.append(records(0, 2))
  a.close()
  const whole = statSync(join(dir, 'history.spool')).size
  // A crash mid-append: the header promises 500 bytes, only 10 made it to disk.
  const head = Buffer.alloc(4)
  head.writeUInt32LE(500)
  appendFileSync(join(dir, 'history.spool'), Buffer.concat([head, Buffer.alloc(10, 0xc1)]))

  const b = new LegacySpool(dir)
  t.after(() => b.close())
  assert.equal(b.size, whole, 'the torn bytes are cut off at open')
  b.append(records(2, 2))
  assert.deepEqual(drain(b), ['r-0', 'r-1', 'r-2', 'r-3'])
  assert.equal(b.backlog, 0)
})

test('a torn header shorter than four bytes is ignored too', (t) => {
  const dir = tempSpoolDir(t)
  const a = new LegacySpool(dir)
  a.append(records(0, 1))
  a.close()
  appendFileSync(join(dir, 'history.spool'), Buffer.from([7, 0]))
  const b = new LegacySpool(dir)
  t.after(() => b.close())
  b.append(records(1, 1))
  assert.deepEqual(drain(b), ['r-0', 'r-1'])
})

test('an offset file pointing past the end of the spool starts over instead of skipping records', (t) => {
  const dir = tempSpoolDir(t)
  const a = new LegacySpool(dir)
  a.append(records(0, 2))
  a.close()
  appendFileSync(join(dir, 'history.spool.offset'), '999999')
  const b = new LegacySpool(dir)
  t.after(() => b.close())
  assert.deepEqual(drain(b), ['r-0', 'r-1'])
})
