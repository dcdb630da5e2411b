/**
 * Tenant allowlists: a compiled matcher over a tenant's entries, and the verdict an allowlisted indicator gets.
 * Pure: the service loads the entries (store), the scoring threads compile and apply them after normalizing.
 *
 * Entry kinds: an indicator (`ip`, `domain`, `file_hash_sha256`, `asn`: the exact normalized value), an `ip_block`
 * (a CIDR block: every address inside it, and every block inside it), and a `domain_suffix` (the domain itself and
 * every name under it). An exact `domain` entry does not cover subdomains; a suffix entry does.
 */
import { normalize } from './normalize/index.ts'
import type { Assessment, ScoredSignal } from './score.ts'
import type { IndicatorType, NormalizedIndicator } from './types.ts'

/** Kinds of allowlist entry. */
export const ALLOW_KINDS = ['ip', 'domain', 'file_hash_sha256', 'asn', 'ip_block', 'domain_suffix'] as const
export type AllowKind = typeof ALLOW_KINDS[number]

/** An entry as the scoring threads receive it (values already normalized by the service). */
export interface AllowRule {
  id: string
  kind: AllowKind
  value: string
  reason: string
  created_by: string
  created_at: string
  expires_at: string | null
}

/** Risk score an allowlisted indicator gets: the bottom of the benign band (docs/API.md). */
export const kAllowlistedScore = 0

/**
 * Normalizes an entry's value with the engine's normalizer: the canonical value, or the reasons it is not one.
 * A `domain_suffix` is a domain, optionally written `*.corp.example`.
 */
export function normalizeAllowValue (kind: AllowKind, value: string): { ok: true, value: string } | { ok: false, errors: string[] } {
  const type: IndicatorType = kind === 'domain_suffix' ? 'domain' : kind
  const raw = kind === 'domain_suffix' && value.startsWith('*.') ? value.slice(2) : value
  const n = normalize(raw, type)
  if (!n.ok) return { ok: false, errors: n.errors }
  if (n.indicator.type !== type) return { ok: false, errors: [`value is not a ${type}`] }
  return { ok: true, value: n.indicator.normalized }
}

interface Block { version: 4 | 6, words: number[], prefix: number, rule: AllowRule }

/** Whether the first `prefix` bits of `a` and `b` agree. */
function samePrefix (a: readonly number[], b: readonly number[], prefix: number): boolean {
  let left = prefix
  for (let i = 0; left > 0; i++, left -= 32) {
    const bits = Math.min(32, left)
    const mask = bits === 32 ? 0xffffffff : (~0 << (32 - bits)) >>> 0
    if ((((a[i] ?? 0) ^ (b[i] ?? 0)) & mask) >>> 0 !== 0) return false
  }
  return true
}

/** A tenant's compiled entries. */
export class AllowMatcher {
  private readonly exact = new Map<string, AllowRule>()
  private readonly suffixes = new Map<string, AllowRule>()
  private readonly blocks: Block[] = []

  constructor (rules: readonly AllowRule[]) {
    for (const r of rules) {
      if (r.kind === 'domain_suffix') {
        if (!this.suffixes.has(r.value)) this.suffixes.set(r.value, r)
      } else if (r.kind === 'ip_block') {
        const n = normalize(r.value, 'ip_block')
        if (n.ok && n.indicator.ip !== undefined && n.indicator.prefix !== undefined) {
          this.blocks.push({ version: n.indicator.ip.version, words: n.indicator.ip.words, prefix: n.indicator.prefix, rule: r })
        }
      } else {
        const k = `${r.kind}|${r.value}`
        if (!this.exact.has(k)) this.exact.set(k, r)
      }
    }
    // Most specific block first, so the evidence names the narrowest entry.
    this.blocks.sort((a, b) => b.prefix - a.prefix)
  }

  /** The entry covering the indicator, or null: exact first, then the longest suffix, then the narrowest block. */
  match (ind: NormalizedIndicator): AllowRule | null {
    const e = this.exact.get(`${ind.type}|${ind.normalized}`)
    if (e !== undefined) return e
    if (ind.type === 'domain' && this.suffixes.size > 0) {
      for (let name = ind.normalized; ;) {
        const s = this.suffixes.get(name)
        if (s !== undefined) return s
        const dot = name.indexOf('.')
        if (dot < 0) break
        name = name.slice(dot + 1)
      }
    }
    if ((ind.type === 'ip' || ind.type === 'ip_block') && ind.ip !== undefined && this.blocks.length > 0) {
      const prefix = ind.type === 'ip' ? (ind.ip.version === 4 ? 32 : 128) : ind.prefix ?? 0
      for (const b of this.blocks) {
        if (b.version === ind.ip.version && b.prefix <= prefix && samePrefix(b.words, ind.ip.words, b.prefix)) return b.rule
      }
    }
    return null
  }
}

/**
 * The assessment of an allowlisted indicator: benign, action allow, one safe `tenant_allowlist` signal whose evidence
 * names the entry (id, kind, value, reason, who, when, expiry) and what the engine alone would have said; the engine's
 * threat context with the entry added as `allowlist`.
 */
export function allowlistedAssessment (ind: NormalizedIndicator, rule: AllowRule, engine: Assessment): Assessment {
  const contribution = kAllowlistedScore - engine.risk.score
  const signal: ScoredSignal = {
    signal_id: 'tenant_allowlist',
    direction: 'safe',
    signal_subgroup: 'allowlist',
    signal_group: 'tenant',
    signal_name: 'Tenant allowlist',
    category: 'allowlisted',
    contribution,
    evidence: {
      source: 'tenant_allowlist',
      match: rule.kind === 'domain_suffix' ? 'parent_domain' : rule.kind === 'ip_block' && ind.type !== 'ip_block' ? 'supernet' : 'exact',
      matched: rule.value,
      label: rule.reason,
      contribution,
      entry_id: rule.id,
      entry_kind: rule.kind,
      reason: rule.reason,
      created_by: rule.created_by,
      created_at: rule.created_at,
      expires_at: rule.expires_at,
      engine_score: engine.risk.score,
      engine_category: engine.risk.category
    }
  }
  const entry = { contribution, signal_count: 1, malicious: 0, safe: 1 }
  return {
    type: ind.type,
    normalized: ind.normalized,
    risk: { score: kAllowlistedScore, strength: 'very_strong', category: 'allowlisted', evidence_saturation: 'full' },
    signals: [signal],
    scores: { signal_groups: { tenant: entry }, signal_subgroups: { allowlist: { ...entry } } },
    // The indicator's context stays what the engine found (network, registration, who lists it): the entry changes
    // the verdict, not the facts an analyst reads beside it.
    threat_context: { ...engine.threat_context, allowlist: { entry_id: rule.id, reason: rule.reason, created_by: rule.created_by, expires_at: rule.expires_at } },
    flags: ['allowlisted'],
    recommended_actions: [{ action: 'allow', order: 1 }]
  }
}
