/**
 * The answer writers against the full path: an item written straight into the answer's bytes (the unlisted fast
 * path, the member writers, the chunk writers of each kind) is byte for byte the item rendered from the full
 * assessment and serialized by JSON.stringify or clientPackr, for every profile, format and detail level.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { mixedCorpus } from '../../bench/corpus.ts'
import { Assessor, normalize, PROFILES, render, writeContext, type Listing } from '../../src/engine/index.ts'
import { INDICATOR_TYPES } from '../../src/engine/types.ts'
import { contextKey, contextObject, kNoListing } from '../../src/engine/context.ts'
import { ByteSink } from '../../src/bytes/byte-sink.ts'
import { clientPackr, invalidIndicator, invalidItemObject, itemObject } from '../../src/pool/bulk-item.ts'
import { JsonMembers, PackedMembers } from '../../src/pool/member-writers.ts'
import { partStrings } from '../../src/history/block.ts'
import { createShardCache, scoreBulkChunk, type ChunkItem, type ScoringContext } from '../../src/pool/score-chunk.ts'
import { sampleSnapshot } from '../helper.ts'

/** A corpus that reaches every type, unlisted and listed, IPv6 ranges, blocks, odd spellings and invalid values. */
function corpus (): ChunkItem[] {
  const items: ChunkItem[] = mixedCorpus(4000, 2718).map((x) => [x.type, x.value, null, null])
  for (const v of ['2a00:1450:4001:80b::200e', '2400:cb00::1', '::ffff:8.8.8.8', '0.0.0.0/0', '::/0', '1.0.0.0/8', '8.8.8.0/24',
    'AS0', 'AS4294967295', 'AS3320', 'bücher.de', 'xn--bcher-kva.de', 'a.b.c.d.example.co.uk', 'x.blogspot.com', 'not an ip']) items.push([undefined, v, null, null])
  items.push(['ip', 42, null, null], ['domain', { a: 1 }, null, null])
  // Addresses that share their registry run and country (the tails kept per context facts) and some that do not.
  for (let i = 1; i < 200; i += 7) {
    items.push(['ip', `8.8.${i % 4}.${i}`, null, null], ['ip', `1.1.1.${i}`, null, null], [undefined, `81.2.69.${i}`, null, null],
      ['ip', `2a00:1450:4001:${i.toString(16)}::1`, null, null], ['ip', `104.16.${i}.1`, null, null], ['ip', `${i}.45.67.89`, null, null])
  }
  return items
}

test('addresses share a context key exactly when their registry run and country are the same', async () => {
  const snapshot = await sampleSnapshot()
  const assessor = new Assessor(snapshot)
  const profile = PROFILES[PROFILES.length - 1]
  assert.ok(profile !== undefined)
  const keyOf = (value: string): { key: number, facts: string } => {
    const n = normalize(value, undefined)
    assert.ok(n.ok)
    assessor.collect(n.indicator, profile)
    const f = assessor.facts
    return { key: contextKey(f), facts: JSON.stringify([f.ipVersion, f.hasRegistry ? [f.registry.first, f.registry.last, f.registry.asn] : null, f.country]) }
  }
  const values = ['8.8.8.8', '8.8.8.9', '8.8.4.4', '1.1.1.1', '1.0.0.1', '81.2.69.142', '81.2.69.160', '2a00:1450:4001:80b::200e',
    '2a00:1450:4001:80c::1', '192.0.2.1', '10.0.0.1', '::1', '203.0.113.9']
  const seen = values.map(keyOf)
  let shared = 0
  for (const a of seen) {
    assert.ok(a.key >= 0 && Number.isSafeInteger(a.key))
    for (const b of seen) {
      assert.equal(a.key === b.key, a.facts === b.facts, `${a.facts} ${b.facts}`)
      if (a !== b && a.key === b.key) shared++
    }
  }
  assert.ok(shared > 0, 'some of the addresses share their facts')
  // Other types have no key: their context holds per-value members.
  const n = normalize('example.com', undefined)
  assert.ok(n.ok)
  assessor.collect(n.indicator, profile)
  assert.equal(contextKey(assessor.facts), -1)
})

/** What the full path answers for an item at signal_details none: assess, render, serialize. */
function reference (items: ChunkItem[], format: 'json' | 'msgpack', version: string, assessor: Assessor): Buffer[] {
  const profile = PROFILES.find((p) => p.version === version)
  assert.ok(profile !== undefined)
  return items.map(([type, value]) => {
    const n = normalize(value, type)
    let object: Record<string, unknown>
    if (!n.ok) {
      object = invalidItemObject(invalidIndicator(type, value), n.warnings, n.errors)
    } else {
      assessor.collect(n.indicator, profile)
      const v = render(assessor.assessment(), value as string, n.indicator.warnings, { signalDetails: 'none', evidenceDetails: 'none' })
      object = itemObject(v, n.indicator.warnings)
    }
    return format === 'json' ? Buffer.from(JSON.stringify(object)) : Buffer.from(clientPackr.pack(object))
  })
}

test('bulk items written straight into bytes are the full path\'s items, every profile and format, cached or not', async () => {
  const snapshot = await sampleSnapshot()
  const items = corpus()
  const assessor = new Assessor(snapshot)
  for (const profile of PROFILES) {
    for (const format of ['json', 'msgpack'] as const) {
      const want = reference(items, format, profile.version, assessor)
      const params = { mode: 'bulk', format, scoringVersion: profile.version, signalDetails: 'none', evidenceDetails: 'none' } as const
      const cached: ScoringContext = { snapshot, cache: createShardCache(20_000) }
      for (const [what, ctx] of [['fresh', { snapshot, cache: null }], ['miss', cached], ['hit', cached]] as const) {
        const out = scoreBulkChunk(items, params, ctx)
        let start = 0
        for (let i = 0; i < items.length; i++) {
          const end = out.ends[i] as number
          const got = Buffer.from(out.body.subarray(start, end))
          if (!got.equals(want[i] as Buffer)) assert.fail(`${profile.version} ${format} ${what}: item ${i} (${String(items[i]?.[1])})\n got ${got.toString('latin1')}\nwant ${(want[i] as Buffer).toString('latin1')}`)
          start = end
        }
      }
    }
  }
})

/** One value's spellings: as it normalizes (sent with its type), and others that normalize to it or fail. */
const kSpellings: ReadonlyArray<{ canonical: ChunkItem, others: ChunkItem[] }> = [
  { canonical: ['domain', 'example.com', null, null], others: [['domain', 'EXAMPLE.com', null, null], ['domain', ' example.com', null, null], ['domain', 'example[.]com', null, null], [undefined, 'example.com', null, null], ['domain', 'http://example.com/x', null, null], ['ip', 'example.com', null, null]] },
  { canonical: ['ip', '198.51.100.23', null, null], others: [[undefined, '198.51.100.23', null, null], ['ip', '198.51.100[.]23', null, null], ['domain', '198.51.100.23', null, null], ['ip_block', '198.51.100.23', null, null]] },
  { canonical: ['ip', '2a00:1450:4001:80b::200e', null, null], others: [['ip', '2A00:1450:4001:80B::200E', null, null], ['ip', '2a00:1450:4001:80b:0:0:0:200e', null, null]] },
  { canonical: ['ip_block', '8.8.8.0/24', null, null], others: [['ip_block', '8.8.8.1/24', null, null], [undefined, '8.8.8.0/24', null, null]] },
  { canonical: ['asn', 'AS3320', null, null], others: [['asn', '3320', null, null], ['asn', 'as3320', null, null], [undefined, 'AS3320', null, null]] },
  { canonical: ['file_hash_sha256', 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855', null, null], others: [['file_hash_sha256', 'E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855', null, null]] },
  // Log-only fields do not change the item; they do change the history record.
  { canonical: ['domain', 'x.blogspot.com', 'blocked', 'edr'], others: [['domain', 'X.blogspot.com', null, null]] }
]

test('a value cached as it normalizes answers and records as the full path, whichever spelling came first', async () => {
  const snapshot = await sampleSnapshot()
  const assessor = new Assessor(snapshot)
  const profile = PROFILES[PROFILES.length - 1]
  assert.ok(profile !== undefined)
  // Orders: other spellings first (their entries do not say the value normalizes to itself), the canonical one
  // first, and each canonical spelling alone, cold and then warm; each chunk scored three times on one cache.
  const orders: ChunkItem[][] = [
    kSpellings.flatMap((x) => [...x.others, x.canonical, x.canonical]),
    kSpellings.flatMap((x) => [x.canonical, ...x.others, x.canonical]),
    kSpellings.map((x) => x.canonical),
    // A run of values never seen (the chunk then asks about one item in 16 only), then cached ones.
    [...Array.from({ length: 40 }, (_, i): ChunkItem => ['ip', `203.0.113.${i + 1}`, null, null]), ...kSpellings.flatMap((x) => [x.canonical, ...x.others])]
  ]
  let compared = 0
  for (const format of ['json', 'msgpack'] as const) {
    const params = { mode: 'bulk', format, scoringVersion: profile.version, signalDetails: 'none', evidenceDetails: 'none' } as const
    for (const items of orders) {
      const want = reference(items, format, profile.version, assessor)
      const fresh = scoreBulkChunk(items, params, { snapshot, cache: null })
      const wantHistory = partStrings(fresh.history)
      const ctx: ScoringContext = { snapshot, cache: createShardCache(1000) }
      for (let pass = 0; pass < 3; pass++) {
        const out = scoreBulkChunk(items, params, ctx)
        let start = 0
        for (let i = 0; i < items.length; i++) {
          const end = out.ends[i] as number
          const got = Buffer.from(out.body.subarray(start, end))
          if (!got.equals(want[i] as Buffer)) assert.fail(`${format} pass ${pass}: item ${i} (${String(items[i]?.[1])})\n got ${got.toString('latin1')}\nwant ${(want[i] as Buffer).toString('latin1')}`)
          start = end
          compared++
        }
        assert.deepEqual(partStrings(out.history), wantHistory, `${format} pass ${pass}: history records`)
        assert.deepEqual([...out.types], [...fresh.types])
        assert.deepEqual(out.categories, fresh.categories)
        assert.equal(out.invalid, fresh.invalid)
        if (pass > 0) assert.equal(out.cacheHits, items.length - out.invalid, `${format} pass ${pass}: every valid item a hit`)
      }
    }
  }
  assert.ok(compared > 100)
})

test('the member writers write the JSON text and the MessagePack of the context object, listing or not', async () => {
  const snapshot = await sampleSnapshot()
  const assessor = new Assessor(snapshot)
  const sink = new ByteSink(256)
  const json = new JsonMembers(sink)
  const packed = new PackedMembers(sink)
  const listings: Listing[] = [kNoListing, { listedBy: ['a', 'b"c'], knownGoodBy: [], labels: ['Émotet'], firstSeen: '2025-01-02', lastSeen: null }]
  let checked = 0
  // Twice over, so that the second pass writes the fact groups from the bytes kept in the first.
  for (let pass = 0; pass < 2; pass++) {
    for (const it of [...mixedCorpus(3000, 31), { value: '2400:cb00::1' }, { value: '41.0.0.0/11' }, { value: 'AS3320' }]) {
      const n = normalize(it.value, it.type)
      if (!n.ok) continue
      assessor.collect(n.indicator, PROFILES[0] as (typeof PROFILES)[number])
      for (const listing of listings) {
        const object = contextObject(assessor.facts, listing, snapshot)
        sink.clear()
        writeContext(assessor.facts, listing, snapshot, json)
        assert.equal(sink.buf.toString('utf8', 0, sink.len), JSON.stringify(object), it.value)
        sink.clear()
        writeContext(assessor.facts, listing, snapshot, packed)
        assert.ok(Buffer.from(sink.buf.subarray(0, sink.len)).equals(Buffer.from(clientPackr.pack(object))), `${it.value} packed`)
        checked++
      }
    }
  }
  assert.ok(checked > 10_000, `${checked} contexts`)
})

test('a chunk counts its valid indicators per type in INDICATOR_TYPES order, and its invalid ones apart', async () => {
  const snapshot = await sampleSnapshot()
  const items: ChunkItem[] = mixedCorpus(3000, 4242).map((x) => [x.type, x.value, null, null])
  items.push(['ip', 'not an address', null, null], ['asn', 'AS', null, null], [undefined, '::1', null, null])
  const want = new Array<number>(INDICATOR_TYPES.length).fill(0)
  let invalid = 0
  for (const [type, value] of items) {
    const n = normalize(value, type)
    if (n.ok) want[INDICATOR_TYPES.indexOf(n.indicator.type)] = (want[INDICATOR_TYPES.indexOf(n.indicator.type)] as number) + 1
    else invalid++
  }
  assert.ok(want.every((c) => c > 0), 'every type is in the corpus')
  const out = scoreBulkChunk(items, { mode: 'bulk', format: 'json', scoringVersion: null, signalDetails: 'none', evidenceDetails: 'none' }, { snapshot, cache: createShardCache(1000) })
  assert.deepEqual([...out.types], want)
  assert.equal(out.invalid, invalid)
  assert.ok(invalid >= 2)
})
