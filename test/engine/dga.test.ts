/**
 * The DGA model through the engine's exported functions: family recall at the profile's threshold (floors are the
 * recall measured by bench/dga-eval.ts on 2026-11-25 minus a margin), tricky real names that must not fire, and
 * bounded confidence.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { getDomainWithoutSuffix } from 'tldts'
import { dgaConfidence, dgaSignal } from '../../src/engine/signals/dga.ts'
import { PROFILES } from '../../src/engine/profiles.ts'
import { kFamilies } from '../fixtures/dga/index.ts'

const { dgaThreshold } = (PROFILES[0] as (typeof PROFILES)[number]).lexical

/** Measured recall at the threshold, 500 names per family; the floor is this minus 10 points. */
const kMeasured: Record<string, number> = { conficker: 0.382, cryptolocker: 0.75, necurs: 0.796, pykspa: 0.682, ramnit: 0.81 }

test('DGA names of each random-letter family fire at the threshold above the measured floor', () => {
  for (const [family, measured] of Object.entries(kMeasured)) {
    const labels = (kFamilies[family] as (n: number) => string[])(500).map((d) => getDomainWithoutSuffix(d) ?? '')
    const recall = labels.filter((l) => dgaSignal(l, dgaThreshold) !== null).length / labels.length
    assert.ok(recall >= measured - 0.1, `${family}: ${recall}`)
  }
})

test('tricky real names (hyphenated, long, university, punycode, well known) do not fire', () => {
  const names = ['dhbw-karlsruhe', 'stackoverflow', 'universitaet-fuer-bodenkultur-wien', 'uni-hohenheim', 'tu-braunschweig',
    'hochschule-bonn-rhein-sieg', 'xn--80ak6aa92e', 'xn--mnchen-3ya', 'wikipedia', 'githubusercontent', 'cloudflare',
    'kubernetes', 'postgresql', 'javascript', 'sciencedirect', 'stackexchange', 'bundesregierung', 'rijksoverheid']
  for (const n of names) assert.equal(dgaSignal(n, dgaThreshold), null, `${n}: ${dgaConfidence(n)}`)
})

test('confidence is bounded in [0, 1], zero for short and punycode labels, and higher for random than for words', () => {
  for (const l of ['', 'abc', 'xn--mnchen-3ya', 'a'.repeat(200), 'qx7zk2vb9wrt4m', '0123456789', '-----']) {
    const p = dgaConfidence(l)
    assert.ok(p >= 0 && p <= 1, `${l}: ${p}`)
  }
  assert.equal(dgaConfidence('abc'), 0)
  assert.ok(dgaConfidence('qxvbzkwrtpmfgh') > dgaConfidence('mountainriver'))
})

test('a firing DGA hit carries the model confidence, threshold and features as evidence', () => {
  const e = dgaSignal('qx7zk2vb9wrt4m', dgaThreshold)
  assert.ok(e !== null)
  assert.ok(e.model_confidence >= dgaThreshold)
  assert.equal(e.length, 14)
  assert.ok(e.digit_ratio > 0)
})
