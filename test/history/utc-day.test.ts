/**
 * utcDayOf (src/history/utc-day.ts) keeps the day it answered last: every answer is still the instant's own UTC day,
 * at the edges of days, going back and forth between days, and before 1970.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { utcDayOf } from '../../src/history/utc-day.ts'

const kDay = 86_400_000

test('the day of an instant is its own UTC day whatever was asked before', () => {
  const midnight = Date.parse('2026-11-27T00:00:00.000Z')
  const instants = [midnight, midnight - 1, midnight + kDay - 1, midnight + kDay, midnight + 1, midnight - kDay, midnight - 1,
    0, -1, -kDay, -kDay - 1, Date.parse('2024-02-29T23:59:59.999Z'), Date.parse('2024-03-01T00:00:00.000Z'), midnight + 12 * 3_600_000]
  for (let round = 0; round < 2; round++) {
    for (const ms of instants) assert.equal(utcDayOf(ms), new Date(ms).toISOString().slice(0, 10), String(ms))
  }
})

test('an instant that is no date is refused as before', () => {
  utcDayOf(Date.parse('2026-11-27T10:00:00.000Z'))
  assert.throws(() => utcDayOf(Number.NaN), RangeError)
  assert.throws(() => utcDayOf(8.64e15 + 1), RangeError)
})
