/**
 * Quality on known-good sets built from sources the engine does not use as lists (test/fixtures/known-good/README.md):
 * with the default profile and data, at most 0.5% of each set scores above neutral and none scores 70 or more.
 * A quality assertion on fixed data, not a timing; `npm run bench:known-good` prints the same figures per set.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { measureAll } from '../../bench/known-good.ts'
import { sampleSnapshot } from '../helper.ts'

const kMinSizes: Record<string, number> = {
  'cloud-addresses': 3000,
  'mail-providers': 300,
  'open-source-debian': 6000,
  'open-source-npm': 300,
  'provider-asns': 150,
  resolvers: 140,
  universities: 20_000
}

test('every known-good set: at most 0.5% above neutral, none at 70 or more', async () => {
  const results = measureAll(await sampleSnapshot())
  assert.deepEqual(results.map((r) => r.set), Object.keys(kMinSizes))
  for (const r of results) {
    const detail = `${r.set}: ${r.above} of ${r.count} above 50, max ${r.maxScore}; ${r.examples.map(([v, s]) => `${v} ${s}`).join(', ')}`
    assert.ok(r.count >= (kMinSizes[r.set] as number), `${r.set} has ${r.count} indicators`)
    assert.ok(r.aboveRate <= 0.005, detail)
    assert.equal(r.high, 0, detail)
  }
})

test('the known-good knowledge pulls resolvers below neutral and keeps cloud addresses and provider ASNs at most neutral', async () => {
  const by = Object.fromEntries(measureAll(await sampleSnapshot()).map((r) => [r.set, r]))
  const resolvers = by.resolvers
  assert.ok(resolvers !== undefined && resolvers.below / resolvers.count >= 0.8, `${resolvers?.below} of ${resolvers?.count} resolvers below 50`)
  for (const set of ['cloud-addresses', 'provider-asns']) assert.equal(by[set]?.above, 0, set)
})
