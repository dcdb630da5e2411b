/**
 * Collection, the first step of an assessment: every listing the snapshot holds about an indicator (exact, parent
 * domain, containing network, announcing AS, special AS range), its lexical findings, and its context facts. Fills
 * a thread's reused ContextFacts and HitSet; nothing here weighs anything.
 */
import { domainToUnicode } from 'node:url'
import { parse as parseDomain } from 'tldts'
import { formatIp } from './normalize/index.ts'
import { networkKey } from './snapshot/format.ts'
import type { KeyPair } from './snapshot/hash.ts'
import type { Snapshot } from './snapshot/snapshot.ts'
import type { SourceMeta } from './snapshot/source.ts'
import type { ScoringProfile } from './profiles.ts'
import { dgaSignal } from './signals/dga.ts'
import { homograph, lookalike } from './signals/lexical.ts'
import type { ContextFacts } from './context.ts'
import { kLexical, type HitSet } from './hits.ts'
import type { NormalizedIndicator } from './types.ts'

/**
 * tldts options for a normalized name. Normalization already guarantees what tldts would check or extract (a
 * lowercase LDH-or-underscore hostname, no empty label, no label over 63 characters or edged with a hyphen, no
 * trailing dot, never an address), so the checks are skipped; test/engine/score.test.ts holds both option sets
 * to the same answers.
 */
export const kParseOptions = { allowPrivateDomains: true, detectIp: false, extractHostname: false, validateHostname: false, mixedInputs: false }

/** Collects the listings, lexical findings and context facts of `ind` into `hits` and `facts` (both cleared first). */
export function collect (ind: NormalizedIndicator, profile: ScoringProfile, snap: Snapshot, facts: ContextFacts, hits: HitSet, pair: KeyPair): void {
  hits.clear()
  facts.reset(ind.type)
  switch (ind.type) {
    case 'ip':
    case 'ip_block':
      collectNetwork(ind, profile, snap, hits, facts, pair)
      break
    case 'domain':
      collectDomain(ind, profile, snap, hits, facts)
      break
    case 'file_hash_sha256':
      hits.addEntries(snap, snap.findSha256(ind.normalized), 'exact', ind.normalized, 1)
      break
    case 'asn': {
      const asn = ind.asn as number
      hits.addEntries(snap, snap.findAsn(asn), 'exact', ind.normalized, 1)
      const special = snap.specialAsn(asn)
      if (special !== null) {
        const { range, source } = special
        const matched = range.first === range.last ? `AS${range.first}` : `AS${range.first}-AS${range.last}`
        hits.add({ src: source, match: 'range', matched, attenuation: 1, firstDay: 0, lastDay: 0, label: range.label, extra: { range_name: range.name } })
      }
      facts.asn = asn
      facts.asnInfo = snap.asnInfo(asn)
      break
    }
  }
}

function supernetFactor (table: Array<[number, number]>, prefix: number): number {
  for (let i = 0; i < table.length; i++) {
    const row = table[i] as [number, number]
    if (prefix >= row[0]) return row[1]
  }
  return 0
}

function collectNetwork (ind: NormalizedIndicator, profile: ScoringProfile, snap: Snapshot, hits: HitSet, facts: ContextFacts, pair: KeyPair): void {
  const ip = ind.ip as NonNullable<NormalizedIndicator['ip']>
  const v4 = ip.version === 4
  const hostBits = v4 ? 32 : 128
  const q = ind.type === 'ip' ? hostBits : ind.prefix as number
  const address = ip.words[0] as number
  for (const p of v4 ? snap.header.v4Prefixes : snap.header.v6Prefixes) {
    if (p > q || (v4 && !snap.mayHaveNet4(p, address))) continue
    const head = snap.find(networkKey(ind, p, pair))
    if (head === 0) continue
    const exact = p === q
    const matched = exact ? ind.normalized : `${formatIp({ version: ip.version, words: blockBound(ip, p, false) })}/${p}`
    hits.addEntries(snap, head, exact ? 'exact' : 'supernet', matched, exact ? 1 : supernetFactor(v4 ? profile.attenuation.supernetV4 : profile.attenuation.supernetV6, p), true)
  }
  facts.ipVersion = ip.version
  if (ind.type === 'ip_block') {
    facts.network = ind.normalized
    facts.prefixLength = q
  }
  // A block is described by its network's AS and country only when one of each holds all of it.
  const last = ind.type === 'ip_block' ? blockBound(ip, q, true) : null
  const run = facts.registry
  if (snap.registryRun(ip.version, ip.words, last, run)) {
    facts.hasRegistry = true
    if (run.listed !== 0) hits.addEntries(snap, run.listed, 'asn', `AS${run.asn}`, profile.attenuation.asn)
  }
  facts.country = snap.countryOf(ip.version, ip.words, last)
}

/** The first (`last` false) or last address of the block of `prefix` bits holding `ip`, as words. */
export function blockBound (ip: NonNullable<NormalizedIndicator['ip']>, prefix: number, last: boolean): number[] {
  return ip.words.map((w, i) => {
    const bits = Math.min(32, Math.max(0, prefix - i * 32))
    const net = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0
    return (last ? (w | ~net) : (w & net)) >>> 0
  })
}

function collectDomain (ind: NormalizedIndicator, profile: ScoringProfile, snap: Snapshot, hits: HitSet, facts: ContextFacts): void {
  const name = ind.normalized
  const parsed = parseDomain(name, kParseOptions)
  let suffixLabels = 1
  if (parsed.publicSuffix !== null) for (let i = parsed.publicSuffix.indexOf('.'); i !== -1; i = parsed.publicSuffix.indexOf('.', i + 1)) suffixLabels++
  let head = snap.findDomain(name)
  if (head !== 0) hits.addEntries(snap, head, 'exact', name, 1)
  let rest = name
  let labels = 1
  for (let i = name.indexOf('.'); i !== -1; i = name.indexOf('.', i + 1)) labels++
  while (labels - 1 > suffixLabels) {
    rest = rest.slice(rest.indexOf('.') + 1)
    labels--
    head = snap.findDomain(rest)
    if (head !== 0) hits.addEntries(snap, head, 'parent_domain', rest, profile.attenuation.parentDomain)
  }

  facts.registrable = parsed.domain
  facts.suffix = parsed.publicSuffix
  facts.subdomain = parsed.subdomain === '' ? null : parsed.subdomain
  facts.privateSuffix = parsed.isPrivate === true

  const label = parsed.domainWithoutSuffix ?? ''
  const { dgaThreshold, dgaStrong } = profile.lexical
  const dga = dgaSignal(label, dgaThreshold)
  // Weak evidence: visible from the threshold, weighted only above dgaStrong (see ScoringProfile.lexical).
  if (dga !== null) hits.add({ src: kLexical.dga, match: 'lexical', matched: label, attenuation: Math.max(0, (dga.model_confidence - dgaStrong) / (1 - dgaStrong)), firstDay: 0, lastDay: 0, label: null, extra: { ...dga } })
  const homo = homograph(name)
  if (homo !== null) {
    facts.unicode = homo.unicode
    hits.add({ src: kLexical.homograph, match: 'lexical', matched: name, attenuation: 1, firstDay: 0, lastDay: 0, label: null, extra: homo })
  } else if (name.includes('xn--')) {
    // Any other internationalized name is shown as it reads too (bücher.de for xn--bcher-kva.de).
    const unicode = domainToUnicode(name)
    if (unicode !== '' && unicode !== name) facts.unicode = unicode
  }
  const registrable = parsed.domain
  if (registrable !== null) {
    const look = lookalikeOf(name, registrable, parsed.publicSuffix, homo, profile, snap)
    if (look !== null) hits.add({ src: kLexical.lookalike, match: 'lexical', matched: registrable, attenuation: 1, firstDay: 0, lastDay: 0, label: null, extra: look })
  }
  if (parsed.isPrivate === true && parsed.subdomain !== null) {
    hits.add({ src: kLexical.privateSuffix, match: 'lexical', matched: parsed.publicSuffix ?? '', attenuation: 1, firstDay: 0, lastDay: 0, label: null, extra: { private_suffix: parsed.publicSuffix } })
  }
}

/**
 * The site a name imitates, or null: a guarded domain within the edit tolerance; with a known-good profile (2026-12)
 * also a guarded or popular domain that a punycode homograph renders as exactly, or that the name spells with
 * look-alike digits.
 */
function lookalikeOf (name: string, registrable: string, suffix: string | null, homo: ReturnType<typeof homograph>, profile: ScoringProfile, snap: Snapshot): { target: string, distance: number } | null {
  const { targets, tolerance } = snap.header.lookalike
  // The Latin skeleton of the registrable domain when its own labels are a homograph (a confusable letter in a
  // subdomain says nothing of which site the name imitates).
  const regHomo = homo === null ? null : registrable === name ? homo : homograph(registrable)
  if (profile.knownGood === null) return lookalike(regHomo !== null ? regHomo.skeleton : registrable, targets, tolerance)
  if (regHomo !== null) return homographTarget(regHomo.skeleton, targets, snap) ?? lookalike(regHomo.skeleton, targets, tolerance)
  return lookalike(registrable, targets, tolerance) ?? digitTarget(registrable, suffix, targets, snap)
}

/**
 * A punycode name whose Latin skeleton is exactly a guarded or a popular registrable domain: the name renders as that
 * site's own and is not it, the strongest lookalike there is (edit distance 0). Null when the skeleton is neither.
 */
function homographTarget (skeleton: string, targets: readonly string[], snap: Snapshot): { target: string, distance: number } | null {
  if (targets.includes(skeleton)) return { target: skeleton, distance: 0 }
  for (let e = snap.findDomain(skeleton); e !== 0; e = snap.entryNext(e)) {
    const src = snap.sources[snap.entrySource(e)] as SourceMeta
    if (src.subgroup === 'popularity' && src.direction === 'safe') return { target: skeleton, distance: 0 }
  }
  return null
}

/**
 * A registrable domain whose name part, with its look-alike digits read as letters (0 o, 1 l or i, 3 e, 5 s), is
 * exactly a guarded or a popular domain (`goog1e.com` -> google.com): a lookalike at the distance of the digits
 * replaced. Null otherwise. A quarter of the names queried hold digits, mostly others than these: one scan without
 * allocation settles those.
 */
function digitTarget (registrable: string, suffix: string | null, targets: readonly string[], snap: Snapshot): { target: string, distance: number } | null {
  if (suffix === null) return null
  const end = registrable.length - suffix.length - 1
  let distance = 0
  let ones = false
  for (let i = 0; i < end; i++) {
    const c = registrable.charCodeAt(i)
    if (c < 48 || c > 57) continue
    if (c !== 48 && c !== 49 && c !== 51 && c !== 53) return null
    distance++
    if (c === 49) ones = true
  }
  if (distance === 0) return null
  const label = registrable.slice(0, end)
  const base = label.replaceAll('0', 'o').replaceAll('3', 'e').replaceAll('5', 's')
  for (const one of ones ? ['l', 'i'] : ['']) {
    const found = homographTarget(`${one === '' ? base : base.replaceAll('1', one)}.${suffix}`, targets, snap)
    if (found !== null) return { target: found.target, distance }
  }
  return null
}
