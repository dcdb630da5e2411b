/**
 * DGA scorer: how likely a registrable label (the name without its public suffix) was made by a domain generation
 * algorithm rather than by people. Two generative models are compared with a model of real names:
 *   - real names: an interpolated (Witten-Bell) character trigram model of real domain labels, English words and
 *     place names;
 *   - machine names: uniform random letters, and pronounceable consonant-vowel alternations (a bigram model fitted
 *     on such strings). These are the arithmetic generator classes of Plohmann et al., "A comprehensive measurement
 *     study of domain generating malware" (USENIX Security 2016).
 * The log-likelihood ratios against both, with length, digit ratio and hyphens, feed a logistic regression fitted
 * offline by scripts/train-dga.ts (model in dga-model.ts), whose output is the confidence. Likelihood-ratio tests
 * on character n-grams follow Yadav et al., "Detecting algorithmically generated malicious domain names" (IMC 2010)
 * and the n-gram features of Schiavoni et al., "Phoenix" (DIMVA 2014).
 * Hot path: one pass over the label with integer table lookups; no allocation per call (fixed scratch array).
 */
import { kDgaModel } from './dga-model.ts'

/** Alphabet of the n-gram tables: 0 = boundary, 1-26 a-z, 27 any digit, 28 anything else (hyphen, underscore). */
export const kDgaAlphabet = 29
/** Table entries are -ln P in units of 1/kDgaScale nats, one byte each. */
export const kDgaScale = 16
const kLn26 = Math.log(26)

/** Symbol index of a char code (see kDgaAlphabet). */
export function dgaSymbol (c: number): number {
  if (c >= 97 && c <= 122) return c - 96
  if (c >= 48 && c <= 57) return 27
  return 28
}

/** Names of the regression features, in the order of the weights; slot 5 is evidence only. */
export const kDgaFeatures = ['llr_uniform', 'llr_pronounceable', 'length', 'digit_ratio', 'hyphens'] as const

/** The byte tables of the model: trigram of real names (29^3) and bigram of pronounceable names (29^2). */
export interface DgaTables { trigram: Uint8Array, pronounceable: Uint8Array }

/** The shipped model's tables, decoded once. */
const kTables: DgaTables = {
  trigram: Buffer.from(kDgaModel.trigram, 'base64'),
  pronounceable: Buffer.from(kDgaModel.pronounceable, 'base64')
}

/** Feature vector of the last call (scratch space only: the functions stay pure). */
const kX = new Float64Array(kDgaFeatures.length + 1)

/**
 * Fills `out` with the raw features of `label` (lowercase LDH; callers skip punycode), then the mean ln P per
 * transition under the real-name model in slot 5. Transitions include the end boundary, so an n-letter label has
 * n + 1 of them.
 *   llr_uniform       = ln P_real(label) - ln (1/26)^(n+1): positive when people-like, negative when random-like
 *   llr_pronounceable = ln P_real(label) - ln P_pronounceable(label)
 */
export function dgaFeatures (label: string, out: Float64Array, tables: DgaTables = kTables): void {
  const tri = tables.trigram
  const cv = tables.pronounceable
  const n = label.length
  let a = 0
  let b = 0
  let qReal = 0
  let qCv = 0
  let digits = 0
  let hyphens = 0
  for (let i = 0; i < n; i++) {
    const s = dgaSymbol(label.charCodeAt(i))
    qReal += tri[(a * kDgaAlphabet + b) * kDgaAlphabet + s] as number
    qCv += cv[b * kDgaAlphabet + s] as number
    if (s === 27) digits++
    else if (s === 28) hyphens++
    a = b
    b = s
  }
  qReal += tri[(a * kDgaAlphabet + b) * kDgaAlphabet] as number
  qCv += cv[b * kDgaAlphabet] as number
  const lpReal = -qReal / kDgaScale
  out[0] = lpReal + (n + 1) * kLn26
  out[1] = lpReal + qCv / kDgaScale
  out[2] = n
  out[3] = n === 0 ? 0 : digits / n
  out[4] = hyphens
  out[5] = lpReal / (n + 1)
}

/** Logistic regression over standardised features: a probability-like confidence in [0, 1]. */
export function dgaLogistic (x: ArrayLike<number>, weights: readonly number[], bias: number, mean: readonly number[], scale: readonly number[]): number {
  let z = bias
  for (let i = 0; i < weights.length; i++) z += (weights[i] as number) * (((x[i] as number) - (mean[i] as number)) / (scale[i] as number))
  return 1 / (1 + Math.exp(-z))
}

/** Shortest label scored: shorter ones are too few characters for the model to tell (and are mostly brands). */
const kMinLength = 5

/** Confidence in [0, 1] that `label` is machine-generated; 0 for short, empty or punycode labels. */
export function dgaConfidence (label: string): number {
  if (label.length < kMinLength || label.startsWith('xn--')) return 0
  const m = kDgaModel
  dgaFeatures(label, kX)
  return dgaLogistic(kX, m.weights, m.bias, m.mean, m.scale)
}

function round3 (x: number): number {
  return Math.round(x * 1000) / 1000
}

/** Evidence of a DGA hit: the model's confidence, the thresholds and the features. */
export interface DgaEvidence {
  model_confidence: number
  model_threshold: number
  model_version: string
  /** Mean ln P per character transition under the real-name model (higher is more name-like). */
  markov_logprob: number
  llr_uniform: number
  llr_pronounceable: number
  length: number
  digit_ratio: number
  hyphens: number
}

/**
 * The DGA signal: null unless the model's confidence reaches `threshold` (the profile's, chosen so that at most
 * 1% of unusual real names fire; see docs/SCORING.md, "DGA signal"). Allocates only when it fires.
 */
export function dgaSignal (label: string, threshold: number): DgaEvidence | null {
  const p = dgaConfidence(label)
  if (p < threshold || p === 0) return null
  return {
    model_confidence: round3(p),
    model_threshold: threshold,
    model_version: kDgaModel.version,
    markov_logprob: round3(kX[5] as number),
    llr_uniform: round3(kX[0] as number),
    llr_pronounceable: round3(kX[1] as number),
    length: kX[2] as number,
    digit_ratio: round3(kX[3] as number),
    hyphens: kX[4] as number
  }
}
