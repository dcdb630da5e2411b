/**
 * Time-ordered entry ids and their listing cursors (src/store/sortable-id.ts), shared by allowlist and feedback.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { SortableIds } from '../../src/store/sortable-id.ts'

test('ids made in one millisecond, or with the clock going back, still increase as bytes', () => {
  const ids = new SortableIds('zz')
  const made = [ids.next(1_000), ids.next(1_000), ids.next(999), ids.next(5_000), ids.next(5_000)]
  for (const id of made) assert.match(id, /^zz_[0-9a-z]{9}[0-9a-f]{10}$/)
  const bytes = made.map((id) => Buffer.from(id, 'latin1'))
  for (let i = 1; i < bytes.length; i++) assert.equal(Buffer.compare(bytes[i - 1] as Buffer, bytes[i] as Buffer), -1, `id ${i} after id ${i - 1}`)
  assert.equal(made[0]?.slice(3, 12), (1_000).toString(36).padStart(9, '0'))
})

test('a cursor continues after the id it was made from', () => {
  const ids = new SortableIds('zz')
  const id = ids.next(Date.UTC(2026, 0, 1))
  const cursor = ids.cursorOf(id)
  assert.match(cursor, /^[A-Za-z0-9_-]+$/)
  assert.equal(ids.afterCursor(cursor), id)
})

test('a cursor of another prefix, a made-up string or a non-string is refused with INVALID_REQUEST', () => {
  const ours = new SortableIds('aa')
  const theirs = new SortableIds('bb')
  const foreign = theirs.cursorOf(theirs.next(1))
  for (const bad of [foreign, 'not a cursor', '', 'x'.repeat(65), Buffer.from('aa_123', 'latin1').toString('base64url'), 42 as unknown as string]) {
    assert.throws(() => ours.afterCursor(bad), { code: 'INVALID_REQUEST' }, String(bad))
  }
  assert.equal(ours.valid(theirs.next(1)), false)
  assert.equal(ours.valid(ours.next(1)), true)
})

test('a prefix that is not 1 to 8 lowercase letters is refused', () => {
  for (const bad of ['', 'A', 'a_b', 'abcdefghi', 'a1']) assert.throws(() => new SortableIds(bad), TypeError, bad)
})
