/**
 * The intel snapshot: what the compiler reads from each built-in source and sample feed, the registry lookups,
 * the disk cache, and sharing one snapshot between threads without copying it.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { after, describe, test, type TestContext } from 'node:test'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { Worker } from 'node:worker_threads'
import { mixedCorpus } from '../../bench/corpus.ts'
import { DEFAULT_PROFILE, normalize, score, Snapshot, type FeedEntry, type ParsedIp, type SnapshotData } from '../../src/engine/index.ts'
import { loadManifest, loadSnapshot } from '../../src/intel/index.ts'
import { decodeSnapshotFile, encodeSnapshotFile } from '../../src/intel/cache.ts'
import { readBuiltinSources, readSpecialPurpose } from '../../src/intel/builtin.ts'
import { listingKey } from '../../src/engine/snapshot/format.ts'
import { view } from '../../src/engine/snapshot/layout.ts'
import { readFeed } from '../../src/intel/manifest.ts'
import { parseIp } from '../../src/engine/normalize/index.ts'
import type { ReaderReply, ReaderRequest } from '../fixtures/snapshot-reader.ts'
import { kSampleManifest, sampleSnapshot, sampleSnapshotData } from '../helper.ts'

const kRoot = fileURLToPath(new URL('../..', import.meta.url))
const kRequire = createRequire(import.meta.url)
const kFull = { profile: DEFAULT_PROFILE, signalDetails: 'all', evidenceDetails: 'full' } as const

function ip (s: string): ParsedIp {
  const p = parseIp(s)
  assert.ok(p !== null, `${s} parses`)
  return p
}

/** AS number and organisation the snapshot gives an address. */
function asnOf (snap: Snapshot, s: string): { asn: number, org: string | null } {
  const p = ip(s)
  const asn = snap.asnOf(p.version, p.words)
  return { asn, org: snap.asnInfo(asn)?.org ?? null }
}

/** Whether a `first-last` range text holds the address (word by word, most significant first). */
function rangeHolds (range: string, p: ParsedIp): boolean {
  const [first, last] = range.split('-').map((a) => ip(a).words) as [number[], number[]]
  const cmp = (a: number[], b: number[]): number => {
    for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return (a[i] as number) < (b[i] as number) ? -1 : 1
    return 0
  }
  return first.length === p.words.length && cmp(first, p.words) <= 0 && cmp(p.words, last) <= 0
}

/** What a source's raw entries should index to: distinct indicators (an address is its own /32 or /128 network) and invalid values. */
function expectedCounts (entries: FeedEntry[]): { indexed: number, invalid: number } {
  const keys = new Set<string>()
  let invalid = 0
  for (const e of entries) {
    const r = normalize(e.value, e.type ?? undefined)
    if (!r.ok) {
      invalid++
      continue
    }
    const ind = r.indicator
    const key = ind.type === 'ip' ? `net|${ind.normalized}/${ind.ip?.version === 4 ? 32 : 128}` : ind.type === 'ip_block' ? `net|${ind.normalized}` : `${ind.type}|${ind.normalized}`
    keys.add(key)
  }
  return { indexed: keys.size, invalid }
}

/** JSON of score() for each item: the byte form determinism is judged on. */
function verdictJson (snap: Snapshot, items: Array<{ type?: string, value: string }>): string[] {
  return items.map((it) => JSON.stringify(score(it.value, it.type, kFull, snap)))
}

async function tempDir (t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'ioc-verdict-intel-'))
  t.after(async () => await rm(dir, { recursive: true, force: true }))
  return dir
}

describe('built-in registry data', () => {
  test('the AS registry holds over 400,000 IPv4 ranges and tens of thousands of IPv6 ranges', async () => {
    const snap = await sampleSnapshot()
    assert.ok(snap.header.counts.asnRangesV4! > 400_000, `asnRangesV4 = ${snap.header.counts.asnRangesV4}`)
    assert.ok(snap.header.counts.asnRangesV6! > 50_000, `asnRangesV6 = ${snap.header.counts.asnRangesV6}`)
    assert.ok(snap.header.counts.asns! > 50_000, `asns = ${snap.header.counts.asns}`)
  })

  test('well-known resolver addresses map to their operator AS and organisation', async () => {
    const snap = await sampleSnapshot()
    const google = asnOf(snap, '8.8.8.8')
    assert.equal(google.asn, 15169)
    assert.match(google.org ?? '', /Google/)
    const cloudflare = asnOf(snap, '1.1.1.1')
    assert.equal(cloudflare.asn, 13335)
    assert.match(cloudflare.org ?? '', /Cloudflare/)
    const quad9 = asnOf(snap, '9.9.9.9')
    assert.equal(quad9.asn, 19281)
    assert.match(quad9.org ?? '', /Quad9/)
    assert.equal(asnOf(snap, '2001:4860:4860::8888').asn, 15169)
    assert.equal(asnOf(snap, '2606:4700:4700::1111').asn, 13335)
  })

  test('every public resolver address is announced by the operator its section in public-resolvers.txt names', async () => {
    const snap = await sampleSnapshot()
    const text = await readFile(join(kRoot, 'data', 'reference', 'public-resolvers.txt'), 'utf8')
    let org: RegExp | null = null
    let checked = 0
    for (const raw of text.split('\n')) {
      const line = raw.trim()
      if (line === '') continue
      if (line.startsWith('#')) {
        const fields = line.slice(1).split(' | ')
        if (fields.length === 3) org = new RegExp(fields[1]?.trim() as string)
        continue
      }
      assert.ok(org !== null, `${line} sits under a section header`)
      const got = asnOf(snap, line)
      assert.match(got.org ?? '', org, `${line}: announced by AS${got.asn} "${got.org}"`)
      checked++
    }
    assert.ok(checked >= 100, `${checked} addresses`)
  })

  test('AS records count the ranges each AS announces and an unknown AS has none', async () => {
    const snap = await sampleSnapshot()
    const info = snap.asnInfo(15169)
    assert.ok(info !== null)
    assert.ok(info.v4Ranges > 0 && info.v6Ranges > 0, JSON.stringify(info))
    assert.equal(snap.asnInfo(64511), null, 'documentation AS numbers are not in the registry')
  })

  test('the registry range holding an address contains it', async () => {
    const snap = await sampleSnapshot()
    for (const s of ['8.8.8.8', '2001:4860:4860::8888']) {
      const p = ip(s)
      const facts = snap.registryFacts(p.version, p.words)
      assert.ok(facts !== null, s)
      assert.ok(rangeHolds(facts.range, p), `${facts.range} holds ${s}`)
    }
    assert.equal(snap.registryFacts(4, ip('10.0.0.1').words), null, 'private space is announced by no AS')
    assert.equal(snap.asnOf(4, ip('10.0.0.1').words), -1)
  })

  test('the country registry gives two-letter codes for public addresses and none for private space', async () => {
    const snap = await sampleSnapshot()
    assert.ok(snap.header.counts.countryRangesV4! > 100_000)
    assert.ok(snap.header.counts.countryRangesV6! > 50_000)
    assert.equal(snap.countryOf(4, ip('8.8.8.8').words), 'US')
    assert.equal(snap.countryOf(4, ip('5.6.7.8').words), 'DE')
    assert.match(snap.countryOf(6, ip('2001:4860:4860::8888').words) ?? '', /^[A-Z]{2}$/)
    assert.equal(snap.countryOf(4, ip('10.0.0.1').words), null)
  })

  test('every infrastructure AS in data/reference exists in the registry under the listed organisation', async () => {
    const snap = await sampleSnapshot()
    const infra = JSON.parse(await readFile(join(kRoot, 'data', 'reference', 'infrastructure-asns.json'), 'utf8')) as Record<string, Array<{ asn: number, org: string }>>
    const rows = [...(infra.cdn ?? []), ...(infra.cloud ?? [])]
    assert.ok(rows.length >= 15)
    for (const { asn, org } of rows) {
      const info = snap.asnInfo(asn)
      assert.ok(info !== null, `AS${asn} is in the registry`)
      assert.ok((info.org ?? '').includes(org), `AS${asn} is "${info.org}", expected to contain "${org}"`)
      assert.ok(info.v4Ranges + info.v6Ranges > 0, `AS${asn} announces ranges`)
    }
  })
})

describe('built-in sources', () => {
  test('every built-in source indexes each distinct valid entry once and counts the invalid ones as rejected', async () => {
    const snap = await sampleSnapshot()
    const inputs = await readBuiltinSources()
    assert.ok(inputs.length >= 10)
    for (const input of inputs) {
      const meta = snap.sources.find((s) => s.name === input.name)
      assert.ok(meta !== undefined, `${input.name} is in the snapshot`)
      assert.equal(meta.kind, 'builtin')
      const want = expectedCounts(input.entries)
      assert.equal(meta.indexed, want.indexed, `${input.name} indexed`)
      assert.equal(meta.rejected, want.invalid, `${input.name} rejected`)
      assert.ok(meta.indexed > 0, `${input.name} is not empty`)
    }
  })

  test('eth-phishing-detect contributes its whole blocklist and allowlist', async () => {
    const snap = await sampleSnapshot()
    const cfg = kRequire('eth-phishing-detect/src/config.json') as { blacklist: string[], whitelist: string[] }
    const block = snap.sources.find((s) => s.name === 'eth-phishing-detect')
    const allow = snap.sources.find((s) => s.name === 'eth-phishing-allowlist')
    assert.ok(block !== undefined && allow !== undefined)
    assert.ok(block.indexed > 10_000)
    assert.equal(block.lines, cfg.blacklist.length)
    assert.equal(allow.lines, cfg.whitelist.length)
    assert.equal(block.direction, 'malicious')
    assert.equal(allow.direction, 'safe')
    // The blocklist's few lines that are no indicator at all (bare words) are reported, not silently dropped;
    // its bare IP addresses are indexed as addresses.
    assert.equal(block.rejected, block.rejectedSamples.length)
    for (const r of block.rejectedSamples) assert.match(r.reason, /^(invalid domain|cannot infer indicator type)/)
    assert.ok(snap.findDomain(cfg.blacklist[0] as string) !== 0)
    const ip = cfg.blacklist.find((v) => /^\d+\.\d+\.\d+\.\d+$/.test(v))
    assert.ok(ip !== undefined)
    const n = normalize(ip, undefined)
    assert.ok(n.ok)
    let listed = false
    for (let x = snap.find(listingKey(n.indicator, { h1: 0, h2: 0 })); x !== 0; x = snap.entryNext(x)) listed ||= snap.entrySource(x) === block.id
    assert.ok(listed, `${ip} is indexed as an address`)
  })

  test('disposable-email-domains indexes over 100,000 domains', async () => {
    const snap = await sampleSnapshot()
    const meta = snap.sources.find((s) => s.name === 'disposable-email-domains')
    assert.ok(meta !== undefined)
    assert.ok(meta.indexed > 100_000)
    assert.ok(snap.findDomain('mailinator.com') !== 0)
  })

  test('special-purpose, documentation and protocol ranges come from the IANA registries, split by reachability', async () => {
    const snap = await sampleSnapshot()
    const { prefixes, asns } = await readSpecialPurpose()
    const by = (name: string): number => snap.sources.find((s) => s.name === name)?.indexed ?? -1
    const count = (kind: string): number => prefixes.filter((r) => r.kind === kind).length
    assert.equal(by('special-purpose'), count('non_routable'))
    assert.equal(by('documentation-ranges'), 5)
    assert.equal(by('protocol-assignments'), count('protocol_assignment'))
    assert.equal(by('special-purpose') + by('documentation-ranges') + by('protocol-assignments'), prefixes.length)
    // The rule the file follows: documentation is documentation; otherwise not globally reachable = non_routable.
    for (const r of prefixes) {
      const want = r.id === 'documentation' ? 'documentation' : r.reachable === false ? 'non_routable' : 'protocol_assignment'
      assert.equal(r.kind, want, r.prefix)
    }
    for (const r of asns) assert.equal(r.kind, r.id === 'documentation' ? 'documentation' : r.id === 'as112' ? 'protocol_assignment' : 'non_routable', `AS${r.first}`)
    assert.deepEqual(snap.header.specialAsns?.map((r) => [r.first, r.last]), asns.map((r) => [r.first, r.last]))
    assert.ok(snap.header.v4Prefixes.includes(8) && snap.header.v6Prefixes.includes(10), 'the /8 and fe80::/10 ranges are indexed')
  })

  test('every special range ipaddr.js knows is in the IANA file with the same prefix (nothing was lost)', async () => {
    const ipaddr = kRequire('ipaddr.js') as Record<'IPv4' | 'IPv6', { prototype: { SpecialRanges: Record<string, unknown> } }>
    const { prefixes } = await readSpecialPurpose()
    const have = new Set(prefixes.map((r) => r.prefix))
    for (const v of ['IPv4', 'IPv6'] as const) {
      for (const [name, spec] of Object.entries(ipaddr[v].prototype.SpecialRanges)) {
        // IPv4-mapped and -translated forms normalize into IPv4 space (they would hold every IPv4 address).
        if (name === 'unicast' || name === 'ipv4Mapped' || name === 'rfc6145') continue
        const list = (Array.isArray((spec as unknown[])[0]) ? spec : [spec]) as Array<[{ toString: () => string }, number]>
        for (const [addr, bits] of list) assert.ok(have.has(`${addr.toString()}/${bits}`), `${name} ${addr.toString()}/${bits}`)
      }
    }
  })

  test('CDN ranges, CDN and cloud AS lists and public resolvers are all indexed', async () => {
    const snap = await sampleSnapshot()
    const cloudflare = kRequire('cloudflare-ip/ips.json') as string[]
    const by = (name: string): number => snap.sources.find((s) => s.name === name)?.indexed ?? -1
    assert.equal(by('cloudflare-ranges'), cloudflare.length)
    const infra = JSON.parse(await readFile(join(kRoot, 'data', 'reference', 'infrastructure-asns.json'), 'utf8')) as Record<'cdn' | 'cloud', unknown[]>
    assert.equal(by('cdn-asns'), infra.cdn.length)
    assert.equal(by('cloud-asns'), infra.cloud.length)
    assert.ok(by('public-resolvers') >= 100)
    assert.ok(by('top-sites') >= 490)
    assert.ok(snap.findAsn(13335) !== 0)
  })
})

describe('sample feeds', () => {
  // data/feeds/README.md: entries per file, all distinct; only threatfox and stix2 have rejects.
  const kKnown: Record<string, { indexed: number, rejected: number }> = {
    sample_allowlist: { indexed: 19, rejected: 0 },
    sample_firehol: { indexed: 5, rejected: 0 },
    sample_spamhaus_drop: { indexed: 4, rejected: 0 },
    sample_spamhaus_asndrop: { indexed: 3, rejected: 0 },
    sample_feodo: { indexed: 4, rejected: 0 },
    sample_threatfox: { indexed: 5, rejected: 2 },
    sample_urlhaus: { indexed: 4, rejected: 0 },
    sample_malwarebazaar: { indexed: 4, rejected: 0 },
    urlhaus_filter_hosts: { indexed: 43, rejected: 0 },
    urlhaus_filter: { indexed: 301, rejected: 0 },
    sample_misp: { indexed: 10, rejected: 0 },
    sample_stix2: { indexed: 8, rejected: 1 },
    sample_sslbl: { indexed: 3, rejected: 0 }
  }

  test('each sample feed indexes the known number of distinct entries with the known rejects', async () => {
    const snap = await sampleSnapshot()
    const feeds = snap.sources.filter((s) => s.kind === 'feed')
    assert.deepEqual(feeds.map((s) => s.name).sort(), Object.keys(kKnown).sort())
    for (const s of feeds) assert.deepEqual({ indexed: s.indexed, rejected: s.rejected }, kKnown[s.name], s.name)
    assert.deepEqual(snap.sources.find((s) => s.name === 'sample_threatfox')?.rejectedSamples.map((r) => r.reason), ['unsupported hash type', 'unsupported hash type'])
    assert.deepEqual(snap.sources.find((s) => s.name === 'sample_stix2')?.rejectedSamples.map((r) => r.reason), ['unsupported pattern: AND'])
  })

  test('each sample feed indexed count equals its distinct valid entries as the loader reads them', async () => {
    const snap = await sampleSnapshot()
    for (const spec of await loadManifest(kSampleManifest)) {
      const parsed = await readFeed(spec)
      const want = expectedCounts(parsed.entries)
      const meta = snap.sources.find((s) => s.name === spec.name)
      assert.ok(meta !== undefined, spec.name)
      assert.equal(meta.indexed, want.indexed, `${spec.name} indexed`)
      assert.equal(meta.rejected, parsed.rejected.length + want.invalid, `${spec.name} rejected`)
      assert.equal(meta.lines, parsed.lines, `${spec.name} lines`)
      assert.equal(meta.direction, spec.direction)
      assert.equal(meta.halfLifeDays, spec.halfLifeDays)
    }
  })

  test('a value listed by several feeds keeps one listing per feed', async () => {
    const snap = await sampleSnapshot()
    const head = snap.findSha256('275a021bbfb6489e54d471899f7db9d1663fc695ec2fe2a2c4538aabf651fd0f')
    const names: string[] = []
    const labels: Array<string | null> = []
    for (let e = head; e !== 0; e = snap.entryNext(e)) {
      names.push(snap.sources[snap.entrySource(e)]!.name)
      labels.push(snap.entryLabel(e))
    }
    assert.deepEqual(names.sort(), ['sample_malwarebazaar', 'sample_stix2'])
    assert.deepEqual(labels, ['EICAR', 'EICAR'])
  })

  test('the snapshot header counts agree with its buffer and sources', async () => {
    const data = await sampleSnapshotData()
    const { counts } = data.header
    assert.equal(counts.bytes, data.buffer.byteLength)
    assert.ok(data.buffer instanceof SharedArrayBuffer)
    const indexed = data.header.sources.reduce((n, s) => n + s.indexed, 0)
    assert.equal(counts.listings, indexed)
    assert.ok(counts.keys! <= indexed)
    assert.ok(data.buffer.byteLength <= 64 * 1024 * 1024, `snapshot is ${data.buffer.byteLength} bytes`)
  })
})

describe('lookups', () => {
  test('every valid entry of every source is found under its listing key', async () => {
    const snap = await sampleSnapshot()
    const pair = { h1: 0, h2: 0 }
    const sources = [...await readBuiltinSources(), ...await Promise.all((await loadManifest(kSampleManifest)).map(async (spec) => ({ name: spec.name, entries: (await readFeed(spec)).entries })))]
    let checked = 0
    for (const src of sources) {
      const id = snap.sources.findIndex((s) => s.name === src.name)
      for (const e of src.entries) {
        const r = normalize(e.value, e.type ?? undefined)
        if (!r.ok) continue
        let found = false
        for (let x = snap.find(listingKey(r.indicator, pair)); x !== 0 && !found; x = snap.entryNext(x)) found = snap.entrySource(x) === id
        assert.ok(found, `${src.name}: ${e.value}`)
        checked++
      }
    }
    assert.ok(checked > 130_000, `${checked} entries checked`)
    assert.equal(snap.findDomain('not-listed-anywhere.ioc-verdict.test'), 0)
    assert.equal(snap.findSha256('0'.repeat(64)), 0)
  })

  test('every IPv4 registry range answers for its first and last address', async () => {
    const data = await sampleSnapshotData()
    const snap = new Snapshot(data)
    const { sections } = data.header
    for (const table of ['asn4', 'cc4'] as const) {
      const starts = view(data.buffer, sections, `${table}.starts`, 'u32')
      const ends = view(data.buffer, sections, `${table}.ends`, 'u32')
      const values = table === 'asn4' ? view(data.buffer, sections, 'asn4.values', 'u32') : view(data.buffer, sections, 'cc4.values', 'u16')
      const answer = (a: number): number | string | null => table === 'asn4' ? snap.asnOf(4, [a]) : snap.countryOf(4, [a])
      const expected = (i: number): number | string => table === 'asn4' ? values[i] as number : String.fromCharCode((values[i] as number) >> 8, (values[i] as number) & 0xff)
      let nested = 0
      for (let i = 0; i < starts.length; i++) {
        // The registry nests a few ranges (a more specific one inside a wider one); the most specific answers there.
        const alone = (i === 0 || (starts[i] as number) > (ends[i - 1] as number)) && (i === starts.length - 1 || (ends[i] as number) < (starts[i + 1] as number))
        if (!alone) nested++
        for (const a of [starts[i] as number, ends[i] as number]) {
          if (alone) assert.equal(answer(a), expected(i), `${table} range ${i}, address ${a}`)
          else assert.notEqual(answer(a), table === 'asn4' ? -1 : null, `${table} nested range ${i}, address ${a}`)
        }
        const before = (starts[i] as number) - 1
        if (i > 0 && before > (ends[i - 1] as number)) assert.equal(answer(before), table === 'asn4' ? -1 : null, `${table} gap before range ${i}`)
      }
      assert.ok(nested < starts.length / 100, `${table}: ${nested} nested ranges`)
    }
  })

  test('registry facts are what the separate lookups give, on first use and after', async () => {
    const snap = await sampleSnapshot()
    const fresh = new Snapshot(await sampleSnapshotData())
    const addresses = ['8.8.8.8', '8.8.4.4', '1.1.1.1', '2001:4860:4860::8888', '2606:4700:4700::1111', '10.0.0.1', '::1']
    for (let i = 0; i < 2000; i++) addresses.push(`${(i * 7919) % 224}.${(i * 31) % 256}.${(i * 17) % 256}.${i % 256}`)
    for (const round of [1, 2]) {
      for (const s of addresses) {
        const p = ip(s)
        const facts = fresh.registryFacts(p.version, p.words)
        const asn = snap.asnOf(p.version, p.words)
        if (asn === -1) {
          assert.equal(facts, null, s)
          continue
        }
        assert.ok(facts !== null, s)
        assert.deepEqual({ ...facts, range: '' }, { asn, info: snap.asnInfo(asn), range: '', listed: snap.findAsn(asn) }, `${s}, round ${round}`)
        assert.ok(rangeHolds(facts.range, p), `${facts.range} holds ${s}`)
      }
    }
  })
})

describe('disk cache', () => {
  // One cold compile of the sample feeds into a cache dir of the describe's own, shared by its tests (each compile of
  // the built-in sources costs seconds); the tests that corrupt the file or add a feed set work on copies.
  let shared: Promise<{ dir: string, cold: Awaited<ReturnType<typeof loadSnapshot>> }> | null = null
  const compiledOnce = async (): Promise<{ dir: string, cold: Awaited<ReturnType<typeof loadSnapshot>> }> => {
    shared ??= (async () => {
      const dir = await mkdtemp(join(tmpdir(), 'ioc-verdict-intel-'))
      return { dir, cold: await loadSnapshot({ feeds: await loadManifest(kSampleManifest), cacheDir: dir }) }
    })()
    return await shared
  }
  after(async () => { if (shared !== null) await rm((await shared).dir, { recursive: true, force: true }) })
  /** A private cache dir holding a copy of the shared cold compile's file. */
  const copyOfCompiled = async (t: TestContext): Promise<{ dir: string, path: string }> => {
    const { cold } = await compiledOnce()
    const dir = await tempDir(t)
    const path = join(dir, basename(cold.path as string))
    await copyFile(cold.path as string, path)
    return { dir, path }
  }

  test('a snapshot file encodes and decodes to the same header and bytes', async () => {
    const data = await sampleSnapshotData()
    const back = decodeSnapshotFile(encodeSnapshotFile(data))
    assert.deepEqual(back.header, data.header)
    assert.ok(back.buffer instanceof SharedArrayBuffer)
    assert.ok(Buffer.from(back.buffer).equals(Buffer.from(data.buffer)))
  })

  test('a file that is not a snapshot, or is truncated, is refused', async () => {
    const file = encodeSnapshotFile(await sampleSnapshotData())
    assert.throws(() => decodeSnapshotFile(Buffer.from('not a snapshot at all')), /not a snapshot file/)
    assert.throws(() => decodeSnapshotFile(file.subarray(0, file.length - 1024)), /truncated/)
  })

  test('a snapshot loaded back from the cache is warm and gives identical verdicts', async () => {
    const { dir, cold } = await compiledOnce()
    const feeds = await loadManifest(kSampleManifest)
    assert.equal(cold.warm, false)
    assert.ok(cold.path !== null && cold.path.startsWith(dir))
    const warm = await loadSnapshot({ feeds, cacheDir: dir })
    assert.equal(warm.warm, true)
    assert.equal(warm.path, cold.path)
    assert.equal(JSON.stringify(warm.data.header), JSON.stringify(cold.data.header))
    assert.ok(Buffer.from(warm.data.buffer).equals(Buffer.from(cold.data.buffer)))
    const items = mixedCorpus(1500, 7)
    assert.deepEqual(verdictJson(new Snapshot(warm.data), items), verdictJson(new Snapshot(cold.data), items))
  })

  test('a corrupt cache file is ignored and replaced by a fresh compile', async (t) => {
    const { dir, path } = await copyOfCompiled(t)
    const first = (await compiledOnce()).cold
    const feeds = await loadManifest(kSampleManifest)
    const file = await readFile(path)
    // Same magic and header, body cut short: what a crash mid-write would leave without the atomic rename.
    await writeFile(path, file.subarray(0, file.length >> 1))
    const second = await loadSnapshot({ feeds, cacheDir: dir })
    assert.equal(second.warm, false)
    assert.equal(second.path, path)
    assert.equal(second.data.header.inputKey, first.data.header.inputKey)
    assert.ok(Buffer.from(second.data.buffer).equals(Buffer.from(first.data.buffer)))
    await writeFile(path, 'garbage')
    assert.equal((await loadSnapshot({ feeds, cacheDir: dir })).warm, false)
    assert.equal((await loadSnapshot({ feeds, cacheDir: dir })).warm, true, 'the recompiled snapshot was written back')
  })

  test('a different feed set has a different cache key and never reads another set\'s file', async (t) => {
    const { dir } = await copyOfCompiled(t)
    const feeds = await loadManifest(kSampleManifest)
    const all = await loadSnapshot({ feeds, cacheDir: dir })
    assert.equal(all.warm, true)
    const fewer = await loadSnapshot({ feeds: feeds.slice(0, 3), cacheDir: dir })
    assert.equal(fewer.warm, false)
    assert.notEqual(fewer.data.header.inputKey, all.data.header.inputKey)
    assert.equal(fewer.data.header.sources.filter((s) => s.kind === 'feed').length, 3)
  })
})

describe('sharing a snapshot between threads', () => {
  /** Starts the reader fixture on a snapshot and returns it with its ready message. */
  async function startReader (t: TestContext, snapshot: SnapshotData): Promise<{ worker: Worker, ready: Extract<ReaderReply, { op: 'ready' }>, ask: (req: ReaderRequest) => Promise<ReaderReply> }> {
    const entry = pathToFileURL(join(kRoot, 'test', 'fixtures', 'snapshot-reader.ts')).href
    const worker = new Worker(join(kRoot, 'workers', 'entry.js'), { workerData: { entry, snapshot } })
    t.after(async () => { await worker.terminate() })
    const failed = once(worker, 'error').then(([err]) => { throw err })
    const ask = async (req: ReaderRequest): Promise<ReaderReply> => {
      worker.postMessage(req)
      return await Promise.race([once(worker, 'message').then(([m]) => m as ReaderReply), failed])
    }
    const ready = await Promise.race([once(worker, 'message').then(([m]) => m as ReaderReply), failed])
    assert.equal(ready.op, 'ready')
    return { worker, ready, ask }
  }

  test('a worker thread maps the snapshot built here and answers with identical verdicts', async (t) => {
    const data = await sampleSnapshotData()
    const { ready, ask } = await startReader(t, data)
    assert.equal(ready.shared, true, 'the worker receives a SharedArrayBuffer')
    assert.equal(ready.byteLength, data.buffer.byteLength)
    assert.equal(ready.version, data.header.version)
    const items = [...mixedCorpus(2000, 11), { value: '198.51.100.23' }, { type: 'asn', value: 'AS64511' }, { type: 'domain', value: 'xn--80ak6aa92e.com' }]
    const reply = await ask({ op: 'score', items })
    assert.equal(reply.op, 'score')
    assert.deepEqual(reply.results, verdictJson(new Snapshot(data), items))
  })

  test('the worker reads the very same memory: a byte it writes is seen by this thread', async (t) => {
    // A private copy, so the write cannot disturb the shared test snapshot.
    const source = await sampleSnapshotData()
    const buffer = new SharedArrayBuffer(source.buffer.byteLength)
    new Uint8Array(buffer).set(new Uint8Array(source.buffer))
    const data: SnapshotData = { header: source.header, buffer }
    const { ask } = await startReader(t, data)
    const bytes = new Uint8Array(buffer)
    const index = buffer.byteLength - 1
    const before = bytes[index] as number
    const reply = await ask({ op: 'poke', index, value: before ^ 0xff })
    assert.deepEqual(reply, { op: 'poke', previous: before })
    assert.equal(bytes[index], before ^ 0xff, 'the write made in the worker is visible here')
    await ask({ op: 'poke', index, value: before })
    assert.equal(bytes[index], before)
  })
})
