/**
 * Versioned scoring profiles (`scoring_version`). A profile is data: weights, decay, caps, bands, precedence and
 * action rules. The newest is the default; older ones stay so a stored verdict replays with the profile it used.
 */
import type { IndicatorType } from './types.ts'

/** When an action rule applies: every given condition must hold. */
export interface ActionCondition {
  minScore?: number
  maxScore?: number
  /** At least one of these flags is set. */
  flagsAny?: string[]
  /** None of these flags is set. */
  flagsNone?: string[]
  types?: IndicatorType[]
}

/** One recommended action and when it applies. */
export interface ActionRule { action: string, when: ActionCondition }

/** A scoring profile. Weights are in score points for a fresh, exact, full-confidence listing. */
export interface ScoringProfile {
  version: string
  /** Score with no evidence: the neutral threshold of the contract. */
  baseline: number
  /** Weight per source subgroup; `default` for subgroups not named. */
  weights: Record<string, number>
  /** Evidence that matched through a parent (domain), a containing block, or the announcing AS counts less. */
  attenuation: {
    parentDomain: number
    /** Containing-block factors by minimum prefix length, most specific first: [[24, 0.7], [16, 0.5], [0, 0.35]]. */
    supernetV4: Array<[number, number]>
    supernetV6: Array<[number, number]>
    asn: number
    /** Applied to malicious evidence about a single address that sits on shared CDN edge infrastructure. */
    sharedInfrastructure: number
  }
  /** Decay never takes a listing below this fraction of its weight. */
  decayFloor: number
  /** Largest absolute sum per signal group and direction. */
  groupCaps: Record<string, number>
  /** Evidence mass (sum of absolute contributions before caps) from which each band starts: sparse, limited, moderate, strong, full. */
  saturation: [number, number, number, number, number]
  /** |score - baseline| from which medium, strong and very_strong start. */
  strength: [number, number, number]
  /** Malicious categories, most severe first. */
  categoryPrecedence: string[]
  /**
   * Lexical thresholds. The DGA signal fires (flag dga_like, evidence shown) from dgaThreshold, the model's confidence
   * at which 1% of unusual real names fire; it adds weight x (confidence - dgaStrong) / (1 - dgaStrong), so it lifts
   * a name above neutral only when the model is very confident (docs/SCORING.md, "DGA signal").
   */
  lexical: { dgaThreshold: number, dgaStrong: number }
  actions: ActionRule[]
  /**
   * Trust rules (null: none, as in the profiles before 2026-12). `contextSubgroups`: malicious subgroups that describe
   * context, not wrongdoing, and count only beside other malicious evidence. `singleSourceUndatedCap`: the largest
   * positive sum, in score points, of malicious evidence from at most one independent source with no date.
   */
  trust: { contextSubgroups: string[], singleSourceUndatedCap: number } | null
  /**
   * Known-good and infrastructure context (null: none, as in the profiles before 2026-12; docs/SCORING.md,
   * "Popularity" and "Cloud addresses").
   *
   * - `popularity`: a rank list entry for the name (or `www.` + name) weighs `weights.popularity x rank factor`, with
   *   rank factor = 1 - log10(rank) / log10(maxRank) (1 at rank 1, 0.5 at rank 1,000 of a million, 0 at maxRank),
   *   `unrankedFactor` for an entry without a rank. A deeper subdomain of a ranked name inherits `subdomainFactor`
   *   of it (never enough to reach `allow`) and no damping. Malicious evidence from fewer than two independent sources
   *   about a ranked name is multiplied by 1 - damping x rank factor.
   * - `cloud`: on an address in a cloud provider's range, listings age with a half-life of at most `halfLifeDays`,
   *   and undated or inherited (block, AS) listings from fewer than two independent sources count `factor` of their
   *   weight. The cloud signal itself adds nothing.
   * - Context signals of weight 0 (cloud, protocol assignments) are shown with contribution 0.
   */
  knownGood: {
    popularity: { maxRank: number, unrankedFactor: number, subdomainFactor: number, damping: number }
    cloud: { halfLifeDays: number, factor: number }
  } | null
}

const kActions: ActionRule[] = [
  { action: 'block', when: { minScore: 80, flagsNone: ['shared_infrastructure', 'non_routable'] } },
  { action: 'block_hostname_not_ip', when: { minScore: 65, flagsAny: ['shared_infrastructure'] } },
  { action: 'alert', when: { minScore: 65, maxScore: 79 } },
  { action: 'investigate', when: { minScore: 51, maxScore: 79 } },
  { action: 'hunt_related_indicators', when: { minScore: 65, flagsAny: ['multi_source', 'inherited'] } },
  { action: 'investigate_internal_host', when: { flagsAny: ['non_routable'] } },
  { action: 'verify_data_quality', when: { flagsAny: ['documentation'] } },
  { action: 'monitor', when: { minScore: 40, maxScore: 50 } },
  { action: 'allow', when: { maxScore: 39, flagsNone: ['non_routable', 'documentation'] } }
]

/**
 * 2026-12: special-purpose AS numbers carry `non_routable` too; for an AS number that asks to check the data, not
 * to look for an internal host.
 */
const kActions202612: ActionRule[] = kActions.flatMap((rule): ActionRule[] => {
  if (rule.action === 'investigate_internal_host') return [{ action: rule.action, when: { ...rule.when, types: ['ip', 'ip_block'] } }]
  if (rule.action === 'verify_data_quality') return [rule, { action: 'verify_data_quality', when: { flagsAny: ['non_routable'], flagsNone: ['documentation'], types: ['asn'] } }]
  return [rule]
})

const kPrecedence = ['botnet_c2', 'malware', 'malware_distribution', 'ransomware', 'phishing', 'hijacked_network',
  'exploit', 'scanner', 'bruteforce', 'spam', 'lookalike', 'suspicious', 'disposable_email']

/** Profile of 2026-06: the first release (no shared-infrastructure damping, flatter feed weights). */
const kProfile202606: ScoringProfile = {
  version: '2026-06',
  baseline: 50,
  weights: {
    default: 30,
    phishing: 40,
    allowlist: 35,
    disposable_email: 12,
    non_routable: 45,
    documentation: 12,
    protocol_assignment: 0,
    cdn: 10,
    cloud: 0,
    public_resolver: 40,
    dga: 10,
    homograph: 20,
    lookalike: 20,
    private_suffix_hosting: 4,
    popularity: 0
  },
  attenuation: {
    parentDomain: 0.6,
    supernetV4: [[24, 0.7], [16, 0.5], [0, 0.35]],
    supernetV6: [[48, 0.7], [32, 0.5], [0, 0.35]],
    asn: 0.35,
    sharedInfrastructure: 1
  },
  decayFloor: 0.05,
  groupCaps: { threat_feed: 50, reputation: 45, network: 50, lexical: 25 },
  saturation: [1, 15, 30, 50, 75],
  strength: [10, 25, 40],
  categoryPrecedence: kPrecedence,
  lexical: { dgaThreshold: 0.821, dgaStrong: 0.885 },
  actions: kActions,
  trust: null,
  knownGood: null
}

/** Profile of 2026-11 (default): subgroup weights tuned per feed kind, and CDN edge addresses damped. */
const kProfile202611: ScoringProfile = {
  ...kProfile202606,
  version: '2026-11',
  weights: {
    ...kProfile202606.weights,
    default: 30,
    botnet_c2: 38,
    malware_distribution: 34,
    malware_hash: 45,
    hijacked_network: 32,
    scanner: 18,
    spam: 15,
    disposable_email: 8,
    cdn: 15
  },
  attenuation: { ...kProfile202606.attenuation, sharedInfrastructure: 0.4 },
  groupCaps: { threat_feed: 48, reputation: 45, network: 50, lexical: 25 }
}

/**
 * Profile of 2026-12 (default): context is not evidence, and single-source undated evidence is capped below `block`
 * (docs/SCORING.md). The cap is 19 points: one undated list entry tops out at 69 (`alert`, `investigate`), below the
 * 70 that no known-good name may reach (a legitimate name wrongly on one list stays under it); a second independent
 * source or a dated listing removes the cap. Popularity, cloud context and zero-weight context signals: `knownGood`.
 */
const kProfile202612: ScoringProfile = {
  ...kProfile202611,
  version: '2026-12',
  weights: { ...kProfile202611.weights, popularity: 30 },
  groupCaps: { ...kProfile202611.groupCaps, popularity: 30 },
  actions: kActions202612,
  // Feed manifests name botnet C2 listings' category `botnet` (the subgroup is botnet_c2): it leads too.
  categoryPrecedence: ['botnet_c2', 'botnet', ...kPrecedence.slice(1)],
  trust: { contextSubgroups: ['private_suffix_hosting', 'disposable_email', 'homograph'], singleSourceUndatedCap: 19 },
  knownGood: {
    popularity: { maxRank: 1_000_000, unrankedFactor: 0.5, subdomainFactor: 0.3, damping: 0.6 },
    cloud: { halfLifeDays: 7, factor: 0.5 }
  }
}

/** Every profile, newest first. */
export const PROFILES: readonly ScoringProfile[] = [kProfile202612, kProfile202611, kProfile202606]
/** The default profile (newest). */
export const DEFAULT_PROFILE: ScoringProfile = kProfile202612

/** Profile for a requested `scoring_version`; `known: false` when the default was used instead. */
export function selectProfile (version: string | undefined | null): { profile: ScoringProfile, known: boolean } {
  if (version === undefined || version === null || version === '') return { profile: DEFAULT_PROFILE, known: true }
  const p = PROFILES.find((x) => x.version === version)
  return p === undefined ? { profile: DEFAULT_PROFILE, known: false } : { profile: p, known: true }
}
