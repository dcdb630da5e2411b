/**
 * The history writer and parts it cannot read: a part of an unknown format is set aside as it arrives (in the
 * spool folder's history.rejected, for an operator), and the requests around it, in the same batch, are written.
 * Stored bulk parts' buffers go back to the main thread for reuse.
 */
import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test, type TestContext } from 'node:test'
import pino from 'pino'
import { SpareBuffers } from '../../src/bytes/byte-sink.ts'
import { startHistory, type HistoryClient } from '../../src/history/client.ts'
import { HistoryItems } from '../../src/history/codec.ts'
import { kInvalidVerdictMembers } from '../../src/history/record.ts'
import type { HistoryRow } from '../../src/history/rows.ts'
import { LegacySpool } from '../../src/history/legacy-spool.ts'
import { historyRows } from '../fixtures/history-rows.ts'
import type { HistoryEnvelope } from '../../src/history/types.ts'
import { dbPathOf, readHistory } from '../fixtures/read-history.ts'
import { historyEnvelope, itemFragment } from '../fixtures/history-record.ts'

function envelope (request: string): HistoryEnvelope {
  return historyEnvelope({ tenant: 't1', request_id: request, count: 1 })
}

/** An encoded part of one item, its format number replaced by `format` when given. */
function part (value: string, format?: number): Uint8Array {
  const items = new HistoryItems(1)
  items.add('domain', value, value, itemFragment({ type: 'domain', value, normalized: value }, kInvalidVerdictMembers, null, null))
  const bytes = Buffer.from(items.encode())
  if (format !== undefined) bytes.writeUInt32LE(format, 0)
  return new Uint8Array(bytes)
}

/** A history writer on a SQLite store in a fresh directory (removed after the test). */
async function startWriter (t: TestContext, batch: number, spares?: SpareBuffers, existing?: string): Promise<{ dir: string, writer: HistoryClient }> {
  const dir = existing ?? mkdtempSync(join(tmpdir(), 'iocv-writer-parts-'))
  const open: { writer?: HistoryClient } = {}
  // Closed here too (close() is idempotent), so a failed assertion does not leave the writer thread holding the run.
  t.after(async () => {
    await open.writer?.close()
    rmSync(dir, { recursive: true, force: true })
  })
  const writer = open.writer = await startHistory({
    store: { kind: 'sqlite', path: dbPathOf(dir) },
    legacySpoolDir: join(dir, 'spool'),
    journalDir: join(dir, 'journal'),
    journalLimit: 64 * 1024 * 1024,
    journalSegmentBytes: 1024 * 1024,
    durability: 'sync',
    asyncWindowMs: 50,
    asyncWindowBytes: 1024 * 1024,
    commitTimeoutMs: 10_000,
    batch,
    flushMs: 1000,
    retentionDays: 0,
    maxBacklog: 1_000_000,
    logger: pino({ level: 'silent' }),
    ...(spares === undefined ? {} : { spares })
  })
  return { dir, writer }
}

test('a part of an unknown format is set aside on arrival; the requests before and after it in its batch are written', async (t) => {
  const { dir, writer } = await startWriter(t, 100)
  await writer.submit(envelope('r1'), [part('one.example')])
  await writer.submit(envelope('r2'), [part('bad.example', 7)])
  await writer.submit(envelope('r3'), [part('three.example')])
  await writer.flush()
  assert.deepEqual(readHistory(dir).map((r) => r.record.request_id), ['r1', 'r3'])
  const state = writer.state()
  assert.equal(state.written, 2)
  assert.equal(state.pending, 0)
  await writer.close()
  const rejected = join(dir, 'spool', 'history.rejected')
  assert.ok(existsSync(rejected) && statSync(rejected).size > 0, 'the refused part is kept for an operator')
  assert.ok(!existsSync(join(dir, 'spool', 'history.spool')) || statSync(join(dir, 'spool', 'history.spool')).size === 0)
})

test('once stored, a bulk part\'s buffer goes back to the main thread\'s spares; a single call\'s small part does not', async (t) => {
  const spares = new SpareBuffers(4)
  const { dir, writer } = await startWriter(t, 100_000, spares)
  const items = new HistoryItems(600)
  for (let i = 0; i < 600; i++) {
    const value = `host-${i}.spares.example`
    items.add('domain', value, value, itemFragment({ type: 'domain', value, normalized: value }, kInvalidVerdictMembers, null, null))
  }
  const big = items.encode()
  assert.ok(big.byteLength >= 64 * 1024, `${big.byteLength} bytes`)
  const length = big.buffer.byteLength
  await writer.submit(historyEnvelope({ tenant: 't1', request_id: 'bulk-1', count: 600 }), [big])
  await writer.submit(envelope('single-1'), [part('one.spares.example')])
  await writer.flush()
  // The status the flush waits for follows the hand-back on the same port.
  assert.equal(spares.size, 1)
  const back = spares.pop() as ArrayBuffer
  assert.equal(back.byteLength, length)
  const rows = readHistory(dir)
  assert.equal(rows.length, 601)
  assert.equal(rows.filter((r) => r.record.request_id === 'bulk-1').length, 600)
  await writer.close()
})

test('a spool left by a version before the journal is replayed once at start, before journalled records', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-writer-legacy-'))
  const rows: HistoryRow[] = []
  historyRows(envelope('spooled-1'), [part('one.legacy.example')], rows)
  historyRows(envelope('spooled-2'), [part('two.legacy.example')], rows)
  const spool = new LegacySpool(join(dir, 'spool'))
  spool.append(rows)
  spool.close()
  const { writer } = await startWriter(t, 100, undefined, dir)
  await writer.submit(envelope('journalled'), [part('three.legacy.example')])
  await writer.flush()
  assert.deepEqual(readHistory(dir).map((r) => r.record.request_id), ['spooled-1', 'spooled-2', 'journalled'])
  assert.equal(writer.state().legacySpoolBytes, 0)
  await writer.close()
  assert.ok(!existsSync(join(dir, 'spool', 'history.spool')) || statSync(join(dir, 'spool', 'history.spool')).size === 0)
})
