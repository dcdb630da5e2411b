/**
 * Verdicts on real built-in data and the sample feeds: what each kind of evidence does to the score, that the
 * explanation adds up to the score exactly, determinism, profile selection, and robustness on hostile input.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { domainToASCII } from 'node:url'
import { describe, test } from 'node:test'
import { mixedCorpus } from '../../bench/corpus.ts'
import { assess, DEFAULT_PROFILE, kTopSignals, normalize, PROFILES, render, score, selectProfile, Snapshot, type ScoreParams, type ScoringProfile, type Verdict } from '../../src/engine/index.ts'
import { compileSnapshot, loadManifest } from '../../src/intel/index.ts'
import { kParseOptions } from '../../src/engine/score.ts'
import { actions, contribution, kSampleManifest, sampleSnapshot, sampleSnapshotData, signal } from '../helper.ts'

const kRequire = createRequire(import.meta.url)
const kPhishing = kRequire('eth-phishing-detect/src/config.json') as { blacklist: string[], whitelist: string[] }
const kDisposable = new Set(kRequire('disposable-email-domains') as string[])
const kProfile202611 = selectProfile('2026-11').profile
const kEicar = '275a021bbfb6489e54d471899f7db9d1663fc695ec2fe2a2c4538aabf651fd0f'

function params (profile: ScoringProfile = DEFAULT_PROFILE): ScoreParams {
  return { profile, signalDetails: 'all', evidenceDetails: 'full' }
}

/** The verdict of a valid indicator (fails the test when it is not valid). */
function verdict (snap: Snapshot, value: string, type?: string, profile?: ScoringProfile): Verdict {
  const r = score(value, type, params(profile), snap)
  assert.ok(r.ok, `${value} is valid: ${JSON.stringify(r)}`)
  return r.verdict
}

function round2 (x: number): number {
  return Math.round(x * 100) / 100
}

/** A domain on eth-phishing-detect's blocklist that is on neither its allowlist nor the disposable list. */
const kListedDomain = kPhishing.blacklist.find((d) => {
  const whitelisted = new Set(kPhishing.whitelist)
  return d.split('.').length === 2 && !whitelisted.has(d) && !kDisposable.has(d) && normalize(d, 'domain').ok
}) as string
/** A domain on eth-phishing-detect's allowlist and not on its blocklist. */
const kAllowedDomain = kPhishing.whitelist.find((d) => !kPhishing.blacklist.includes(d) && normalize(d, 'domain').ok) as string

let fresh: Promise<Snapshot> | undefined
let stale: Promise<Snapshot> | undefined
/** The sample feeds compiled as of 2025-10-26, two days after their newest listings. */
async function freshSnapshot (): Promise<Snapshot> {
  fresh ??= (async () => new Snapshot(await compileSnapshot({ feeds: await loadManifest(kSampleManifest), now: new Date('2025-10-26T00:00:00Z') })))()
  return await fresh
}
/** The same feeds compiled as of 2026-11-21, about 13 months later. */
async function staleSnapshot (): Promise<Snapshot> {
  stale ??= (async () => new Snapshot(await compileSnapshot({ feeds: await loadManifest(kSampleManifest), now: new Date('2026-11-21T00:00:00Z') })))()
  return await stale
}

describe('network evidence', () => {
  for (const [value, range] of [['10.0.0.1', 'private'], ['127.0.0.1', 'loopback'], ['169.254.1.1', 'linkLocal'], ['fe80::1', 'linkLocal']]) {
    test(`special-purpose address ${value} is safe and flagged non_routable and ${range}`, async () => {
      const v = verdict(await sampleSnapshot(), value as string)
      assert.ok(v.risk.score < 50, `score ${v.risk.score}`)
      assert.ok(v.flags.includes('non_routable'), v.flags.join())
      assert.ok(v.flags.includes(range as string), v.flags.join())
      const s = signal(v, 'special-purpose:supernet')
      assert.equal(s.direction, 'safe')
      assert.equal(s.evidence?.label, range)
      assert.ok(actions(v).includes('investigate_internal_host'))
      assert.ok(!actions(v).includes('block'))
    })
  }

  test('public resolver addresses carry their AS, organisation and country, and are safe shared infrastructure', async () => {
    const snap = await sampleSnapshot()
    for (const [value, asn, org] of [['8.8.8.8', 15169, 'Google'], ['1.1.1.1', 13335, 'Cloudflare'], ['9.9.9.9', 19281, 'Quad9'], ['2001:4860:4860::8888', 15169, 'Google']] as const) {
      const v = verdict(snap, value)
      assert.equal(v.threat_context.asn, asn, value)
      assert.match(String(v.threat_context.as_org), new RegExp(org))
      assert.match(String(v.threat_context.country), /^[A-Z]{2}$/)
      assert.ok(v.flags.includes('public_resolver') && v.flags.includes('shared_infrastructure'), `${value}: ${v.flags.join()}`)
      assert.equal(signal(v, 'public-resolvers:exact').direction, 'safe')
      assert.ok(v.risk.score < 50)
    }
  })

  // The sample feeds list documentation addresses: profile 2026-11 weighs them as it would a routable host.
  test('under profile 2026-11 the multi-feed sample address scores malicious while its listings are fresh', async () => {
    const v = verdict(await freshSnapshot(), '198.51.100.23', undefined, kProfile202611)
    assert.ok(v.risk.score >= 80, `score ${v.risk.score}`)
    assert.ok(v.flags.includes('multi_source'))
    assert.ok(!v.flags.includes('stale'))
    assert.deepEqual(v.threat_context.listed_by, ['sample_feodo', 'sample_firehol', 'sample_threatfox'])
    assert.deepEqual(v.threat_context.threat_labels, ['Emotet'])
    assert.equal(v.threat_context.last_seen, '2025-10-24')
    assert.equal(signal(v, 'sample_feodo:exact').evidence?.age_days, 2)
  })

  test('a year later the same listings decay to the data timestamp: lower score and flagged stale', async () => {
    const freshV = verdict(await freshSnapshot(), '198.51.100.23', undefined, kProfile202611)
    const staleV = verdict(await staleSnapshot(), '198.51.100.23', undefined, kProfile202611)
    assert.ok(staleV.risk.score < freshV.risk.score, `${staleV.risk.score} < ${freshV.risk.score}`)
    assert.ok(staleV.flags.includes('stale'))
    const feodo = signal(staleV, 'sample_feodo:exact')
    assert.equal(feodo.evidence?.age_days, 393)
    assert.equal(feodo.evidence?.decay, DEFAULT_PROFILE.decayFloor, 'decay stops at the profile floor')
    assert.ok(contribution(feodo) < contribution(signal(freshV, 'sample_feodo:exact')))
    // A feed without dates (FireHOL) and a feed without a half-life (MalwareBazaar) do not decay.
    assert.equal(signal(staleV, 'sample_firehol:exact').evidence?.decay, 1)
    assert.equal(signal(verdict(await staleSnapshot(), kEicar), 'sample_malwarebazaar:exact').evidence?.decay, 1)
  })

  test('an address inside the sample DROP block inherits it as a supernet signal', async () => {
    const v = verdict(await freshSnapshot(), '203.0.113.77')
    const s = signal(v, 'sample_spamhaus_drop:supernet')
    assert.equal(s.direction, 'malicious')
    assert.equal(s.evidence?.matched, '203.0.113.0/24')
    assert.equal(s.evidence?.label, 'SBLX0001')
    assert.equal(s.evidence?.attenuation, 0.7)
    assert.ok(v.flags.includes('inherited'))
    // An address listed itself keeps its exact listing beside the block's.
    const listed = verdict(await freshSnapshot(), '203.0.113.9')
    signal(listed, 'sample_feodo:exact')
    signal(listed, 'sample_spamhaus_drop:supernet')
  })

  test('a block takes its network\'s AS and country only when one AS (one country) holds all of it', async () => {
    const snap = await sampleSnapshot()
    const inside = verdict(snap, '1.0.0.0/24', 'ip_block')
    assert.equal(inside.threat_context.asn, 13335)
    assert.ok(inside.signals.some((s) => s.signal_id === 'cdn-asns:asn'))
    assert.equal(verdict(snap, '8.8.8.0/24').threat_context.asn, 15169)
    // 1.0.0.0/8 starts in Cloudflare's 1.0.0.0/24 but spans thousands of other networks.
    for (const value of ['1.0.0.0/8', '8.0.0.0/8', '0.0.0.0/0', '::/0']) {
      const v = verdict(snap, value)
      assert.equal(v.threat_context.asn, undefined, value)
      assert.equal(v.threat_context.registry_range, undefined, value)
      assert.ok(!v.signals.some((s) => s.signal_id.endsWith(':asn')), `${value}: ${v.signals.map((s) => s.signal_id).join()}`)
      assert.ok(!v.flags.includes('cdn') && !v.flags.includes('cloud_hosting'), `${value}: ${v.flags.join()}`)
    }
    // An address keeps its network's facts as before.
    assert.equal(verdict(snap, '1.0.0.1').threat_context.asn, 13335)
  })

  test('an ip_block query sees the listing of the same block exactly and of a containing block as supernet', async () => {
    const snap = await freshSnapshot()
    const exact = verdict(snap, '203.0.113.0/24', 'ip_block')
    assert.equal(signal(exact, 'sample_spamhaus_drop:exact').evidence?.attenuation, 1)
    const inner = verdict(snap, '203.0.113.128/25', 'ip_block')
    signal(inner, 'sample_spamhaus_drop:supernet')
    assert.equal(inner.threat_context.prefix_length, 25)
  })

  test('under profile 2026-11 a listed AS number scores malicious', async () => {
    const v = verdict(await sampleSnapshot(), 'AS64511', undefined, kProfile202611)
    assert.ok(v.risk.score >= 65, `score ${v.risk.score}`)
    assert.equal(v.risk.category, 'hijacked_network')
    assert.equal(signal(v, 'sample_spamhaus_asndrop:exact').direction, 'malicious')
    assert.ok(actions(v).includes('alert'))
  })

  test('a listing of a documentation AS number never lifts it to hijacked_network', async () => {
    // The sample ASN-DROP lists AS64511, which RFC 5398 reserves for documentation (test/engine/known-good.test.ts
    // holds a listed, routable AS number).
    const v = verdict(await sampleSnapshot(), 'AS64511')
    assert.ok(v.risk.score <= 50, `score ${v.risk.score}`)
    assert.notEqual(v.risk.category, 'hijacked_network')
    assert.ok(v.flags.includes('documentation'), v.flags.join())
    assert.equal(contribution(signal(v, 'sample_spamhaus_asndrop:exact')), 0)
    assert.deepEqual(actions(v), ['verify_data_quality'])
  })

  test('an address on a CDN edge is shared infrastructure and its malicious listings are damped', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'ioc-verdict-cdn-'))
    t.after(async () => await rm(dir, { recursive: true, force: true }))
    await writeFile(join(dir, 'probe.txt'), '104.16.0.1\n5.6.7.8\n')
    await writeFile(join(dir, 'manifest.json'), JSON.stringify({
      // Confidence 0.6: 18 points, under the single-source cap, so the damping shows unclipped.
      feeds: [{ name: 'probe', format: 'plain', path: 'probe.txt', direction: 'malicious', group: 'threat_feed', subgroup: 'attack_source', category: 'abuse', confidence: 0.6, half_life_days: 0 }]
    }))
    const snap = new Snapshot(await compileSnapshot({ feeds: await loadManifest(join(dir, 'manifest.json')) }))

    const cdn = verdict(snap, '104.16.0.1')
    const plain = verdict(snap, '5.6.7.8')
    assert.ok(cdn.flags.includes('shared_infrastructure') && cdn.flags.includes('cdn'), cdn.flags.join())
    assert.ok(!plain.flags.includes('shared_infrastructure'), plain.flags.join())
    assert.equal(cdn.threat_context.asn, 13335)
    const factor = DEFAULT_PROFILE.attenuation.sharedInfrastructure
    assert.ok(factor < 1)
    const damped = signal(cdn, 'probe:exact')
    const full = signal(plain, 'probe:exact')
    assert.equal(damped.evidence?.shared_infrastructure_factor, factor)
    assert.equal(full.evidence?.shared_infrastructure_factor, 1)
    assert.equal(contribution(damped), round2(contribution(full) * factor))
    assert.ok(!actions(cdn).includes('block'))

    // The 2026-06 profile did not damp shared infrastructure: the same listing weighs the same on both addresses.
    const old = PROFILES.find((p) => p.version === '2026-06') as ScoringProfile
    assert.equal(contribution(signal(verdict(snap, '104.16.0.1', undefined, old), 'probe:exact')), contribution(signal(verdict(snap, '5.6.7.8', undefined, old), 'probe:exact')))
  })
})

describe('sources and categories', () => {
  test('two feeds of one origin count as one source: the stronger listing adds, the other shows 0', async () => {
    // cegelecinfo.fr is on both shipped URLhaus-filter lists (one upstream list in two formats, "origin" in the manifest).
    const v = verdict(await sampleSnapshot(), 'cegelecinfo.fr')
    const both = ['urlhaus_filter:exact', 'urlhaus_filter_hosts:exact'].map((id) => signal(v, id))
    const counted = both.filter((s) => contribution(s) > 0)
    const shown = both.filter((s) => contribution(s) === 0)
    assert.equal(counted.length, 1)
    assert.equal(shown.length, 1)
    assert.equal(shown[0]?.evidence?.same_origin_as, counted[0]?.evidence?.source)
    assert.equal(counted[0]?.evidence?.independent_sources, 1)
    assert.ok(!v.flags.includes('multi_source'), v.flags.join())
    assert.equal(v.risk.score, 69, 'one undated source: alert, not block')
    assert.ok(!actions(v).includes('block'), actions(v).join())
  })

  test('two feeds of different origins still corroborate each other', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'ioc-verdict-origin-'))
    t.after(async () => await rm(dir, { recursive: true, force: true }))
    await writeFile(join(dir, 'a.txt'), 'probe-origin.com\n')
    await writeFile(join(dir, 'b.txt'), 'probe-origin.com\n')
    const feed = (name: string, path: string, origin?: string): object => ({
      name, format: 'plain', path, direction: 'malicious', group: 'threat_feed', subgroup: 'malware_distribution', category: 'malware', confidence: 0.8, half_life_days: 0, ...(origin === undefined ? {} : { origin })
    })
    const snapOf = async (feeds: object[]): Promise<Snapshot> => {
      await writeFile(join(dir, 'manifest.json'), JSON.stringify({ feeds }))
      return new Snapshot(await compileSnapshot({ feeds: await loadManifest(join(dir, 'manifest.json')) }))
    }
    const apart = verdict(await snapOf([feed('a', 'a.txt'), feed('b', 'b.txt')]), 'probe-origin.com')
    assert.ok(apart.flags.includes('multi_source'))
    assert.ok(apart.risk.score >= 80, `score ${apart.risk.score}`)
    const together = verdict(await snapOf([feed('a', 'a.txt', 'up'), feed('b', 'b.txt', 'up')]), 'probe-origin.com')
    assert.ok(!together.flags.includes('multi_source'))
    assert.equal(together.risk.score, 69)
    // A feed named as another's origin is that origin too.
    const named = verdict(await snapOf([feed('a', 'a.txt'), feed('b', 'b.txt', 'a')]), 'probe-origin.com')
    assert.equal(named.risk.score, 69)
    const pair = ['a:exact', 'b:exact'].map((id) => signal(named, id))
    assert.equal(pair.find((s) => contribution(s) === 0)?.evidence?.same_origin_as, pair.find((s) => contribution(s) > 0)?.evidence?.source)
    // Three of one origin, the strongest last: the other two show 0 and both name it.
    await writeFile(join(dir, 'c.txt'), 'probe-origin.com\n')
    const three = verdict(await snapOf([feed('a', 'a.txt', 'up'), feed('b', 'b.txt', 'up'), { ...feed('c', 'c.txt', 'up'), confidence: 0.95 }]), 'probe-origin.com')
    assert.ok(contribution(signal(three, 'c:exact')) > 0)
    for (const id of ['a:exact', 'b:exact']) {
      assert.equal(contribution(signal(three, id)), 0, id)
      assert.equal(signal(three, id).evidence?.same_origin_as, 'c', id)
    }
    assert.equal(three.risk.score, 69)
  })

  test('a botnet C2 listing names the category over a weaker phishing or spam listing', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'ioc-verdict-category-'))
    t.after(async () => await rm(dir, { recursive: true, force: true }))
    await writeFile(join(dir, 'c2.txt'), '45.137.21.10\n')
    await writeFile(join(dir, 'phish.txt'), '45.137.21.10\n')
    const feed = (name: string, path: string, subgroup: string, category: string, confidence: number): object =>
      ({ name, format: 'plain', path, direction: 'malicious', group: 'threat_feed', subgroup, category, confidence, half_life_days: 0 })
    await writeFile(join(dir, 'manifest.json'), JSON.stringify({
      feeds: [feed('c2', 'c2.txt', 'botnet_c2', 'botnet', 0.5), feed('phish', 'phish.txt', 'phishing', 'phishing', 0.9)]
    }))
    const snap = new Snapshot(await compileSnapshot({ feeds: await loadManifest(join(dir, 'manifest.json')) }))
    const v = verdict(snap, '45.137.21.10')
    assert.ok(contribution(signal(v, 'phish:exact')) > contribution(signal(v, 'c2:exact')), 'the phishing listing weighs more')
    assert.equal(v.risk.category, 'botnet')
    assert.equal(verdict(snap, '45.137.21.10', undefined, kProfile202611).risk.category, 'phishing', 'profiles before 2026-12 lacked botnet')
  })
})

describe('domain evidence', () => {
  test('under profile 2026-11 a domain on the eth-phishing-detect blocklist scores malicious with an exact signal', async () => {
    assert.ok(kListedDomain !== undefined)
    const v = verdict(await sampleSnapshot(), kListedDomain, 'domain', kProfile202611)
    assert.ok(v.risk.score >= 80, `${kListedDomain} scores ${v.risk.score}`)
    const s = signal(v, 'eth-phishing-detect:exact')
    assert.equal(s.direction, 'malicious')
    assert.equal(s.signal_subgroup, 'phishing')
    assert.equal(v.risk.category, 'phishing')
    assert.ok(actions(v).includes('block'))
  })

  test('one undated list entry is capped below block: malicious, alert, with the cap shown in its evidence', async () => {
    const v = verdict(await sampleSnapshot(), kListedDomain, 'domain')
    const cap = DEFAULT_PROFILE.trust?.singleSourceUndatedCap as number
    assert.equal(v.risk.score, 50 + cap)
    assert.equal(v.risk.category, 'phishing')
    assert.ok(!actions(v).includes('block'), actions(v).join())
    assert.ok(actions(v).includes('alert'))
    const s = signal(v, 'eth-phishing-detect:exact')
    assert.equal(s.evidence?.independent_sources, 1)
    assert.ok((s.evidence?.corroboration_scale as number) < 1)
    assert.equal(round2(v.signals.reduce((t, x) => t + contribution(x), 0)), v.risk.score - 50)
  })

  test('a subdomain of a listed domain inherits the listing through parent_domain with a lower contribution', async () => {
    const snap = await sampleSnapshot()
    const sub = `login-ioc-test.${kListedDomain}`
    const v = verdict(snap, sub, 'domain')
    const s = signal(v, 'eth-phishing-detect:parent_domain')
    assert.equal(s.evidence?.matched, kListedDomain)
    assert.equal(s.evidence?.attenuation, DEFAULT_PROFILE.attenuation.parentDomain)
    assert.ok(v.flags.includes('inherited'))
    const exact = contribution(signal(verdict(snap, kListedDomain, 'domain'), 'eth-phishing-detect:exact'))
    // Under 2026-12 one undated source is capped, so both can sit at the cap; the attenuation shows without it.
    assert.ok(contribution(s) > 0 && contribution(s) <= exact, `${contribution(s)} <= ${exact}`)
    const oldSub = contribution(signal(verdict(snap, sub, 'domain', kProfile202611), 'eth-phishing-detect:parent_domain'))
    const oldExact = contribution(signal(verdict(snap, kListedDomain, 'domain', kProfile202611), 'eth-phishing-detect:exact'))
    assert.equal(oldSub, round2(oldExact * DEFAULT_PROFILE.attenuation.parentDomain))
    assert.ok(v.risk.score > 50)
  })

  test('a domain on the eth-phishing-detect allowlist is not blocked', async () => {
    assert.ok(kAllowedDomain !== undefined)
    const v = verdict(await sampleSnapshot(), kAllowedDomain, 'domain')
    assert.ok(v.risk.score < 50, `${kAllowedDomain} scores ${v.risk.score}`)
    assert.ok(!actions(v).includes('block'))
    assert.ok(v.flags.includes('allowlisted'))
    assert.equal(signal(v, 'eth-phishing-allowlist:exact').direction, 'safe')
  })

  test('a disposable e-mail domain is context: flagged, shown, and neutral when nothing else lists it', async () => {
    const v = verdict(await sampleSnapshot(), 'mailinator.com')
    assert.ok(v.flags.includes('disposable_email'))
    const s = signal(v, 'disposable-email-domains:exact')
    assert.equal(s.evidence?.context_only, true)
    assert.equal(contribution(s), 0)
    assert.equal(v.risk.score, 50)
  })

  test('hosting under a shared private suffix is context and never lifts a host above neutral', async () => {
    const snap = await sampleSnapshot()
    for (const name of ['someone.github.io', 'docs-project.readthedocs.io', 'storage.googleapis.com']) {
      const v = verdict(snap, name)
      assert.ok(v.flags.includes('private_suffix_hosting'), `${name}: ${v.flags.join()}`)
      assert.equal(contribution(signal(v, 'lexical:private_suffix_hosting')), 0, name)
      assert.ok(v.risk.score <= 50, `${name} scores ${v.risk.score}`)
      assert.ok(!actions(v).includes('investigate'), name)
    }
    const old = verdict(snap, 'someone.github.io', undefined, kProfile202611)
    assert.ok(old.risk.score > 50, 'profile 2026-11 keeps its behaviour')
  })

  test('a context signal strengthens real evidence, with its contribution shown', async () => {
    const snap = await sampleSnapshot()
    const listed = kPhishing.blacklist.find((d) => d.endsWith('.github.io') && !kPhishing.whitelist.includes(d) && normalize(d, 'domain').ok)
    assert.ok(listed !== undefined, 'the phishing list holds a github.io host')
    const v = verdict(snap, listed)
    const ctx = signal(v, 'lexical:private_suffix_hosting')
    assert.equal(ctx.evidence?.context_only, true)
    assert.ok(contribution(ctx) > 0)
    assert.ok(v.risk.score > 50)
  })

  test('listings of a documentation address never take it above neutral', async () => {
    const v = verdict(await freshSnapshot(), '198.51.100.23')
    assert.ok(v.risk.score <= 50, `score ${v.risk.score}`)
    assert.ok(v.flags.includes('documentation'))
    assert.equal(contribution(signal(v, 'sample_firehol:exact')), 0)
    assert.ok(!actions(v).includes('block'))
    assert.ok(actions(v).includes('verify_data_quality'))
  })

  for (const [value, label] of [['198.18.0.1', 'benchmarking'], ['240.0.0.1', 'reservedFutureUse']] as const) {
    test(`IANA special-purpose address ${value} is non-routable (${label}), not plain unknown`, async () => {
      const v = verdict(await sampleSnapshot(), value)
      assert.ok(v.flags.includes('non_routable'), v.flags.join())
      assert.equal(signal(v, 'special-purpose:supernet').evidence?.label, label)
      assert.ok(v.risk.score < 50)
    })
  }

  test('under profile 2026-11 a disposable e-mail domain is flagged with a weak malicious signal', async () => {
    const v = verdict(await sampleSnapshot(), 'mailinator.com', undefined, kProfile202611)
    assert.ok(v.flags.includes('disposable_email'))
    const s = signal(v, 'disposable-email-domains:exact')
    assert.ok(contribution(s) > 0 && contribution(s) < 20)
  })

  test('lexical signals fire for a DGA-like name and a punycode homograph, not for well-known names', async () => {
    const snap = await sampleSnapshot()
    const dga = verdict(snap, 'qx7zk2vb9wrt4m.com')
    assert.ok(dga.flags.includes('dga_like'))
    assert.equal(signal(dga, 'lexical:dga').signal_group, 'lexical')
    const ev = signal(dga, 'lexical:dga').evidence ?? {}
    assert.ok(typeof ev.model_confidence === 'number' && ev.model_confidence >= DEFAULT_PROFILE.lexical.dgaThreshold, String(ev.model_confidence))
    assert.equal(ev.length, 14)
    assert.ok(dga.risk.score > 50, 'a very confident DGA name lifts the score above neutral')
    for (const name of ['dhbw-karlsruhe.de', 'stackoverflow.com']) assert.ok(!verdict(snap, name).flags.includes('dga_like'), name)
    const homo = verdict(snap, 'xn--80ak6aa92e.com', undefined, kProfile202611)
    assert.ok(homo.flags.includes('homograph'))
    assert.equal(signal(homo, 'lexical:homograph').direction, 'malicious')
    assert.equal(homo.threat_context.unicode, 'аррӏе.com')
    for (const name of ['google.com', 'wikipedia.org', 'www.wikipedia.org', 'mail.google.com']) {
      const v = verdict(snap, name)
      assert.deepEqual(v.signals.filter((s) => s.signal_group === 'lexical').map((s) => s.signal_id), [], name)
      assert.ok(!v.flags.some((f) => ['dga_like', 'homograph', 'lookalike'].includes(f)), `${name}: ${v.flags.join()}`)
    }
  })

  test('a punycode homograph of a guarded or a popular domain is a lookalike at distance 0; an ordinary IDN is not', async () => {
    const snap = await sampleSnapshot()
    const cases: Array<[string, string]> = [['metam\u0430sk.io', 'metamask.io'], ['g\u043e\u043egle.com', 'google.com'], ['login.\u0430pple.com', 'apple.com']]
    for (const [unicode, target] of cases) {
      const name = domainToASCII(unicode)
      const v = verdict(snap, name)
      const look = signal(v, 'lexical:lookalike')
      assert.equal(look.evidence?.target, target, name)
      assert.equal(look.evidence?.distance, 0, name)
      assert.ok(contribution(look) > 0, name)
      assert.ok(v.flags.includes('homograph') && v.flags.includes('lookalike'), `${name}: ${v.flags.join()}`)
      assert.equal(v.risk.score, 69, `${name}: capped as one undated source, alert not block`)
      assert.ok(actions(v).includes('alert') && !actions(v).includes('block'), `${name}: ${actions(v).join()}`)
      assert.ok(!actions(v).includes('allow'), name)
    }
    // An IDN that imitates nothing is shown as it reads, without a lexical signal.
    const idn = verdict(snap, domainToASCII('b\u00fccher.de'))
    assert.equal(idn.threat_context.unicode, 'b\u00fccher.de')
    assert.deepEqual(idn.signals.filter((s) => s.signal_group === 'lexical'), [])
    assert.equal(verdict(snap, 'google.com').threat_context.unicode, undefined)
    // The genuine names, an IDN that imitates nothing, and a confusable letter in a subdomain only.
    for (const name of ['metamask.io', 'google.com', domainToASCII('b\u00fccher.de'), domainToASCII('\u0430pple.example.org')]) {
      assert.ok(!verdict(snap, name).flags.includes('lookalike'), name)
    }
    // Profiles before 2026-12 compared only guarded domains within the edit tolerance, above distance 0.
    assert.ok(!verdict(snap, domainToASCII('g\u043e\u043egle.com'), undefined, kProfile202611).flags.includes('lookalike'))
  })

  test('a name whose look-alike digits read as letters give a popular domain is a lookalike; other digits are not', async () => {
    const snap = await sampleSnapshot()
    const cases: Array<[string, string, number]> = [['goog1e.com', 'google.com', 1], ['micros0ft.com', 'microsoft.com', 1], ['faceb00k.com', 'facebook.com', 2], ['m1crosoft.com', 'microsoft.com', 1], ['g00gle.co.uk', 'google.co.uk', 2]]
    for (const [name, target, distance] of cases) {
      const v = verdict(snap, name)
      const look = signal(v, 'lexical:lookalike')
      assert.deepEqual([look.evidence?.target, look.evidence?.distance], [target, distance], name)
      assert.equal(v.risk.score, 69, name)
      assert.ok(actions(v).includes('alert') && !actions(v).includes('block'), name)
    }
    for (const name of ['1e100.net', '163.com', '1und1.de', '360.cn', 'l0gin.microsoftonline.com', 'google.com']) {
      assert.ok(!verdict(snap, name).flags.includes('lookalike'), name)
    }
    assert.ok(!verdict(snap, 'goog1e.com', undefined, kProfile202611).flags.includes('lookalike'), 'profiles before 2026-12')
  })

  test('a name within the tolerance of a guarded domain is a lookalike', async () => {
    const v = verdict(await sampleSnapshot(), 'metamsk.io')
    assert.ok(v.flags.includes('lookalike'))
    assert.equal(signal(v, 'lexical:lookalike').evidence?.target, 'metamask.io')
    assert.ok(!verdict(await sampleSnapshot(), 'metamask.io').flags.includes('lookalike'))
  })
})

describe('file hashes', () => {
  test('the EICAR test file hash is listed with its label', async () => {
    const v = verdict(await sampleSnapshot(), kEicar.toUpperCase())
    assert.equal(v.indicator.normalized, kEicar)
    assert.deepEqual(v.threat_context.threat_labels, ['EICAR'])
    assert.equal(signal(v, 'sample_malwarebazaar:exact').evidence?.label, 'EICAR')
    assert.ok(v.risk.score >= 80)
    assert.equal(v.risk.category, 'malware')
  })

  test('an unknown hash has no signals and the neutral score', async () => {
    const v = verdict(await sampleSnapshot(), 'a'.repeat(64))
    assert.deepEqual(v.signals, [])
    assert.equal(v.risk.score, DEFAULT_PROFILE.baseline)
    assert.equal(v.risk.category, 'unknown')
    assert.equal(v.risk.evidence_saturation, 'none')
  })
})

describe('scoring profiles', () => {
  test('each profile gives different verdicts for some indicator than the one before it', async () => {
    assert.equal(PROFILES.length, 3)
    const [c, a, b] = PROFILES as [ScoringProfile, ScoringProfile, ScoringProfile]
    assert.notEqual(a.version, b.version)
    const snap = await sampleSnapshot()
    const items = [kEicar, '198.51.100.23', 'mailinator.com', 'AS64511', kListedDomain]
    const differ = items.filter((value) => verdict(snap, value, undefined, a).risk.score !== verdict(snap, value, undefined, b).risk.score)
    assert.ok(differ.includes(kEicar), `differing: ${differ.join()}`)
    const newer = items.filter((value) => verdict(snap, value, undefined, c).risk.score !== verdict(snap, value, undefined, a).risk.score)
    assert.ok(newer.includes(kListedDomain) && newer.includes('mailinator.com'), `differing: ${newer.join()}`)
  })

  test('selectProfile picks a known version, defaults when none is asked, and falls back on an unknown one', () => {
    assert.deepEqual(selectProfile('2026-06'), { profile: PROFILES[2], known: true })
    assert.deepEqual(selectProfile('2026-11'), { profile: PROFILES[1], known: true })
    assert.deepEqual(selectProfile(undefined), { profile: DEFAULT_PROFILE, known: true })
    assert.deepEqual(selectProfile(''), { profile: DEFAULT_PROFILE, known: true })
    assert.deepEqual(selectProfile('1999-01'), { profile: DEFAULT_PROFILE, known: false })
    assert.equal(DEFAULT_PROFILE, PROFILES[0])
  })
})

describe('explanation', () => {
  test('the score is the baseline plus the sum of the signal contributions, for every corpus indicator', async () => {
    const snap = await sampleSnapshot()
    assert.equal(DEFAULT_PROFILE.baseline, 50)
    let explained = 0
    for (const it of mixedCorpus(4000, 3)) {
      const n = normalize(it.value, it.type)
      if (!n.ok) continue
      const v = render(assess(n.indicator, DEFAULT_PROFILE, snap), it.value, n.indicator.warnings, { signalDetails: 'all', evidenceDetails: 'full' })
      const sum = round2(v.signals.reduce((acc, s) => acc + contribution(s), 0))
      const expected = Math.max(0, Math.min(100, Math.round(50 + sum)))
      assert.equal(v.risk.score, expected, `${it.value}: ${JSON.stringify(v.signals.map((s) => s.evidence?.contribution))}`)
      const groups = round2(Object.values(v.scores.signal_groups).reduce((acc, g) => acc + g.contribution, 0))
      const subgroups = round2(Object.values(v.scores.signal_subgroups).reduce((acc, g) => acc + g.contribution, 0))
      assert.equal(groups, sum, `${it.value} groups`)
      assert.equal(subgroups, sum, `${it.value} subgroups`)
      assert.equal(Object.values(v.scores.signal_groups).reduce((acc, g) => acc + g.signal_count, 0), v.signals.length)
      assert.equal(v.signal_count, v.signals.length)
      if (v.signals.length > 0) explained++
    }
    assert.ok(explained > 600, `${explained} corpus indicators had signals`)
  })

  test('signals come strongest first and top keeps the three strongest with summary evidence', async () => {
    const snap = await sampleSnapshot()
    const full = verdict(snap, '1.1.1.1')
    const abs = full.signals.map((s) => Math.abs(contribution(s)))
    assert.deepEqual(abs, [...abs].sort((x, y) => y - x))
    const top = score('1.1.1.1', 'ip', { profile: DEFAULT_PROFILE, signalDetails: 'top', evidenceDetails: 'summary' }, snap)
    assert.ok(top.ok)
    assert.equal(top.verdict.signals.length, Math.min(kTopSignals, full.signals.length))
    assert.deepEqual(top.verdict.signals.map((s) => s.signal_id), full.signals.slice(0, kTopSignals).map((s) => s.signal_id))
    for (const s of top.verdict.signals) {
      for (const k of Object.keys(s.evidence ?? {})) assert.ok(['source', 'match', 'matched', 'label', 'contribution'].includes(k), k)
    }
    assert.deepEqual(top.verdict.scores, full.scores, 'scores always cover every signal')
    const none = score('1.1.1.1', 'ip', { profile: DEFAULT_PROFILE, signalDetails: 'none', evidenceDetails: 'none' }, snap)
    assert.ok(none.ok)
    assert.deepEqual(none.verdict.signals, [])
    assert.equal(none.verdict.signal_count, 0)
    assert.equal(none.verdict.risk.score, full.risk.score)
  })

  test('the verdict echoes the value as sent and carries the normalization warnings', async () => {
    const v = verdict(await sampleSnapshot(), '198.51.100[.]23')
    assert.equal(v.indicator.value, '198.51.100[.]23')
    assert.equal(v.indicator.normalized, '198.51.100.23')
    assert.equal(v.indicator.type, 'ip')
    assert.ok(v.warnings.length >= 2, v.warnings.join('; '))
  })
})

describe('determinism', () => {
  test('the same input, snapshot and profile give byte-identical JSON on every run', async () => {
    const snap = await sampleSnapshot()
    const items = mixedCorpus(3000, 5)
    const run = (): string[] => items.map((it) => JSON.stringify(score(it.value, it.type, params(), snap)))
    assert.deepEqual(run(), run())
  })

  test('two Snapshot instances of the same data give byte-identical verdicts', async () => {
    const data = await sampleSnapshotData()
    const a = new Snapshot(data)
    const b = new Snapshot({ header: JSON.parse(JSON.stringify(data.header)), buffer: data.buffer })
    for (const it of mixedCorpus(3000, 9)) {
      assert.equal(JSON.stringify(score(it.value, it.type, params(), a)), JSON.stringify(score(it.value, it.type, params(), b)), it.value)
    }
  })

  test('scoring one indicator never changes the verdict of another (no state leaks between calls)', async () => {
    const snap = await sampleSnapshot()
    const items = mixedCorpus(60, 13)
    const alone = items.map((it) => JSON.stringify(score(it.value, it.type, params(), new Snapshot(snap.data))))
    const inSequence = items.map((it) => JSON.stringify(score(it.value, it.type, params(), snap)))
    assert.deepEqual(inSequence, alone)
  })

  test('the parts unlisted assessments share are deeply frozen, so no caller can change another verdict through them', async () => {
    const snap = await sampleSnapshot()
    const ind = (value: string, type: string): Parameters<typeof assess>[0] => {
      const n = normalize(value, type)
      assert.ok(n.ok)
      return n.indicator
    }
    const deeplyFrozen = (v: unknown): boolean => typeof v !== 'object' || v === null || (Object.isFrozen(v) && Object.values(v).every(deeplyFrozen))
    const a = assess(ind('unlisted-one.example', 'domain'), DEFAULT_PROFILE, snap)
    const b = assess(ind('unlisted-two.example', 'domain'), DEFAULT_PROFILE, snap)
    assert.equal(a.signals.length, 0, 'control: the names are on no list')
    for (const part of ['risk', 'scores', 'recommended_actions', 'signals', 'flags'] as const) {
      assert.equal(a[part], b[part], `${part} is shared`)
      assert.ok(deeplyFrozen(a[part]), `${part} is deeply frozen`)
    }
    // A listed indicator's parts are its own.
    const listed = assess(ind('198.51.100.23', 'ip'), DEFAULT_PROFILE, snap)
    assert.ok(listed.signals.length > 0)
    assert.equal(Object.isFrozen(listed.risk), false)
  })
})

describe('hostile input', () => {
  /** Values that probe the parsers: random text, odd JavaScript values, and mutated real indicators. */
  function hostileValues (n: number): Array<[unknown, unknown]> {
    let state = 0x9e3779b9
    const rand = (): number => {
      state ^= state << 13; state >>>= 0
      state ^= state >>> 17
      state ^= state << 5; state >>>= 0
      return state / 4294967296
    }
    const pick = <T>(list: readonly T[]): T => list[Math.floor(rand() * list.length)] as T
    const alphabet = '0123456789abcdefxX.:/[]()%@-_ \t\n\u0000\u00a0\u3002\uff0e\u200b\u202eАаоxn--ßİ*?#"\'\\<>'
    const odd: unknown[] = [null, undefined, 0, -0, NaN, Infinity, 1e21, 13335, true, {}, [], ['1.1.1.1'], { value: '1.1.1.1' },
      { toString: () => { throw new Error('boom') } }, Symbol('x'), 10n, () => '1.1.1.1', new Date(0), '\ud800', '\udfff.com',
      'x'.repeat(10_000), `${'a'.repeat(63)}.`.repeat(5) + 'com', '::ffff:1.2.3.4', '[::1]', '[1.2.3.4]', '0x7f.1', '1.2.3', '01.2.3.4',
      'hxxp://', 'hxxps://[.]', 'xn--.com', 'xn--zz.com', 'AS4294967296', 'AS-1', 'as', '1.2.3.4/33', '::/129', '0.0.0.0/0', '::/0',
      '1.1.1.1/24', '__proto__', 'constructor', '.', '..', 'a..b', '-a.com', 'a-.com', '*.example.com', 'exa mple.com']
    const types: unknown[] = [undefined, undefined, 'ip', 'domain', 'ip_block', 'file_hash_sha256', 'asn', 'IP', 'url', '', null, 7, {}, '__proto__']
    const real = mixedCorpus(200, 17).map((it) => it.value)
    const out: Array<[unknown, unknown]> = []
    for (let i = 0; i < n; i++) {
      const kind = rand()
      let value: unknown
      if (kind < 0.25) value = pick(odd)
      else if (kind < 0.55) {
        let s = ''
        const len = Math.floor(rand() * 40)
        for (let j = 0; j < len; j++) s += alphabet[Math.floor(rand() * alphabet.length)]
        value = s
      } else if (kind < 0.7) {
        let s = ''
        const len = Math.floor(rand() * 30)
        for (let j = 0; j < len; j++) s += String.fromCharCode(Math.floor(rand() * 0x10000))
        value = s
      } else {
        const s = pick(real)
        const at = Math.floor(rand() * (s.length + 1))
        value = rand() < 0.5 ? s.slice(0, at) + pick([...alphabet]) + s.slice(at) : s.slice(0, at) + s.slice(at + 1)
      }
      out.push([value, pick(types)])
    }
    return out
  }

  test('score() answers 2,000 random and odd values with a verdict or errors, never a throw', async () => {
    const snap = await sampleSnapshot()
    let ok = 0
    let invalid = 0
    for (const [value, type] of hostileValues(2000)) {
      for (const p of [params(), { profile: DEFAULT_PROFILE, signalDetails: 'top', evidenceDetails: 'summary' } as const]) {
        let r: ReturnType<typeof score>
        try {
          r = score(value, type, p, snap)
        } catch (err) {
          assert.fail(`score(${String(typeof value === 'symbol' ? 'symbol' : JSON.stringify(value))}, ${String(type)}) threw ${String(err)}`)
        }
        if (r.ok) {
          ok++
          assert.ok(Number.isInteger(r.verdict.risk.score) && r.verdict.risk.score >= 0 && r.verdict.risk.score <= 100)
          assert.equal(typeof JSON.stringify(r.verdict), 'string')
        } else {
          invalid++
          assert.ok(r.errors.length > 0 && r.errors.every((e) => typeof e === 'string' && e !== ''))
        }
      }
    }
    assert.ok(ok > 0 && invalid > 0, `ok ${ok}, invalid ${invalid}`)
  })
})

test('tldts with its checks skipped answers as with them for every name normalization lets through', () => {
  const parse = (kRequire('tldts') as typeof import('tldts')).parse
  const names = [
    '_dmarc.example.com', 'xn--bcher-kva.de', 'bücher.de', 'a.b.c.d.e.co.uk', 'x.blogspot.com', 'foo.ck', 'www.ck',
    'a-b.example', 'localhost.localdomain', '123.example.com', 'example.com.', 'EXAMPLE.COM', 'hxxp://evil[.]com/x',
    'a_b.c_d.example.org', 'xn--80ak6aa92e.com', 'sub.domain.github.io', 'x.y.z.s3.amazonaws.com', 'co.uk', 'k12.ak.us',
    'a.' + 'b'.repeat(63) + '.com', '1.2.3.4.example', 'xn--p1ai', 'test.xn--p1ai', 'deep.' + 'x.'.repeat(60) + 'net'
  ]
  for (const it of mixedCorpus(20_000, 77)) if (it.type === 'domain' || it.type === undefined) names.push(it.value)
  let checked = 0
  for (const value of names) {
    const n = normalize(value, 'domain')
    if (!n.ok) continue
    checked++
    const name = n.indicator.normalized
    // isIp is left null when detection is off; everything the scorer reads must agree.
    const { isIp: _skipped, ...fast } = parse(name, kParseOptions)
    const { isIp, ...full } = parse(name, { allowPrivateDomains: true })
    assert.equal(isIp, false, name)
    assert.deepEqual(fast, full, name)
  }
  assert.ok(checked > 5000, `checked ${checked}`)
})
