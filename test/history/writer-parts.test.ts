/**
 * The history writer and parts it cannot read: a part of an unknown format is set aside as it arrives (in the
 * spool folder's history.rejected, for an operator), and the requests around it, in the same batch, are written.
 */
import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import pino from 'pino'
import { startHistory } from '../../src/pool/history-client.ts'
import { HistoryItems, itemFragment, kInvalidVerdictMembers } from '../../src/pool/history-codec.ts'
import type { HistoryEnvelope } from '../../src/pool/history-types.ts'
import { dbPathOf, readHistory } from '../fixtures/read-history.ts'
import { historyEnvelope } from '../fixtures/history-record.ts'

function envelope (request: string): HistoryEnvelope {
  return historyEnvelope({ tenant: 't1', request_id: request, count: 1 })
}

function part (value: string, format = 1): Uint8Array {
  const items = new HistoryItems(1)
  items.add('domain', value, value, itemFragment({ type: 'domain', value, normalized: value }, kInvalidVerdictMembers, null, null))
  const bytes = Buffer.from(items.encode())
  bytes.writeUInt32LE(format, 0)
  return new Uint8Array(bytes)
}

test('a part of an unknown format is set aside on arrival; the requests before and after it in its batch are written', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-writer-parts-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const writer = await startHistory({
    store: { kind: 'sqlite', path: dbPathOf(dir) },
    spoolDir: join(dir, 'spool'),
    spoolLimit: 1024 * 1024,
    batch: 100,
    flushMs: 1000,
    retentionDays: 0,
    maxBacklog: 1_000_000,
    logger: pino({ level: 'silent' })
  })
  writer.submit(envelope('r1'), [part('one.example')])
  writer.submit(envelope('r2'), [part('bad.example', 7)])
  writer.submit(envelope('r3'), [part('three.example')])
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
