/**
 * Known-good and infrastructure knowledge under profile 2026-12: popularity ranks, cloud networks, IANA
 * special-purpose addresses and AS numbers, public resolvers. Verdicts come from exported engine functions on a
 * snapshot of the built-in data plus small probe feeds written here.
 */
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { DEFAULT_PROFILE, score, selectProfile, Snapshot, type ScoringProfile, type ThreatSignal, type Verdict } from '../../src/engine/index.ts'
import { compileSnapshot, loadManifest } from '../../src/intel/index.ts'
import { actions, contribution, sampleSnapshot, signal } from '../helper.ts'

const kRequire = createRequire(import.meta.url)
const kRoot = join(import.meta.dirname, '..', '..')
const kProfile202611 = selectProfile('2026-11').profile
const kKnownGood = DEFAULT_PROFILE.knownGood as NonNullable<ScoringProfile['knownGood']>
const kNow = new Date('2026-11-20T00:00:00Z')

function verdict (snap: Snapshot, value: string, profile: ScoringProfile = DEFAULT_PROFILE): Verdict {
  const r = score(value, undefined, { profile, signalDetails: 'all', evidenceDetails: 'full' }, snap)
  assert.ok(r.ok, `${value} is valid`)
  return r.verdict
}

function round2 (x: number): number {
  return Math.round(x * 100) / 100
}

/** The rank factor of profile 2026-12 for a rank. */
function rankFactor (rank: number): number {
  return 1 - Math.log10(rank) / Math.log10(kKnownGood.popularity.maxRank)
}

let dir: string
let snap: Snapshot
const feed = (name: string, format: string, path: string, direction: string, group: string, subgroup: string, confidence: number, halfLife = 0): Record<string, unknown> =>
  ({ name, format, path, direction, group, subgroup, category: subgroup, confidence, half_life_days: halfLife })

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ioc-verdict-known-good-'))
  // Probe feeds: real names and addresses as test inputs, listed only in this temporary snapshot.
  await writeFile(join(dir, 'rank.csv'), '1,google.com\n1,blogspot.com\n2,github.io\n1000,thousand-probe.com\n1000000,tail-probe.com\n')
  await writeFile(join(dir, 'phish.txt'), 'google.com\nsites.google.com\nevil.weebly.com\n3.120.0.1\n3.120.0.2\n5.6.7.8\nAS6805\nAS64512\n')
  await writeFile(join(dir, 'malware.txt'), 'sites.google.com\n3.120.0.2\n')
  await writeFile(join(dir, 'c2.csv'), [
    '"first_seen_utc","dst_ip","dst_port","c2_status","last_online","malware"',
    '"2026-11-01 00:00:00","3.120.0.3","443","offline","2026-11-06","Probe"',
    '"2026-11-01 00:00:00","5.6.7.9","443","offline","2026-11-06","Probe"',
    '"2026-11-19 00:00:00","3.120.0.4","443","online","2026-11-20","Probe"',
    ''
  ].join('\n'))
  await writeFile(join(dir, 'manifest.json'), JSON.stringify({
    feeds: [
      feed('probe_rank', 'rank_csv', 'rank.csv', 'safe', 'popularity', 'popularity', 0.9),
      feed('probe_phish', 'plain', 'phish.txt', 'malicious', 'reputation', 'phishing', 0.9),
      feed('probe_malware', 'plain', 'malware.txt', 'malicious', 'threat_feed', 'malware_distribution', 0.8),
      feed('probe_c2', 'feodo_csv', 'c2.csv', 'malicious', 'threat_feed', 'botnet_c2', 0.9, 30)
    ]
  }))
  snap = new Snapshot(await compileSnapshot({ feeds: await loadManifest(join(dir, 'manifest.json')), now: kNow }))
})

after(async () => {
  await rm(dir, { recursive: true, force: true })
})

describe('popularity', () => {
  test('a top site is pulled below neutral by its rank, explained, with action allow', async () => {
    const v = verdict(await sampleSnapshot(), 'google.com')
    const s = signal(v, 'top-sites:exact')
    assert.equal(s.direction, 'safe')
    assert.equal(s.signal_subgroup, 'popularity')
    assert.equal(s.evidence?.rank, 1)
    assert.equal(s.evidence?.rank_factor, 1)
    assert.equal(contribution(s), -round2(30 * 0.8))
    assert.equal(v.risk.score, 26)
    assert.equal(v.risk.category, 'popular')
    assert.ok(v.flags.includes('popular'))
    assert.deepEqual(actions(v), ['allow'])
  })

  test('www.<name> counts as the name itself; a deeper subdomain inherits a little and stays in monitor', async () => {
    const s0 = await sampleSnapshot()
    const www = verdict(s0, 'www.google.com')
    assert.equal(www.risk.score, 26)
    assert.equal(signal(www, 'top-sites:parent_domain').evidence?.popular_name, true)
    const sub = verdict(s0, 'evil.weebly.com') // weebly.com is rank 27 in the list
    const inherited = signal(sub, 'top-sites:parent_domain')
    assert.equal(inherited.evidence?.popular_name, false)
    assert.equal(inherited.evidence?.attenuation, kKnownGood.popularity.subdomainFactor)
    assert.equal(contribution(inherited), -round2(30 * 0.8 * rankFactor(27) * kKnownGood.popularity.subdomainFactor))
    assert.ok(sub.risk.score >= 40 && sub.risk.score < 50, `score ${sub.risk.score}`)
    assert.deepEqual(actions(sub), ['monitor'])
  })

  test('the weight follows the rank on a log scale, and the popularity group is capped', () => {
    const thousand = verdict(snap, 'www.thousand-probe.com')
    assert.equal(signal(thousand, 'probe_rank:parent_domain').evidence?.rank_factor, 0.5)
    assert.equal(contribution(signal(thousand, 'probe_rank:parent_domain')), -round2(30 * 0.9 * 0.5))
    const tail = verdict(snap, 'tail-probe.com')
    assert.equal(contribution(signal(tail, 'probe_rank:exact')), 0, 'rank maxRank weighs nothing')
    assert.equal(tail.risk.score, 50)
    // google.com is rank 1 in two lists: 24 + 27 points, capped at the group's 30.
    const g = verdict(snap, 'google.com')
    const pulled = contribution(signal(g, 'top-sites:exact')) + contribution(signal(g, 'probe_rank:exact'))
    assert.equal(round2(pulled), -DEFAULT_PROFILE.groupCaps.popularity!)
  })

  test('one undated listing of a popular name is damped, shown, and does not alert', () => {
    const v = verdict(snap, 'google.com')
    const listed = signal(v, 'probe_phish:exact')
    assert.equal(listed.evidence?.popularity_factor, round2(1 - kKnownGood.popularity.damping))
    assert.equal(contribution(listed), round2(40 * 0.9 * (1 - kKnownGood.popularity.damping)))
    assert.ok(contribution(listed) > 0)
    assert.ok(v.flags.includes('listed'))
    assert.ok(v.risk.score < 50, `score ${v.risk.score}`)
    assert.ok(!actions(v).includes('alert') && !actions(v).includes('block'))
  })

  test('two independent listings of a popular name are not damped and still alert', () => {
    const v = verdict(snap, 'sites.google.com') // rank 33 in the shipped list
    assert.ok(v.flags.includes('multi_source'))
    for (const id of ['probe_phish:exact', 'probe_malware:exact']) assert.equal(signal(v, id).evidence?.popularity_factor, undefined, id)
    assert.ok(v.risk.score >= 80, `score ${v.risk.score}`)
    assert.ok(contribution(signal(v, 'top-sites:exact')) < 0, 'the popularity is still shown')
  })

  test('a popular registrable domain does not whitewash a listed user subdomain', () => {
    const v = verdict(snap, 'evil.weebly.com')
    const listed = signal(v, 'probe_phish:exact')
    assert.equal(listed.evidence?.popularity_factor, undefined)
    assert.equal(contribution(listed), DEFAULT_PROFILE.trust?.singleSourceUndatedCap, 'the listing counts in full (up to the cap)')
    assert.ok(v.risk.score > 60, `score ${v.risk.score}`)
    assert.ok(actions(v).includes('investigate'))
  })

  test('a site under a private suffix never inherits the popularity of the suffix', () => {
    // blogspot.com and github.io are rank 1 and 2 in the probe list; the Public Suffix List makes each user's site
    // its own registrable domain.
    for (const name of ['evil.blogspot.com', 'someone.github.io']) {
      const v = verdict(snap, name)
      assert.ok(!v.signals.some((s) => s.signal_subgroup === 'popularity'), name)
      assert.ok(v.flags.includes('private_suffix_hosting'), name)
      assert.equal(v.risk.score, 50, name)
    }
  })

  test('profile 2026-11 has no popularity: the same name keeps its old verdict', () => {
    const v = verdict(snap, 'google.com', kProfile202611)
    assert.ok(!v.signals.some((s) => s.signal_subgroup === 'popularity'))
    assert.ok(v.risk.score > 50)
  })
})

describe('cloud networks', () => {
  test('a cloud address alone stays neutral, named as cloud hosting, with a zero contribution', async () => {
    const v = verdict(await sampleSnapshot(), '52.94.236.248')
    const s = signal(v, 'cloud-asns:asn')
    assert.equal(contribution(s), 0)
    assert.equal(v.risk.score, 50)
    assert.equal(v.risk.category, 'cloud_hosting')
    assert.deepEqual(v.flags, ['cloud_hosting'])
    assert.deepEqual(actions(v), ['monitor'])
  })

  test('an undated single listing of a cloud address counts half', () => {
    const cloud = signal(verdict(snap, '3.120.0.1'), 'probe_phish:exact')
    const plain = signal(verdict(snap, '5.6.7.8'), 'probe_phish:exact')
    assert.equal(cloud.evidence?.cloud_factor, kKnownGood.cloud.factor)
    assert.equal(plain.evidence?.cloud_factor, undefined)
    assert.equal(contribution(cloud), round2(40 * 0.9 * kKnownGood.cloud.factor))
    assert.equal(contribution(plain), DEFAULT_PROFILE.trust?.singleSourceUndatedCap)
  })

  test('a dated listing of a cloud address ages with the shorter cloud half-life', () => {
    const cloud = signal(verdict(snap, '3.120.0.3'), 'probe_c2:exact')
    const plain = signal(verdict(snap, '5.6.7.9'), 'probe_c2:exact')
    assert.equal(cloud.evidence?.age_days, 14)
    assert.equal(cloud.evidence?.half_life_days, kKnownGood.cloud.halfLifeDays)
    assert.equal(plain.evidence?.half_life_days, 30)
    assert.equal(cloud.evidence?.decay, 0.25)
    assert.equal(contribution(cloud), round2(38 * 0.9 * 0.25))
    assert.equal(contribution(plain), round2(38 * 0.9 * Math.pow(0.5, 14 / 30)))
  })

  test('a fresh C2 listing of a cloud address still blocks, and two sources are never damped', () => {
    const fresh = verdict(snap, '3.120.0.4')
    assert.equal(signal(fresh, 'probe_c2:exact').evidence?.cloud_factor, undefined)
    assert.ok(fresh.risk.score >= 80 && actions(fresh).includes('block'), `score ${fresh.risk.score}`)
    const two = verdict(snap, '3.120.0.2')
    for (const id of ['probe_phish:exact', 'probe_malware:exact']) assert.equal(signal(two, id).evidence?.cloud_factor, undefined, id)
    assert.ok(two.flags.includes('cloud_hosting') && two.risk.score >= 80)
  })

  test('provider AS numbers are cloud or CDN context, never malicious and never benign by themselves', async () => {
    const s0 = await sampleSnapshot()
    for (const asn of ['AS16509', 'AS8075', 'AS396982', 'AS31898', 'AS36459']) {
      const v = verdict(s0, asn)
      assert.equal(v.risk.score, 50, asn)
      assert.equal(v.risk.category, 'cloud_hosting', asn)
    }
    assert.ok(verdict(s0, 'AS54113').flags.includes('cdn'))
  })
})

describe('IANA special-purpose addresses', () => {
  const ipaddr = kRequire('ipaddr.js') as {
    parse: (s: string) => { kind: () => string, match: (r: [unknown, number]) => boolean }
    parseCIDR: (s: string) => [{ kind: () => string, toString: () => string }, number]
  }
  interface Row { prefix: string, id: string, kind: string }

  test('every registry block gives its own kind of signal on its first address, the most specific block winning', async () => {
    const doc = JSON.parse(await readFile(join(kRoot, 'data', 'reference', 'iana-special-purpose.json'), 'utf8')) as { ipv4: Row[], ipv6: Row[] }
    const rows = [...doc.ipv4, ...doc.ipv6]
    const s0 = await sampleSnapshot()
    for (const row of rows) {
      const [net] = ipaddr.parseCIDR(row.prefix)
      const address = net.toString()
      const addr = ipaddr.parse(address)
      // The most specific block holding this address is the one the verdict must name.
      const holding = rows.filter((r) => { const c = ipaddr.parseCIDR(r.prefix); return c[0].kind() === addr.kind() && addr.match(c) })
      const want = holding.sort((a, b) => Number(b.prefix.split('/')[1]) - Number(a.prefix.split('/')[1]))[0] as Row
      const v = verdict(s0, address)
      const special = v.signals.filter((s) => ['non_routable', 'documentation', 'protocol_assignment'].includes(s.signal_subgroup))
      assert.equal(special.length, 1, `${address}: ${special.map((s) => s.signal_id).join()}`)
      assert.equal(special[0]?.signal_subgroup, want.kind, address)
      assert.equal(special[0]?.evidence?.label, want.id, address)
      if (want.kind === 'non_routable') assert.ok(v.risk.score < 50 && v.flags.includes('non_routable') && v.flags.includes(want.id), address)
      if (want.kind === 'documentation') assert.ok(v.risk.score < 50 && v.flags.includes('documentation'), address)
      if (want.kind === 'protocol_assignment') {
        // Context only: it adds nothing (the sample allowlist lists AS112, which moves the AS112 ranges below 50).
        assert.equal(contribution(special[0] as ThreatSignal), 0, address)
        assert.ok(v.risk.score <= 50, address)
        assert.ok(v.flags.includes(want.id) && !v.flags.includes('non_routable'), address)
      }
    }
  })

  test('a documentation address inside a listed DROP block is never hijacked_network', async () => {
    // 203.0.113.9: on the sample Feodo list and inside the sample Spamhaus DROP block 203.0.113.0/24 (data/feeds).
    const v = verdict(await sampleSnapshot(), '203.0.113.9')
    for (const id of ['sample_feodo:exact', 'sample_spamhaus_drop:supernet']) {
      assert.equal(contribution(signal(v, id)), 0, id)
      assert.equal(signal(v, id).evidence?.context_only, true, id)
    }
    assert.equal(v.risk.score, 50 - DEFAULT_PROFILE.weights.documentation!)
    assert.equal(v.risk.category, 'special_purpose')
    assert.deepEqual(actions(v), ['verify_data_quality'])
  })

  test('NAT64 and anycast assignments are named, not unknown: 64:ff9b::1, 192.0.0.9, 2001:1::1', async () => {
    const s0 = await sampleSnapshot()
    const nat64 = verdict(s0, '64:ff9b::1')
    assert.equal(nat64.signals[0]?.signal_name, 'IANA protocol assignment: rfc6052 (containing network 64:ff9b::/96)')
    assert.equal(verdict(s0, '64:ff9b:1::1').flags.includes('non_routable'), true, 'the local-use /48 is not globally reachable')
    const pcp = verdict(s0, '192.0.0.9')
    assert.deepEqual(pcp.flags, ['pcpAnycast'])
    assert.equal(pcp.risk.score, 50)
    assert.equal(pcp.risk.category, 'special_purpose')
    assert.deepEqual(verdict(s0, '192.0.0.5').flags, ['ipv4ServiceContinuity', 'non_routable'])
  })
})

describe('IANA special-purpose AS numbers', () => {
  const cases: Array<[string, string, string]> = [
    ['AS0', 'non_routable', 'reserved'], ['AS112', 'protocol_assignment', 'as112'], ['AS23456', 'non_routable', 'asTrans'],
    ['AS64496', 'documentation', 'documentation'], ['AS64511', 'documentation', 'documentation'],
    ['AS64512', 'non_routable', 'private'], ['AS65534', 'non_routable', 'private'], ['AS65535', 'non_routable', 'reserved'],
    ['AS65536', 'documentation', 'documentation'], ['AS65551', 'documentation', 'documentation'],
    ['AS65552', 'non_routable', 'reserved'], ['AS131071', 'non_routable', 'reserved'],
    ['AS4200000000', 'non_routable', 'private'], ['AS4294967294', 'non_routable', 'private'], ['AS4294967295', 'non_routable', 'reserved']
  ]
  for (const [asn, kind, id] of cases) {
    test(`${asn} is ${kind} (${id}), flagged and explained`, async () => {
      const v = verdict(await sampleSnapshot(), asn)
      const s = v.signals.find((x) => x.signal_subgroup === kind)
      assert.ok(s !== undefined, v.signals.map((x) => x.signal_id).join())
      assert.equal(s.evidence?.match, 'range')
      assert.equal(s.evidence?.label, id)
      if (kind === 'non_routable') {
        assert.ok(v.risk.score < 50 && v.flags.includes('non_routable') && v.flags.includes(id), v.flags.join())
        assert.deepEqual(actions(v), ['verify_data_quality'])
      } else if (kind === 'documentation') {
        assert.ok(v.risk.score <= 50 && v.flags.includes('documentation'))
        assert.ok(actions(v).includes('verify_data_quality'))
      } else {
        assert.equal(contribution(s), 0)
      }
    })
  }

  test('AS numbers next to the special ranges are ordinary: AS64495, AS131072, AS4199999999', async () => {
    const s0 = await sampleSnapshot()
    for (const asn of ['AS64495', 'AS131072', 'AS4199999999']) {
      assert.ok(!verdict(s0, asn).signals.some((s) => s.evidence?.match === 'range'), asn)
    }
  })

  test('a listing of a private-use AS number stays neutral; a routable one is malicious', () => {
    const priv = verdict(snap, 'AS64512')
    assert.equal(contribution(signal(priv, 'probe_phish:exact')), 0)
    assert.ok(priv.risk.score < 50)
    const routable = verdict(snap, 'AS6805')
    assert.ok(routable.risk.score > 50, `score ${routable.risk.score}`)
  })
})

describe('public resolvers', () => {
  test('resolvers beyond the big four are known: AdGuard, Control D, CleanBrowsing, UltraDNS, Yandex, DNS4EU', async () => {
    const s0 = await sampleSnapshot()
    for (const address of ['94.140.14.14', '2a10:50c0::ad1:ff', '76.76.2.0', '185.228.168.9', '156.154.70.1', '64.6.64.6', '77.88.8.8', '86.54.11.100', '2620:fe::fe:10']) {
      const v = verdict(s0, address)
      assert.equal(signal(v, 'public-resolvers:exact').signal_subgroup, 'public_resolver', address)
      assert.ok(v.risk.score < 50 && v.flags.includes('public_resolver'), address)
    }
  })
})
