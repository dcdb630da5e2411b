/**
 * Trust, the step after the group caps: what a profile's trust rules do to each weighed, group-capped signal.
 */
import type { ScoringProfile } from './profiles.ts'
import type { Hit } from './hits.ts'
import type { NormalizedIndicator } from './types.ts'
import { originOf } from './weigh.ts'

/** Per signal: the scale the trust rules apply, whether it is context only; and the independent sources counted. */
export interface TrustScales {
  scales: number[]
  context: boolean[]
  sources: number
}

/**
 * The trust scales of the signals (null when the profile has no trust rules, so older profiles replay byte for byte).
 *
 * - Context is not evidence: a malicious signal of a context subgroup (hosting under a shared suffix, a disposable
 *   e-mail parent, a punycode homograph), and any listing of an address inside a special-purpose or documentation
 *   range, adds nothing unless other malicious evidence is present; then it strengthens that evidence.
 * - Single-source undated evidence is capped: when the malicious evidence comes from at most one independent source
 *   and none of it carries a date, the positive sum is scaled down to `singleSourceUndatedCap` points, so it cannot
 *   reach `block` alone. A second independent source, or a dated listing (which decays), lifts the cap.
 */
export function trustScales (ind: NormalizedIndicator, profile: ScoringProfile, hits: readonly Hit[], capped: readonly number[]): TrustScales | null {
  const rules = profile.trust
  if (rules === null) return null
  const reservedAddress = ind.type !== 'domain' && hits.some((h) => h.src.direction === 'safe' && (h.src.subgroup === 'non_routable' || h.src.subgroup === 'documentation'))
  const context = hits.map((h) => h.src.direction === 'malicious' && (rules.contextSubgroups.includes(h.src.subgroup) || (reservedAddress && h.match !== 'lexical')))
  const sources = new Set<string>()
  let dated = false
  let evidenceUp = 0
  let contextUp = 0
  for (let i = 0; i < hits.length; i++) {
    const c = capped[i] as number
    if (c <= 0) continue
    if (context[i] === true) {
      contextUp += c
      continue
    }
    evidenceUp += c
    const h = hits[i] as Hit
    if (h.match !== 'lexical') {
      sources.add(originOf(h.src))
      if (h.lastDay !== 0) dated = true
    }
  }
  const contextScale = evidenceUp > 0 ? 1 : 0
  const up = evidenceUp + contextUp * contextScale
  const cap = rules.singleSourceUndatedCap
  const corroboration = sources.size <= 1 && !dated && up > cap ? cap / up : 1
  const scales = capped.map((c, i) => c <= 0 ? 1 : (context[i] === true ? contextScale : 1) * corroboration)
  return { scales, context, sources: sources.size }
}
