/**
 * The retro-hunt's pure steps: the snapshot diff (which keys a new snapshot raises, and why), the matching of stored
 * items against it (exact, parent domain, containing network), and the part reader that gives items' types and
 * normalized forms.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { Snapshot } from '../../src/engine/index.ts'
import { raisedKeys } from '../../src/engine/snapshot/diff.ts'
import { hashString, KeyTag } from '../../src/engine/snapshot/hash.ts'
import { HistoryItems, PartView, partStrings, kStride } from '../../src/history/block.ts'
import { RetroMatcher, type RetroCandidate } from '../../src/history/retro-scan.ts'
import { compileSnapshot, loadManifest } from '../../src/intel/index.ts'
import { smallRegistries } from '../helper.ts'

const kNow = new Date('2026-11-01T00:00:00Z')
let dir = ''
let prev: Snapshot
let next: Snapshot

function feed (name: string, direction: string, confidence: number): Record<string, unknown> {
  return { name, format: 'plain', path: `${name}.txt`, direction, group: direction === 'safe' ? 'reputation' : 'threat_feed', subgroup: direction === 'safe' ? 'allowlist' : 'malware_distribution', category: direction === 'safe' ? 'benign' : 'malware', confidence, half_life_days: 0 }
}

async function compile (files: Record<string, string>, feeds: Array<Record<string, unknown>>): Promise<Snapshot> {
  const d = mkdtempSync(join(dir, 'v-'))
  for (const [name, body] of Object.entries(files)) writeFileSync(join(d, `${name}.txt`), body)
  writeFileSync(join(d, 'manifest.json'), JSON.stringify({ feeds }))
  const r = smallRegistries()
  return new Snapshot(await compileSnapshot({ feeds: await loadManifest(join(d, 'manifest.json')), now: kNow, asnDir: r.IOC_ASN_DIR, countryDir: r.IOC_COUNTRY_DIR }))
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ioc-retro-scan-'))
  prev = await compile(
    { mal: 'a.example\nb.example\n', safe: 'good.example\n' },
    [feed('mal', 'malicious', 0.6), feed('safe', 'safe', 0.9)])
  next = await compile(
    { mal: 'a.example\nb.example\nc.example\n203.0.113.0/24\n', other: 'b.example\n', safe: '' },
    [feed('mal', 'malicious', 0.6), feed('other', 'malicious', 0.8), feed('safe', 'safe', 0.9)])
})

after(() => { rmSync(dir, { recursive: true, force: true }) })

function causeOf (keys: ReturnType<typeof raisedKeys>, domain: string): { kind: string, source: string } | null {
  const pair = hashString(KeyTag.domain, domain, { h1: 0, h2: 0 })
  const i = keys.find(pair.h1, pair.h2)
  if (i < 0) return null
  const c = keys.cause(i)
  return { kind: c.kind, source: c.source }
}

test('the diff raises new listings and removed safe entries, and leaves unchanged listings out', () => {
  const keys = raisedKeys(prev, next)
  assert.deepEqual(causeOf(keys, 'c.example'), { kind: 'listed', source: 'mal' })
  assert.deepEqual(causeOf(keys, 'b.example'), { kind: 'listed', source: 'other' })
  assert.deepEqual(causeOf(keys, 'good.example'), { kind: 'unlisted_safe', source: 'safe' })
  assert.equal(causeOf(keys, 'a.example'), null)
  // Built-in lists are the same in both: none of their keys is raised.
  assert.equal(keys.size, 4, 'c.example, b.example, good.example and the block')
  assert.equal(keys.dropped, 0)
})

test('a stronger listing of the same source is raised as such', async () => {
  const stronger = await compile({ mal: 'a.example\nb.example\n', safe: 'good.example\n' }, [feed('mal', 'malicious', 0.9), feed('safe', 'safe', 0.9)])
  const keys = raisedKeys(prev, stronger)
  assert.deepEqual(causeOf(keys, 'a.example'), { kind: 'stronger', source: 'mal' })
  assert.equal(causeOf(keys, 'good.example'), null)
})

test('without an old snapshot every malicious listing is raised, and no safe one', () => {
  const keys = raisedKeys(null, next)
  assert.deepEqual(causeOf(keys, 'a.example'), { kind: 'listed', source: 'mal' })
  assert.equal(causeOf(keys, 'good.example'), null)
})

test('the raised set keeps at most its bound and counts the rest', () => {
  const keys = raisedKeys(prev, next, 2)
  assert.equal(keys.size, 2)
  assert.equal(keys.dropped, 2)
})

test('items are matched exactly, under a listed parent domain and inside a listed block', () => {
  const m = new RetroMatcher(raisedKeys(prev, next), next)
  const of = (type: string | null, value: string | null): Array<Omit<RetroCandidate, 'key'>> => {
    const out: RetroCandidate[] = []
    m.candidates(type, value, out)
    // The same read where the value lies inside a part's text.
    const within: RetroCandidate[] = []
    const text = `x.y${value ?? ''}.z`
    m.candidatesIn(type, text, value === null ? -1 : 3, 3 + (value ?? '').length, within)
    assert.deepEqual(within, out)
    return out.map(({ match, listed }) => ({ match, listed }))
  }
  assert.deepEqual(of('domain', 'c.example'), [{ match: 'exact', listed: 'c.example' }])
  assert.deepEqual(of('domain', 'x.y.c.example'), [{ match: 'parent_domain', listed: 'c.example' }])
  assert.deepEqual(of('domain', 'a.example'), [])
  assert.deepEqual(of('domain', 'example'), [])
  assert.deepEqual(of('ip', '203.0.113.9'), [{ match: 'containing_network', listed: '203.0.113.0/24' }])
  assert.deepEqual(of('ip_block', '203.0.113.128/25'), [{ match: 'containing_network', listed: '203.0.113.0/24' }])
  assert.deepEqual(of('ip_block', '203.0.113.0/24'), [{ match: 'exact', listed: '203.0.113.0/24' }])
  assert.deepEqual(of('ip', '198.51.100.1'), [])
  assert.deepEqual(of(null, 'c.example'), [], 'an invalid item (no type) is never matched')
  assert.deepEqual(of('domain', null), [])
})

test('a PartView gives each item\'s type, normalized form and fragment, as partStrings does', () => {
  const items = new HistoryItems(4)
  items.addVerdict('domain', 'Evil.Example', 'evil.example', '"risk":{"score":50}')
  items.addVerdict('ip', '10.0.0.1', '10.0.0.1', '"risk":{"score":60}')
  items.add(null, 'garbage', null, '"indicator":{"type":null,"value":"garbage","normalized":null},"risk":null')
  items.addVerdict('domain', 'b\u00fccher.example', 'xn--bcher-kva.example', '"risk":{"score":50}')
  const part = items.encode()
  const full = partStrings(part)
  const view = new PartView(part)
  assert.equal(view.count, 4)
  for (let i = 0; i < view.count; i++) {
    assert.equal(view.type(i), full[i * kStride] ?? null)
    assert.equal(view.normalized(i), full[i * kStride + 2] ?? null)
    assert.equal(view.fragment(i), full[i * kStride + 3])
  }
  assert.deepEqual([view.type(2), view.normalized(2), view.normalized(3)], [null, null, 'xn--bcher-kva.example'])
})
