/**
 * The summary key (Assessor.summaryKey): indicators that share one have the same shared parts (risk, scores, actions,
 * listing), so a writer may reuse the bytes of one for the other. Checked over every listed value of the sample
 * feeds and large mixed corpora, for every profile.
 */
import assert from 'node:assert/strict'
import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { mixedCorpus } from '../../bench/corpus.ts'
import { Assessor, normalize, PROFILES } from '../../src/engine/index.ts'
import { ByteSink } from '../../src/bytes/byte-sink.ts'
import { sampleSnapshot } from '../helper.ts'

/** Every address, block, domain and hash the sample feeds name, with subdomains and neighbours of each. */
function listedValues (): string[] {
  const dir = join(import.meta.dirname, '..', '..', 'data', 'feeds')
  const values = new Set<string>()
  for (const f of readdirSync(dir)) {
    if (!/\.(csv|txt|json|netset)$/.test(f)) continue
    const text = readFileSync(join(dir, f), 'utf8')
    for (const m of text.matchAll(/\b(?:\d{1,3}\.){3}\d{1,3}(?:\/\d{1,2})?\b|\b[a-f0-9]{64}\b|\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}\b/gi)) {
      values.add(m[0])
      if (/^[a-z]/i.test(m[0])) values.add(`www.${m[0]}`).add(`deep.sub.${m[0]}`)
      else if (!m[0].includes('/') && m[0].length < 64) values.add(m[0].replace(/\d+$/, (d) => String((Number(d) + 1) % 256)))
    }
  }
  return [...values]
}

test('indicators with one summary key have the same risk, scores, actions and listing, under every profile', async () => {
  const snapshot = await sampleSnapshot()
  const assessor = new Assessor(snapshot)
  const sink = new ByteSink(256)
  const values = [...listedValues(), ...mixedCorpus(20_000, 161).map((x) => x.value), 'google.com', 'www.google.com', 'mail.google.com', 'www.wikipedia.org']
  for (const profile of PROFILES) {
    const byKey = new Map<string, { value: string, parts: string }>()
    let shared = 0
    for (const value of values) {
      const n = normalize(value)
      if (!n.ok) continue
      assessor.collect(n.indicator, profile)
      assessor.summaryKey(sink)
      const key = sink.buf.toString('latin1', 0, sink.len)
      const parts = JSON.stringify(assessor.shared())
      // The parts the full assessment shows are the same as the shared ones.
      const a = assessor.assessment()
      assert.equal(JSON.stringify([a.risk, a.scores, a.recommended_actions]), JSON.stringify((({ risk, scores, actions }) => [risk, scores, actions])(assessor.shared())), value)
      const first = byKey.get(key)
      if (first === undefined) {
        byKey.set(key, { value, parts })
      } else {
        shared++
        assert.equal(parts, first.parts, `${profile.version}: ${value} and ${first.value} share a key`)
      }
    }
    assert.ok(shared > values.length / 2, `${shared} of ${values.length} share a key`)
    assert.ok(byKey.size > 100, `${byKey.size} keys`)
  }
})
