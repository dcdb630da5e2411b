/**
 * DGA scorer: how likely a registrable label (the name without its public suffix) was made by a domain generation
 * algorithm rather than by people. A character bigram Markov model of real domain names gives the mean log-likelihood
 * per transition; with length, digit ratio, vowel ratio, longest consonant run, hyphens and entropy it feeds a small
 * logistic regression, fitted offline by scripts/train-dga.ts (model in dga-model.ts), whose output is the confidence.
 * The feature set follows the lexical detectors of Schiavoni et al., "Phoenix: DGA-based botnet tracking and
 * intelligence" (DIMVA 2014) and Antonakakis et al., "From throw-away traffic to bots" (USENIX Security 2012).
 * Hot path: one pass over the label, no allocation per call (fixed scratch arrays).
 */
import { kDgaModel } from './dga-model.ts'

/** Alphabet of the Markov model: 0 = boundary, 1-26 a-z, 27-36 0-9, 37 hyphen, 38 anything else. */
export const kDgaAlphabet = 39

/** Symbol index of a char code (see kDgaAlphabet). */
export function dgaSymbol (c: number): number {
  if (c >= 97 && c <= 122) return c - 96
  if (c >= 48 && c <= 57) return c - 21
  if (c === 45) return 37
  return 38
}

/** Names of the features, in the order of the regression weights. */
export const kDgaFeatures = ['markov', 'markov_total', 'length', 'digit_ratio', 'vowel_ratio', 'consonant_run', 'hyphens', 'entropy'] as const

/** Character counts (scratch space only: the functions stay pure). */
const kCounts = new Int32Array(kDgaAlphabet)
/** Feature vector of the last call (scratch space only). */
const kX = new Float64Array(kDgaFeatures.length)

/**
 * Fills `out` with the raw features of `label` (lowercase ASCII; callers skip punycode). The Markov term is the
 * mean log-probability per transition, boundaries included, so it does not grow with length.
 */
export function dgaFeatures (label: string, out: Float64Array, logProb: ArrayLike<number>): void {
  const n = label.length
  let prev = 0
  let lp = 0
  let digits = 0
  let vowels = 0
  let letters = 0
  let run = 0
  let maxRun = 0
  let hyphens = 0
  for (let i = 0; i < n; i++) {
    const c = label.charCodeAt(i)
    const s = dgaSymbol(c)
    lp += logProb[prev * kDgaAlphabet + s] as number
    prev = s
    kCounts[s] = (kCounts[s] as number) + 1
    if (s >= 1 && s <= 26) {
      letters++
      if (c === 97 || c === 101 || c === 105 || c === 111 || c === 117 || c === 121) {
        vowels++
        run = 0
      } else if (++run > maxRun) maxRun = run
    } else {
      run = 0
      if (s === 37) hyphens++
      else if (s <= 36) digits++
    }
  }
  lp += logProb[prev * kDgaAlphabet] as number
  let h = 0
  for (let i = 0; i < n; i++) {
    const s = dgaSymbol(label.charCodeAt(i))
    const k = kCounts[s] as number
    if (k === 0) continue
    kCounts[s] = 0
    const p = k / n
    h -= p * Math.log2(p)
  }
  out[0] = lp / (n + 1)
  out[1] = lp
  out[2] = n
  out[3] = n === 0 ? 0 : digits / n
  out[4] = letters === 0 ? 0 : vowels / letters
  out[5] = maxRun
  out[6] = hyphens
  out[7] = h
}

/** Logistic regression over standardised features: a probability-like confidence in [0, 1]. */
export function dgaLogistic (x: Float64Array, weights: readonly number[], bias: number, mean: readonly number[], scale: readonly number[]): number {
  let z = bias
  for (let i = 0; i < x.length; i++) z += (weights[i] as number) * (((x[i] as number) - (mean[i] as number)) / (scale[i] as number))
  return 1 / (1 + Math.exp(-z))
}

/** Shortest label scored: shorter ones are too few characters for the model to tell (and are mostly brands). */
const kMinLength = 5

/** Confidence in [0, 1] that `label` is machine-generated; 0 for short, empty or punycode labels. */
export function dgaConfidence (label: string): number {
  if (label.length < kMinLength || label.startsWith('xn--')) return 0
  const m = kDgaModel
  dgaFeatures(label, kX, m.logProb)
  return dgaLogistic(kX, m.weights, m.bias, m.mean, m.scale)
}

function round3 (x: number): number {
  return Math.round(x * 1000) / 1000
}

/** Evidence of a DGA hit: the model's confidence, the threshold and the raw features. */
export interface DgaEvidence {
  model_confidence: number
  model_threshold: number
  model_version: string
  markov_logprob: number
  markov_total: number
  length: number
  digit_ratio: number
  vowel_ratio: number
  consonant_run: number
  hyphens: number
  entropy: number
}

/**
 * The DGA signal: null unless the model's confidence reaches `threshold` (the profile's, chosen so that at most
 * 1% of unusual real names fire; see docs/SCORING.md, "DGA signal"). Allocates only when it fires.
 */
export function dgaSignal (label: string, threshold: number): DgaEvidence | null {
  const p = dgaConfidence(label)
  if (p < threshold) return null
  return {
    model_confidence: round3(p),
    model_threshold: threshold,
    model_version: kDgaModel.version,
    markov_logprob: round3(kX[0] as number),
    markov_total: round3(kX[1] as number),
    length: kX[2] as number,
    digit_ratio: round3(kX[3] as number),
    vowel_ratio: round3(kX[4] as number),
    consonant_run: kX[5] as number,
    hyphens: kX[6] as number,
    entropy: round3(kX[7] as number)
  }
}
