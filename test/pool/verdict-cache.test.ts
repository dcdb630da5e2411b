/**
 * The off-heap verdict cache: a cached verdict answers exactly as a fresh one (every format, detail level and the
 * history record, on the first lookup and on hits), eviction and hash collisions give misses and never another
 * indicator's verdict, and the bounds hold.
 */
import assert from 'node:assert/strict'
import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { mixedCorpus } from '../../bench/corpus.ts'
import type { EvidenceDetails, SignalDetails } from '../../src/engine/types.ts'
import { createShardCache, scoreBulkChunk, scoreSingle, type ChunkItem, type ChunkParams, type ScoringContext } from '../../src/pool/score-chunk.ts'
import { hash30, VerdictCache, type VerdictTexts } from '../../src/pool/verdict-cache.ts'
import { kTailRisk as kRiskPrefix, kTailSignalsNone as kScoresPrefix } from '../../src/pool/bulk-item.ts'
import { Facets, kNoFacet } from '../../src/pool/facets.ts'
import { IntLru } from '../../src/pool/int-lru.ts'
import { itemTail, verdictMembers } from '../../src/history/record.ts'
import type { Assessment } from '../../src/engine/index.ts'
import { ScoringPool } from '../../src/pool/scoring-pool.ts'
import { sampleSnapshot, sampleSnapshotData } from '../helper.ts'

/** Every IP, domain and SHA-256 named in the shipped sample feeds (listed indicators, with evidence), plus a mixed corpus. */
function corpus (): ChunkItem[] {
  const dir = join(import.meta.dirname, '..', '..', 'data', 'feeds')
  const values = new Set<string>()
  for (const f of readdirSync(dir)) {
    if (!/\.(csv|txt|json|netset)$/.test(f)) continue
    const text = readFileSync(join(dir, f), 'utf8')
    for (const m of text.matchAll(/\b(?:\d{1,3}\.){3}\d{1,3}\b|\b[a-f0-9]{64}\b|\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}\b/gi)) values.add(m[0])
  }
  const items: ChunkItem[] = [...values].map((v) => [undefined, v, null, null])
  for (const x of mixedCorpus(2000, 91)) items.push([x.type, x.value, 'block', 'edr'])
  items.push(['ip', 'not an ip', null, null], [undefined, '1.2.3[.]4', null, null], ['domain', 'BÜCHER.de.', null, null])
  return items
}

const kLevels: SignalDetails[] = ['none', 'top', 'all']
const kEvidence: EvidenceDetails[] = ['none', 'summary', 'full']

/** Asserts equal bytes, naming the first difference (a plain assert.equal would diff megabytes). */
function sameBytes (got: Uint8Array, want: Uint8Array, what: string): void {
  const a = Buffer.from(got)
  const b = Buffer.from(want)
  if (a.equals(b)) return
  let i = 0
  while (i < a.length && a[i] === b[i]) i++
  assert.fail(`${what}: bytes differ at ${i}: got ${JSON.stringify(a.subarray(Math.max(0, i - 80), i + 80).toString('latin1'))}, want ${JSON.stringify(b.subarray(Math.max(0, i - 80), i + 80).toString('latin1'))}`)
}

test('bulk chunks answer byte for byte as without a cache, on the miss and on the hits, in JSON and msgpack', async () => {
  const snapshot = await sampleSnapshot()
  const items = corpus()
  assert.ok(items.length > 2000, `${items.length} items`)
  const fresh: ScoringContext = { snapshot, cache: null }
  const cached: ScoringContext = { snapshot, cache: createShardCache(100_000) }
  for (const format of ['json', 'msgpack'] as const) {
    for (const signalDetails of kLevels) {
      const params: ChunkParams = { mode: 'bulk', format, scoringVersion: null, signalDetails, evidenceDetails: 'none' }
      const want = scoreBulkChunk(items, params, fresh)
      if (format === 'json' && signalDetails === 'all') {
        // The corpus holds listed indicators: signals with evidence go through the cache too.
        const listed = Buffer.from(want.body).toString().match(/"signal_count":[1-9]/g)?.length ?? 0
        assert.ok(listed > 20, `${listed} indicators with signals`)
      }
      for (let round = 0; round < 2; round++) {
        const got = scoreBulkChunk(items, params, cached)
        sameBytes(got.body, want.body, `${format} ${signalDetails} round ${round}`)
        assert.ok(Buffer.from(got.ends.buffer, got.ends.byteOffset, got.ends.byteLength).equals(Buffer.from(want.ends.buffer, want.ends.byteOffset, want.ends.byteLength)), 'item ends')
        sameBytes(got.history, want.history, `history ${format} ${signalDetails} round ${round}`)
        assert.equal(got.invalid, want.invalid)
      }
    }
  }
  // Everything valid was a hit after the first pass (format and level are not part of the key).
  const again = scoreBulkChunk(items, { mode: 'bulk', format: 'json', scoringVersion: null, signalDetails: 'none', evidenceDetails: 'none' }, cached)
  assert.equal(again.cacheHits, items.length - again.invalid)
})

test('entries hold the forms their callers asked for; a caller needing another assesses again, byte for byte', async () => {
  const snapshot = await sampleSnapshot()
  const items = corpus()
  const fresh: ScoringContext = { snapshot, cache: null }
  const cached: ScoringContext = { snapshot, cache: createShardCache(100_000) }
  const bulk = (format: 'json' | 'msgpack', signalDetails: SignalDetails): ChunkParams => ({ mode: 'bulk', format, scoringVersion: null, signalDetails, evidenceDetails: 'none' })
  const valid = items.length - scoreBulkChunk(items, bulk('json', 'none'), fresh).invalid
  // Indicators the corpus holds more than once hit from their first time in a chunk.
  const repeats = scoreBulkChunk(items, bulk('json', 'none'), { snapshot, cache: createShardCache(100_000) }).cacheHits
  const check = (params: ChunkParams, hits: number, what: string): void => {
    const want = scoreBulkChunk(items, params, fresh)
    const got = scoreBulkChunk(items, params, cached)
    sameBytes(got.body, want.body, what)
    sameBytes(got.history, want.history, `history ${what}`)
    assert.equal(got.cacheHits, hits, `cache hits ${what}`)
  }
  check(bulk('msgpack', 'none'), repeats, 'msgpack miss')
  check(bulk('msgpack', 'none'), valid, 'msgpack hit')
  // The entries hold no JSON form: a single call and a JSON bulk at `top` take them as misses and store whole ones.
  const single: ChunkParams = { mode: 'single', format: 'json', scoringVersion: null, signalDetails: 'all', evidenceDetails: 'full' }
  const one = items.find((i) => typeof i[1] === 'string' && i[1].includes('.')) as ChunkItem
  assert.equal(scoreSingle(one, single, cached).cacheHit, false)
  assert.deepEqual(scoreSingle(one, single, cached).verdict, scoreSingle(one, single, fresh).verdict)
  assert.equal(scoreSingle(one, single, cached).cacheHit, true)
  check(bulk('json', 'top'), repeats + 1, 'json top after msgpack')
  // The whole entries serve every caller; the first msgpack call packs their tail again.
  check(bulk('json', 'none'), valid, 'json none hit')
  check(bulk('msgpack', 'none'), valid, 'msgpack hit on whole entries')
  check(bulk('msgpack', 'all'), valid, 'msgpack all hit')

  // A JSON bulk at none stores the JSON tail only: msgpack callers pack it (hits), single calls and `top` assess again.
  const second: ScoringContext = { snapshot, cache: createShardCache(100_000) }
  const check2 = (params: ChunkParams, hits: number, what: string): void => {
    const got = scoreBulkChunk(items, params, second)
    sameBytes(got.body, scoreBulkChunk(items, params, fresh).body, what)
    assert.equal(got.cacheHits, hits, `cache hits ${what}`)
  }
  check2(bulk('json', 'none'), repeats, 'json miss')
  check2(bulk('json', 'none'), valid, 'json hit')
  assert.equal(scoreSingle(one, single, second).cacheHit, false)
  assert.equal(scoreSingle(one, single, second).cacheHit, true)
  check2(bulk('msgpack', 'none'), valid, 'msgpack hit on JSON tails')
  check2(bulk('msgpack', 'none'), valid, 'msgpack hit on packed tails')
  check2(bulk('json', 'all'), repeats + 1, 'json all after json none')
  check2(bulk('json', 'none'), valid, 'json none hit on whole entries')
})

test('single calls answer exactly as without a cache, and report the hit, at every detail level', async () => {
  const snapshot = await sampleSnapshot()
  const items = corpus().slice(0, 400)
  const fresh: ScoringContext = { snapshot, cache: null }
  const cached: ScoringContext = { snapshot, cache: createShardCache(1000) }
  for (const signalDetails of kLevels) {
    for (const evidenceDetails of kEvidence) {
      const params: ChunkParams = { mode: 'single', format: 'json', scoringVersion: null, signalDetails, evidenceDetails }
      for (const item of items) {
        const want = scoreSingle(item, params, fresh)
        const got = scoreSingle(item, params, cached)
        assert.deepEqual(got.verdict, want.verdict, `${String(item[1])} ${signalDetails}/${evidenceDetails}`)
        assert.equal(JSON.stringify(got.verdict), JSON.stringify(want.verdict))
        sameBytes(got.history, want.history, `history of ${String(item[1])}`)
        assert.equal(got.cacheHit, want.verdict !== null && (signalDetails !== 'none' || evidenceDetails !== 'none'))
      }
    }
  }
})

test('single calls answered from verdicts kept on the main thread are byte for byte the scored answers', async () => {
  const data = await sampleSnapshotData()
  const kept = new ScoringPool(data, { size: 0, cacheSize: 1000 })
  const plain = new ScoringPool(data, { size: 0, cacheSize: 0 })
  // Spellings of one indicator (defanged, other case, trailing dot) share a kept verdict and echo their own value.
  const values = [...corpus().slice(0, 150).map((x) => x[1]), '1.2.3[.]4', '1.2.3.4', 'EXAMPLE.com.', 'example.com', 'BÜCHER.de.', 'bücher.de', 'not an ip']
  let hits = 0
  for (const signalDetails of kLevels) {
    for (const evidenceDetails of kEvidence) {
      // Log-only fields change from round to round, so a kept history part made without them meets calls with them.
      for (let round = 0; round < 3; round++) {
        for (const [i, value] of values.entries()) {
          const item: ChunkItem = [i % 3 === 0 ? 'domain' : undefined, value, (i + round) % 2 === 0 ? 'block' : null, (i + round) % 4 === 0 ? 'edr' : null]
          for (const format of ['json', 'msgpack'] as const) {
            const params: ChunkParams = { mode: 'single', format, scoringVersion: null, signalDetails, evidenceDetails }
            const got = await kept.runSingle(item, params)
            const want = await plain.runSingle(item, params)
            if (got.cacheHit) hits++
            assert.equal(got.jsonOpen, want.jsonOpen, `${String(value)} ${format} ${signalDetails}/${evidenceDetails}`)
            assert.deepEqual(got.verdict, want.verdict)
            assert.deepEqual([got.type, got.category, got.errors, got.warnings], [want.type, want.category, want.errors, want.warnings])
            sameBytes(got.history, want.history, `history of ${String(value)}`)
          }
        }
      }
    }
  }
  assert.ok(hits > values.length * 9, `${hits} answers from kept verdicts`)
  // Spellings of one verdict in turn, without log-only fields: each records its own value, never the other's part.
  const params: ChunkParams = { mode: 'single', format: 'json', scoringVersion: null, signalDetails: 'top', evidenceDetails: 'summary' }
  for (const value of ['1.2.3[.]4', '1.2.3.4', '1.2.3[.]4', '1.2.3.4', 'EXAMPLE.com.', 'example.com', 'EXAMPLE.com.']) {
    const got = await kept.runSingle([undefined, value, null, null], params)
    const want = await plain.runSingle([undefined, value, null, null], params)
    assert.equal(got.cacheHit, true, value)
    sameBytes(got.history, want.history, `history of ${value} in turn`)
  }
  await kept.close()
  await plain.close()
})

test('a single call sending a kept value with its type as it normalizes answers as the scored call does', async () => {
  const data = await sampleSnapshotData()
  const kept = new ScoringPool(data, { size: 0, cacheSize: 1000 })
  const plain = new ScoringPool(data, { size: 0, cacheSize: 0 })
  // Each group: the canonical (type, value) first or later, other spellings, no type, a wrong type, another case of
  // the type, and values that normalize to themselves only under another type or with a warning.
  const groups: Array<Array<[unknown, string]>> = [
    [['ip', '198.51.100.7'], [undefined, '198.51.100.7'], ['ip', '198.51.100[.]7'], ['IP', '198.51.100.7'], ['domain', '198.51.100.7'], ['ip', '198.51.100.7']],
    [['domain', 'EXAMPLE.com.'], ['domain', 'example.com'], [undefined, 'example.com'], ['domain', 'example.com'], ['asn', 'example.com'], ['ip', 'example.com']],
    [['ip_block', '10.1.2.3/8'], ['ip_block', '10.0.0.0/8'], ['ip_block', '10.0.0.0/8'], [undefined, '10.0.0.0/8'], ['ip', '10.0.0.0/8']],
    [['asn', 'AS13335'], ['asn', '13335'], ['asn', 'AS13335'], ['asn', 'as13335'], [null, 'AS13335']],
    [['file_hash_sha256', 'A'.repeat(64)], ['file_hash_sha256', 'a'.repeat(64)], ['file_hash_sha256', 'a'.repeat(64)], [undefined, 'a'.repeat(64)]],
    [['ip', '2001:DB8::1'], ['ip', '2001:db8::1'], ['ip', '2001:db8::1'], ['ip', '2001:0db8::1']]
  ]
  let asSentHits = 0
  for (const signalDetails of kLevels) {
    for (const evidenceDetails of ['summary', 'none'] as const) {
      const params: ChunkParams = { mode: 'single', format: 'json', scoringVersion: null, signalDetails, evidenceDetails }
      for (let round = 0; round < 3; round++) {
        for (const group of groups) {
          for (const [j, [type, value]] of group.entries()) {
            const item: ChunkItem = [type, value, (j + round) % 3 === 0 ? 'block' : null, null]
            const got = await kept.runSingle(item, params)
            const want = await plain.runSingle(item, params)
            const name = `${String(type)} ${value} ${signalDetails}/${evidenceDetails} round ${round}`
            assert.equal(got.jsonOpen, want.jsonOpen, name)
            assert.deepEqual([got.type, got.category, got.errors, got.warnings], [want.type, want.category, want.errors, want.warnings], name)
            sameBytes(got.history, want.history, `history of ${name}`)
            if (round > 0 && got.cacheHit && type === want.type && want.warnings.length === 0 && want.jsonOpen?.includes(`"value":${JSON.stringify(value)},"normalized":${JSON.stringify(value)}`) === true) asSentHits++
          }
        }
      }
    }
  }
  assert.ok(asSentHits >= 2 * kLevels.length * 2 * 6, `${asSentHits} calls of canonical values answered from kept verdicts`)
  await kept.close()
  await plain.close()
})

function texts (n: number, pad = 0): VerdictTexts {
  return {
    head: `{"type":"ip","normalized":"10.0.${n >> 8 & 255}.${n & 255}","flags":[],"all_signals":[],`,
    risk: `{"score":${n % 101},"strength":"weak","category":"c${n}","evidence_saturation":"none"}`,
    scores: `{"signal_groups":{"g":{"n":${n}}},"signal_subgroups":{}}`,
    rest: `,"threat_context":{"n":${n},"pad":"${'x'.repeat(pad)}","name":"Telefónica ${n}"},"recommended_actions":[]`
  }
}

function expectVerdict (c: VerdictCache, key: string, n: number): boolean {
  const v = c.get(key)
  if (v === undefined) return false
  const t = texts(n, 0)
  assert.equal(v.riskJson(), t.risk)
  assert.equal(v.scoresJson(), t.scores)
  const tail = v.ring.toString('utf8', v.tailStart, v.tailEnd)
  assert.equal(tail.startsWith(`"risk":${t.risk},"signals":[],"signal_count":0,"scores":${t.scores},"threat_context":{"n":${n},`), true, tail)
  assert.equal(v.assessment().threat_context.n, n)
  return true
}

test('a full cache drops the oldest entries: they miss, and no lookup returns another key\'s verdict', () => {
  // Room for everything: 20,000 entries of ~300 bytes in a 100,000-verdict cache all hit, bar hash collisions.
  const large = new VerdictCache(100_000)
  for (let n = 0; n < 20_000; n++) large.set(`k|${n}`, texts(n))
  let hits = 0
  for (let n = 0; n < 20_000; n++) if (expectVerdict(large, `k|${n}`, n)) hits++
  assert.ok(hits > 19_990, `${hits} hits`)
  // 1,000 verdicts (LRU bound) in the 1 MiB minimum ring: only the newest stay.
  const small = new VerdictCache(1000)
  for (let n = 0; n < 20_000; n++) small.set(`k|${n}`, texts(n))
  hits = 0
  for (let n = 0; n < 20_000; n++) if (expectVerdict(small, `k|${n}`, n)) hits++
  assert.ok(hits > 900 && hits <= 1000, `${hits} hits`)
  assert.equal(expectVerdict(small, 'k|19999', 19999), true)
  assert.equal(small.get('k|0'), undefined)
  assert.ok(small.entries <= 1000, `${small.entries} entries`)
  // 1,365 verdicts of index in the 1 MiB minimum ring, with entries of ~900 bytes: the ring's byte bound decides.
  const ring = new VerdictCache(1365)
  for (let n = 0; n < 20_000; n++) ring.set(`k|${n}`, texts(n, 600))
  hits = 0
  for (let n = 0; n < 20_000; n++) if (expectVerdict(ring, `k|${n}`, n)) hits++
  assert.ok(hits > 500 && hits < 1365, `${hits} hits`)
})

test('entries of varied sizes wrapping the ring never read torn or foreign bytes (against a reference map)', () => {
  const c = new VerdictCache(500) // 1 MiB ring
  const stored = new Map<string, number>()
  let seed = 7
  const rnd = (): number => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed / 0x7fffffff }
  for (let i = 0; i < 30_000; i++) {
    const n = Math.floor(rnd() * 3000)
    const key = `k|${n}`
    if (rnd() < 0.5) {
      c.set(key, texts(n, Math.floor(rnd() * 4000)))
      stored.set(key, n)
    } else {
      const v = c.get(key)
      if (v !== undefined) {
        assert.equal(stored.get(key), n)
        assert.equal(v.assessment().threat_context.n, n)
        assert.equal(v.riskJson(), texts(n).risk)
      }
    }
  }
})

test('two keys with the same index hash: the later replaces the earlier, which then misses', () => {
  // Two keys of the cache's key shape whose 30-bit index hashes collide.
  const seen = new Map<number, string>()
  let a = ''
  let b = ''
  for (let i = 0; a === ''; i++) {
    const k = `v|2026-11|domain|host${i}.example`
    const h = hash30(k)
    const other = seen.get(h)
    if (other !== undefined) { a = other; b = k } else seen.set(h, k)
  }
  const c = new VerdictCache(1000)
  c.set(a, texts(1))
  assert.equal(expectVerdict(c, a, 1), true)
  c.set(b, texts(2))
  assert.equal(c.get(a), undefined, 'the replaced key misses')
  assert.equal(expectVerdict(c, b, 2), true, 'a lookup of the replaced key leaves the other in place')
  assert.equal(c.entries, 1)
})

test('a verdict that keeps being hit survives writes of many times the ring, and the LRU bound evicts the idle', () => {
  const c = new VerdictCache(100) // 1 MiB ring, 100 verdicts
  c.set('hot', texts(5))
  for (let n = 0; n < 50_000; n++) {
    c.set(`cold|${n}`, texts(n, 200))
    if (n % 50 === 0) assert.equal(expectVerdict(c, 'hot', 5), true, `hot entry lost after ${n} writes`)
  }
  assert.ok(c.entries <= 100, `${c.entries} entries`)
  assert.equal(c.get('cold|0'), undefined)
})

test('an entry too large for the ring is not cached, and the chunk scorer still answers it', () => {
  const c = new VerdictCache(10)
  assert.equal(c.set('big', texts(1, 200_000)), null)
  assert.equal(c.get('big'), undefined)
  assert.equal(c.entries, 0)
})

test('keys and texts outside ASCII are stored and compared by their UTF-8 bytes', () => {
  const c = new VerdictCache(10)
  const t = texts(3)
  c.set('ключ|bücher', { ...t, risk: t.risk.replace('"c3"', '"ç3"'), scores: t.scores.replace('"g"', '"ğ"') })
  assert.equal(c.get('ключ|bucher'), undefined)
  const v = c.get('ключ|bücher')
  assert.ok(v !== undefined, 'stored under its own key')
  assert.equal(v.riskJson(), t.risk.replace('"c3"', '"ç3"'))
  assert.equal(v.scoresJson(), t.scores.replace('"g"', '"ğ"'))
  assert.equal(v.assessment().normalized, '10.0.0.3')
  assert.deepEqual(v.assessment().risk, { score: 3, strength: 'weak', category: 'ç3', evidence_saturation: 'none' })
})

test('facets: one number per risk and scores pair, by identity when frozen and by text otherwise, none past the bound', () => {
  const f = new Facets(2)
  const risk = Object.freeze({ score: 50, strength: 'weak', category: 'unknown', evidence_saturation: 'none' })
  const scores = Object.freeze({ signal_groups: Object.freeze({}), signal_subgroups: Object.freeze({}) })
  const a = { risk, scores } as unknown as Assessment
  const rj = JSON.stringify(risk)
  const sj = JSON.stringify(scores)
  const first = f.of(a.risk, a.scores, rj, sj)
  assert.ok(first !== null)
  assert.equal(first.id, 0)
  assert.equal(first.category, 'unknown')
  assert.equal(first.members, verdictMembers(rj, sj, []))
  assert.equal(first.tail, itemTail(first.members, null, null))
  // The same texts from objects that are not frozen: the same facet.
  assert.equal(f.of({ ...risk }, { ...scores }, rj, sj), first)
  const other = { risk: { ...risk, score: 90, category: 'malware' }, scores } as unknown as Assessment
  const second = f.of(other.risk, other.scores, JSON.stringify(other.risk), sj)
  assert.equal(second?.id, 1)
  assert.equal(f.byId(1), second)
  const third = { risk: { ...risk, score: 91 }, scores } as unknown as Assessment
  assert.equal(f.of(third.risk, third.scores, JSON.stringify(third.risk), sj), null, 'the table is full')
  assert.equal(f.of(a.risk, a.scores, rj, sj), first, 'known pairs are still found')
  assert.equal(f.byId(kNoFacet), undefined)
  // A cache entry keeps its facet number.
  const c = new VerdictCache(10)
  c.set('k', { ...texts(1), facet: 1 })
  assert.equal(c.get('k')?.facet, 1)
  c.set('k2', texts(2))
  assert.equal(c.get('k2')?.facet, kNoFacet)
})

test('the index LRU keeps exactly what a reference LRU keeps, through sets, hits, deletes and evictions', () => {
  for (const max of [1, 2, 7, 100, 1000]) {
    const lru = new IntLru(max)
    const ref = new Map<number, number>() // insertion order = recency order, oldest first
    let seed = max
    const rnd = (n: number): number => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % n }
    // Keys from a small range collide in the table's probe runs; some are large 30-bit hashes.
    const key = (): number => rnd(4) === 0 ? (rnd(1 << 30) | 0) : rnd(max * 3)
    for (let i = 0; i < 40_000; i++) {
      const k = key()
      const op = rnd(10)
      if (op < 5) {
        const v = rnd(1 << 29)
        lru.set(k, v)
        ref.delete(k)
        ref.set(k, v)
        if (ref.size > max) ref.delete(ref.keys().next().value as number)
      } else if (op < 9) {
        const want = ref.get(k)
        assert.equal(lru.get(k), want ?? -1, `get ${k} (max ${max}, op ${i})`)
        if (want !== undefined) {
          ref.delete(k)
          ref.set(k, want)
        }
      } else {
        assert.equal(lru.delete(k), ref.delete(k))
      }
      assert.equal(lru.size, ref.size)
    }
    for (const [k, v] of ref) assert.equal(lru.get(k), v)
  }
})

test('a key given as a head and a rest is the key they spell, ASCII or not, and misses for any other', () => {
  const c = new VerdictCache(100)
  const t = texts(4)
  c.set('v|p|domain|', t, hash30('v|p|domain|', 'bücher.de'), 'bücher.de')
  c.set('v|p|ip|', t, hash30('v|p|ip|', '10.0.0.4'), '10.0.0.4')
  assert.equal(hash30('v|p|ip|', '10.0.0.4'), hash30('v|p|ip|10.0.0.4'))
  assert.equal(c.get('v|p|ip|10.0.0.4')?.riskJson(), t.risk, 'the whole key finds it')
  assert.equal(c.get('v|p|ip|10', hash30('v|p|ip|10', '.0.0.4'), '.0.0.4')?.riskJson(), t.risk, 'another split of the same key')
  assert.equal(c.get('v|p|domain|', hash30('v|p|domain|', 'bücher.de'), 'bücher.de')?.riskJson(), t.risk)
  for (const [head, rest] of [['v|p|ip|', '10.0.0.40'], ['v|p|ip|', '10.0.0.'], ['v|p|domain|', 'bucher.de'], ['v|p|domain|', 'bücher.d']]) {
    assert.equal(c.get(head as string, hash30(head as string, rest), rest), undefined, `${head}${rest}`)
  }
})

test('hash() of a head and a rest is hash30 of the two, with heads past the ones it keeps; keys of any text round-trip', () => {
  const c = new VerdictCache(1000)
  const t = texts(5)
  const rests = ['10.0.0.4', 'bücher.de', 'x\u{1f600}.example', 'lone\ud800.example', '', 'a'.repeat(300)]
  for (let round = 0; round < 2; round++) {
    for (let i = 0; i < 600; i++) {
      const head = `v${i}|p|${i % 2 === 0 ? 'ip' : 'dömain'}|`
      for (const rest of rests) assert.equal(c.hash(head, rest), hash30(head, rest), `${head}${rest}`)
    }
  }
  // A lone surrogate is stored as U+FFFD, so its key never matches again: a miss, never another key's verdict.
  const stored = rests.filter((r) => !r.includes('\ud800'))
  for (const rest of stored) {
    const head = 'v|p|domain|'
    c.setTail(head, c.hash(head, rest), Buffer.from(`${kRiskPrefix}{"score":1}${kScoresPrefix}{"a":1}`), 0, kRiskPrefix.length + 11, kRiskPrefix.length + 11 + kScoresPrefix.length + 7, kRiskPrefix.length + 11 + kScoresPrefix.length + 7, 0, rest)
    c.set('v|p|ip|', t, c.hash('v|p|ip|', rest), rest)
  }
  for (const rest of stored) {
    assert.equal(c.get('v|p|domain|', c.hash('v|p|domain|', rest), rest)?.riskJson(), '{"score":1}', `tail of ${JSON.stringify(rest)}`)
    assert.equal(c.get('v|p|ip|', hash30('v|p|ip|', rest), rest)?.riskJson(), t.risk, `entry of ${JSON.stringify(rest)}`)
    assert.equal(c.get(`v|p|ip|${rest}`)?.riskJson(), t.risk, `whole key of ${JSON.stringify(rest)}`)
  }
})

test('a tail stored with its item head keeps the head before it, through moves, and only as a canonical entry', () => {
  const c = new VerdictCache(100) // 1 MiB ring
  const head = '{"indicator":{"type":"ip","value":"192.0.2.7","normalized":"192.0.2.7"},'
  const tail = `${kRiskPrefix}{"score":1}${kScoresPrefix}{"a":1}`
  const src = Buffer.from(`xx${head}${tail}`)
  const start = 2 + head.length
  const riskEnd = start + kRiskPrefix.length + 11
  const scoresEnd = riskEnd + kScoresPrefix.length + 7
  const key = 'v|p|ip|'
  const item = (rest: string): string | null => {
    const v = c.get(key, c.hash(key, rest), rest)
    assert.ok(v !== undefined, rest)
    return v.itemStart < 0 ? null : v.ring.toString('latin1', v.itemStart, v.tailEnd + 1)
  }
  // Canonical with a head; canonical without one (an empty head); not canonical (a head given is not kept).
  assert.equal(c.setTail(key, c.hash(key, 'a'), src, start, riskEnd, scoresEnd, src.length, kNoFacet, 'a', true, 2), true)
  assert.equal(c.setTail(key, c.hash(key, 'b'), src, start, riskEnd, scoresEnd, src.length, kNoFacet, 'b', true), true)
  assert.equal(c.setTail(key, c.hash(key, 'c'), src, start, riskEnd, scoresEnd, src.length, kNoFacet, 'c', false, 2), true)
  assert.equal(item('a'), `${head}${tail}}`)
  assert.equal(item('b'), null)
  assert.equal(item('c'), null)
  const a = c.get(key, c.hash(key, 'a'), 'a')
  assert.ok(a?.canonical === true && a.hasTail && !a.hasAssessment)
  assert.equal(a.riskJson(), '{"score":1}')
  assert.equal(a.scoresJson(), '{"a":1}')
  assert.equal(c.get(key, c.hash(key, 'c'), 'c')?.canonical, false)
  // Writes of many times the ring, 'a' hit now and then: each hit in the older half copies it to the head, head and all.
  for (let n = 0; n < 5000; n++) {
    c.set(`cold|${n}`, texts(n, 200))
    if (n % 50 === 0) assert.equal(item('a'), `${head}${tail}}`, `after ${n} writes`)
  }
  // Stored again whole (another caller's form), it holds the assessment's head there instead: no item head.
  c.set(`${key}a`, texts(3))
  assert.equal(item('a'), null)
})
