/**
 * One retro-hunt pass (docs/OPERATIONS.md "Retro-hunt"), run on its own thread (workers/retro-hunt.ts) or by the CLI:
 *
 * 1. diff: the listing keys the new snapshot raises over the old one (engine/snapshot/diff.ts);
 * 2. scan: each tenant's history blocks of the lookback window, oldest first; a block whose requests all predate the
 *    window is never read (its date range), and within a part only the items' types and normalized forms are decoded
 *    and matched against the raised keys (history/retro-scan.ts); the record fragments of a part are decoded only
 *    when one of its items matched;
 * 3. per tenant, each matched indicator (aggregated over its queries: first and last date, count, keys, action
 *    sources, and the verdict of its latest query, `then`) is scored again now with the tenant's allowlist; when the
 *    score rose by at least 10 points or crossed the alert mark (65), one hit per raised key covering it is recorded,
 *    once per (tenant, indicator, cause).
 *
 * Memory is bounded: the raised set by kMaxRaisedKeys, one tenant's matched indicators at a time by kMaxCandidates
 * (more are counted as dropped and logged), one block's parts at a time.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import {
  AllowMatcher, allowlistedAssessment, assess, DEFAULT_PROFILE, normalize, Snapshot, type AllowKind, type AllowRule, type Assessment, type IndicatorType,
  type NormalizedIndicator, type SnapshotData
} from '../engine/index.ts'
import { raisedKeys, type RaisedKeys } from '../engine/snapshot/diff.ts'
import { PartView } from '../history/block.ts'
import { RetroMatcher, type RetroCandidate, type RetroMatch } from '../history/retro-scan.ts'
import type { NewRetroHit, RetroHit, Store } from '../store/index.ts'

/** Matched indicators of one tenant kept at once. */
export const kMaxCandidates = 100_000
/** Key ids and action sources listed per hit. */
const kMaxListed = 20
/** Score a rise must reach, and the alert mark a score may cross (docs/API.md "Verdicts"). */
export const kMinRise = 10
export const kAlertMark = 65
/** Work between pauses, ms, when the pass is paced (dutyPercent < 100). */
const kSliceMs = 20

/** The signal kind the scorer names for each retro match (evidence.ts: `<source>:<match>`). */
const kSignalMatch: Record<RetroMatch, string> = { exact: 'exact', parent_domain: 'parent_domain', containing_network: 'supernet', announcing_as: 'asn' }

/** What a pass needs. */
export interface RetroPassInput {
  /** The snapshot replaced, or null: every malicious listing of `next` counts as raised (a pass run by hand). */
  prev: SnapshotData | null
  next: SnapshotData
  /** Start of the lookback window, epoch ms. */
  sinceMs: number
  /** Share of the time the pass works when it runs beside verdicts (100: without pauses). */
  dutyPercent?: number
}

/** A recorded hit and its tenant. */
export type TenantHit = RetroHit & { tenant: string }

/** What a pass did. */
export interface RetroPassResult {
  raised: number
  /** Raised keys beyond the bound, not matched. */
  raisedDropped: number
  tenants: number
  blocks: number
  items: number
  /** Indicators matched (before re-scoring). */
  matched: number
  /** Matched indicators beyond kMaxCandidates, not re-scored. */
  matchedDropped: number
  hits: TenantHit[]
  /** Whether a stop cut the pass before it had scanned every tenant (its hits so far are recorded). */
  cut?: boolean
  /** Whether the pass ran on a thread at the lowest CPU priority (workers/retro-hunt.ts; absent on the caller's thread). */
  lowPriority?: boolean
  ms: number
  /** Of which computing the raised keys, and scoring and recording the matched indicators. */
  diffMs: number
  rescoreMs: number
  /** CPU time of the pass's process (its thread's, when it is the only one working), ms. */
  cpuMs: number
}

interface Aggregate {
  type: IndicatorType
  normalized: string
  causes: Map<number, RetroCandidate>
  firstTs: number
  lastTs: number
  count: number
  keyIds: Set<string>
  actionSources: Set<string>
  /** The verdict of the latest query. */
  thenTs: number
  thenScore: number
  thenCategory: string
}

/** Stops a pass between parts: true once the pass should end (close or destroy). */
export type StopSignal = () => boolean

/** Runs one pass over `store`; the hits it recorded are in the result. */
export async function runRetroPass (store: Store, input: RetroPassInput, stopped: StopSignal = () => false): Promise<RetroPassResult> {
  const t0 = performance.now()
  const cpu0 = process.cpuUsage()
  const next = new Snapshot(input.next)
  const prev = input.prev === null ? null : new Snapshot(input.prev)
  const raised = raisedKeys(prev, next)
  const result: RetroPassResult = { raised: raised.size, raisedDropped: raised.dropped, tenants: 0, blocks: 0, items: 0, matched: 0, matchedDropped: 0, hits: [], ms: 0, diffMs: performance.now() - t0, rescoreMs: 0, cpuMs: 0 }
  if (raised.size === 0) {
    result.ms = performance.now() - t0
    return result
  }
  const pace = pacer(input.dutyPercent ?? 100)
  const matcher = new RetroMatcher(raised, next)
  const cache = new AssessmentCache()
  const db = store.retroHunt
  for (const tenant of await db.tenantsSince(input.sinceMs)) {
    if (stopped()) break
    result.tenants++
    const found = new Map<string, Aggregate>()
    for (const block of await db.blocksSince(tenant, input.sinceMs)) {
      if (stopped()) break
      result.blocks++
      const requests = new Map<number, { ts: number, apikey: string } | null>()
      for (const p of await db.blockParts(block.id)) {
        result.items += p.n
        await scanPart(p.part, p.req, requests, store, input.sinceMs, matcher, found, result)
        await pace()
      }
    }
    if (stopped()) break
    result.matched += found.size
    const r0 = performance.now()
    await rescore(store, tenant, found, next, raised, cache, result.hits)
    result.rescoreMs += performance.now() - r0
  }
  result.cut = stopped()
  result.ms = performance.now() - t0
  const cpu = process.cpuUsage(cpu0)
  result.cpuMs = (cpu.user + cpu.system) / 1000
  return result
}

const kNoCandidates: RetroCandidate[] = []

async function scanPart (part: Buffer, req: number, requests: Map<number, { ts: number, apikey: string } | null>, store: Store, sinceMs: number,
  matcher: RetroMatcher, found: Map<string, Aggregate>, result: RetroPassResult): Promise<void> {
  const view = new PartView(part)
  const cands: RetroCandidate[] = []
  let matchedItems: number[] | null = null
  let perItem: RetroCandidate[][] | null = null
  const text = view.text
  for (let i = 0; i < view.count; i++) {
    const from = cands.length
    if (matcher.candidatesIn(view.type(i), text, view.normalizedStart(i), view.normalizedEnd(i), cands) === 0) continue
    matchedItems ??= []
    perItem ??= []
    matchedItems.push(i)
    perItem.push(cands.slice(from))
  }
  if (matchedItems === null || perItem === null) return
  let r = requests.get(req)
  if (r === undefined) {
    r = await store.retroHunt.request(req)
    requests.set(req, r)
  }
  if (r === null || r.ts < sinceMs) return
  for (let j = 0; j < matchedItems.length; j++) {
    const i = matchedItems[j] as number
    const type = view.type(i) as IndicatorType
    const normalized = view.normalized(i) as string
    const key = `${type}\n${normalized}`
    let agg = found.get(key)
    if (agg === undefined) {
      if (found.size >= kMaxCandidates) {
        result.matchedDropped++
        continue
      }
      agg = { type, normalized, causes: new Map(), firstTs: r.ts, lastTs: r.ts, count: 0, keyIds: new Set(), actionSources: new Set(), thenTs: -1, thenScore: 0, thenCategory: 'unknown' }
      found.set(key, agg)
    }
    for (const c of perItem[j] ?? kNoCandidates) if (!agg.causes.has(c.key)) agg.causes.set(c.key, c)
    agg.count++
    if (r.ts < agg.firstTs) agg.firstTs = r.ts
    if (r.ts > agg.lastTs) agg.lastTs = r.ts
    if (agg.keyIds.size < kMaxListed) agg.keyIds.add(r.apikey)
    const item = itemOf(view.fragment(i))
    if (item.actionSource !== null && agg.actionSources.size < kMaxListed) agg.actionSources.add(item.actionSource)
    if (r.ts >= agg.thenTs && item.score !== null) {
      agg.thenTs = r.ts
      agg.thenScore = item.score
      agg.thenCategory = item.category
    }
  }
}

/** The verdict and action source of a stored record fragment (history/record.ts). */
function itemOf (fragment: string | null): { score: number | null, category: string, actionSource: string | null } {
  if (fragment === null) return { score: null, category: 'unknown', actionSource: null }
  try {
    const o = JSON.parse(`{${fragment}}`) as { risk?: { score?: unknown, category?: unknown } | null, action_source?: unknown }
    const score = typeof o.risk?.score === 'number' ? o.risk.score : null
    return { score, category: typeof o.risk?.category === 'string' ? o.risk.category : 'unknown', actionSource: typeof o.action_source === 'string' ? o.action_source : null }
  } catch {
    return { score: null, category: 'unknown', actionSource: null }
  }
}

/** A tenant's allowlist as the scorer applies it now (expired entries left out). */
async function allowMatcher (store: Store, tenant: string): Promise<AllowMatcher | null> {
  const rules: AllowRule[] = []
  const now = new Date().toISOString()
  let cursor: string | null = null
  do {
    const page = await store.listAllowEntries(tenant, 500, cursor, now)
    for (const e of page.entries) {
      rules.push({ id: e.id, kind: e.kind as AllowKind, value: e.value, reason: e.reason, created_by: e.createdBy, created_at: e.createdAt, expires_at: e.expiresAt })
    }
    cursor = page.nextCursor
  } while (cursor !== null)
  return rules.length === 0 ? null : new AllowMatcher(rules)
}

/**
 * Assessments of one pass by indicator, shared by tenants (the allowlist is applied after): a listing queried by many
 * tenants is scored once. Bounded: emptied when full.
 */
class AssessmentCache {
  readonly #map = new Map<string, Assessment>()

  get (agg: Aggregate, ind: NormalizedIndicator, snap: Snapshot): Assessment {
    const key = `${agg.type}\n${agg.normalized}`
    let a = this.#map.get(key)
    if (a === undefined) {
      a = assess(ind, DEFAULT_PROFILE, snap)
      if (this.#map.size >= kMaxCandidates) this.#map.clear()
      this.#map.set(key, a)
    }
    return a
  }
}

/** Scores each matched indicator now and records the hits of those that rose. */
async function rescore (store: Store, tenant: string, found: Map<string, Aggregate>, snap: Snapshot, raised: RaisedKeys, cache: AssessmentCache, out: TenantHit[]): Promise<void> {
  if (found.size === 0) return
  const allow = await allowMatcher(store, tenant)
  const pending: NewRetroHit[] = []
  for (const agg of found.values()) {
    if (agg.thenTs < 0) continue
    const n = normalize(agg.normalized, agg.type)
    if (!n.ok) continue
    let a = cache.get(agg, n.indicator, snap)
    const rule = allow?.match(n.indicator) ?? null
    if (rule !== null) a = allowlistedAssessment(n.indicator, rule, a)
    const now = a.risk.score
    if (!(now - agg.thenScore >= kMinRise || (agg.thenScore < kAlertMark && now >= kAlertMark))) continue
    for (const c of agg.causes.values()) {
      const cause = raised.cause(c.key)
      pending.push({
        tenant,
        causeKey: `${cause.kind}|${cause.source}|${c.match}|${c.listed}|${cause.category}|${cause.confidence}`,
        indicator: { type: agg.type, value: agg.normalized },
        queried: {
          first_at: new Date(agg.firstTs).toISOString(),
          last_at: new Date(agg.lastTs).toISOString(),
          count: agg.count,
          key_ids: [...agg.keyIds].sort(),
          action_sources: [...agg.actionSources].sort()
        },
        then: { score: agg.thenScore, category: agg.thenCategory },
        now: { score: now, category: a.risk.category, strength: a.risk.strength, recommended_actions: a.recommended_actions },
        cause: { signal_id: `${cause.source}:${kSignalMatch[c.match]}`, source: cause.source, match: c.match, listed_value: c.listed }
      })
    }
  }
  for (const hit of await store.retroHunt.addHits(pending)) out.push({ ...hit, tenant })
}

/** Pauses so that the pass works `duty` percent of the time (nothing at 100). */
function pacer (duty: number): () => Promise<void> {
  if (duty >= 100) return async () => {}
  let start = performance.now()
  return async () => {
    const worked = performance.now() - start
    if (worked < kSliceMs) return
    await sleep(Math.ceil(worked * (100 - duty) / Math.max(1, duty)))
    start = performance.now()
  }
}
