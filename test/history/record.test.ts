/**
 * The history record's layout (src/history/record.ts): an item written from its pieces reads back as the record's
 * indicator half, a record split into halves joins back into itself, and labels follow the signal detail level.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { kTopSignals, type Assessment } from '../../src/engine/index.ts'
import {
  indicatorJson, itemTail, kInvalidVerdictMembers, kItemKeys, labelsOf, recordFragment, recordJson, splitRecord, verdictMembers
} from '../../src/history/record.ts'
import { historyRecord } from '../fixtures/history-record.ts'

test('an item written from its pieces parses as the indicator half, members in kItemKeys order', () => {
  const labels = [{ signal_id: 's1', direction: 'malicious', signal_group: 'g', signal_subgroup: 'sg', signal_name: 'n', contribution: 0.5 }]
  const cases = [
    { indicator: { type: 'ip', value: ' 1.2.3.4 ', normalized: '1.2.3.4' }, risk: { score: 80 }, scores: { signal_groups: {} }, labels, action_taken: 'block', action_source: 'edr "x"' },
    { indicator: { type: null, value: 'not\u0000valid', normalized: null }, risk: null, scores: null, labels: [], action_taken: null, action_source: null },
    { indicator: { type: 'domain', value: 'bücher.de', normalized: 'xn--bcher-kva.de' }, risk: { score: 0 }, scores: {}, labels: [], action_taken: null, action_source: 'soar' }
  ]
  for (const c of cases) {
    const { type, value, normalized } = c.indicator
    const verdict = c.risk === null ? kInvalidVerdictMembers : verdictMembers(JSON.stringify(c.risk), JSON.stringify(c.scores), c.labels)
    const item = recordFragment(indicatorJson(type, value, normalized), itemTail(verdict, c.action_taken, c.action_source))
    const parsed = JSON.parse(`{${item}}`) as Record<string, unknown>
    assert.deepEqual(Object.keys(parsed), [...kItemKeys])
    assert.deepEqual(parsed, { ...c, label_count: c.labels.length })
  }
})

test('a record splits into envelope and item by kItemKeys and joins back into the same record', () => {
  const record = historyRecord({
    tenant: 't1',
    date: '2026-01-02T03:04:05.678Z',
    indicator: { type: 'ip', value: '192.0.2.9', normalized: '192.0.2.9' },
    risk: { score: 12 },
    labels: [{ signal_id: 'x' }],
    label_count: 1,
    action_taken: 'allow',
    source: { channel: 'siem' }
  })
  const { envelope, item } = splitRecord(record, record.date)
  const halves = [JSON.parse(envelope) as Record<string, unknown>, JSON.parse(`{${item}}`) as Record<string, unknown>]
  assert.deepEqual(Object.keys(halves[1] as object).sort(), [...kItemKeys].sort())
  assert.ok(Object.keys(halves[0] as object).every((k) => !(kItemKeys as readonly string[]).includes(k)))
  assert.deepEqual(JSON.parse(recordJson(envelope, item)), record)
  // The date given replaces the record's (the stores write it canonical).
  assert.equal(JSON.parse(splitRecord(record, '2026-01-02T03:04:05.000Z').envelope).date, '2026-01-02T03:04:05.000Z')
  assert.throws(() => splitRecord({ indicator: { toJSON: () => undefined } }, 'd'), /not JSON objects/)
})

test('labels are the signals without evidence: none, the top kTopSignals, or all', () => {
  const signal = (i: number): Assessment['signals'][number] => ({
    signal_id: `s${i}`, direction: 'malicious', signal_subgroup: 'sub', signal_group: 'grp', signal_name: `n${i}`, category: 'c', contribution: i, evidence: { secret: 'e' }
  })
  const a = { signals: Array.from({ length: kTopSignals + 2 }, (_, i) => signal(i)) } as unknown as Assessment
  assert.deepEqual(labelsOf(a, 'none'), [])
  assert.deepEqual(labelsOf(null, 'all'), [])
  assert.deepEqual(labelsOf(a, 'top').map((l) => l.signal_id), Array.from({ length: kTopSignals }, (_, i) => `s${i}`))
  const all = labelsOf(a, 'all')
  assert.equal(all.length, kTopSignals + 2)
  assert.deepEqual(all[0], { signal_id: 's0', direction: 'malicious', signal_group: 'grp', signal_subgroup: 'sub', signal_name: 'n0', contribution: 0 })
})
