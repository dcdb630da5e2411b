/**
 * Incremental rebuilds: every source's compiled part is kept in the cache directory, so a compile after one feed
 * changed parses that feed alone, and its snapshot is byte for byte the one a full compile gives.
 */
import assert from 'node:assert/strict'
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test, type TestContext } from 'node:test'
import { DEFAULT_PROFILE, score, Snapshot, type SnapshotData } from '../../src/engine/index.ts'
import { compile, loadManifest, loadSnapshot, type LoadResult } from '../../src/intel/index.ts'
import { PartBuilder, readPartFile, writePartFile } from '../../src/intel/source-part.ts'

const kNow = new Date('2026-11-20T00:00:00Z')

async function tempDir (t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'ioc-incremental-'))
  t.after(async () => { await rm(dir, { recursive: true, force: true }) })
  return dir
}

/** A manifest of two feeds in `dir`: a small netset (`small.netset`) and a domain list (`big.txt`). */
async function twoFeeds (dir: string): Promise<string> {
  const big: string[] = ['# a list of generated names']
  for (let i = 0; i < 20_000; i++) big.push(`name${i.toString(36)}.example${i % 13}.net`)
  await writeFile(join(dir, 'big.txt'), big.join('\n') + '\n')
  await writeFile(join(dir, 'small.netset'), '# small\n192.0.2.1\n198.51.100.0/24\n')
  const feed = (name: string, format: string, path: string): object => ({
    name, format, path, direction: 'malicious', group: 'threat_feed', subgroup: 'attack_source', category: 'abuse', confidence: 0.7, half_life_days: 7
  })
  const manifest = join(dir, 'manifest.json')
  await writeFile(manifest, JSON.stringify({ feeds: [feed('small', 'netset', 'small.netset'), feed('big', 'plain', 'big.txt')] }))
  return manifest
}

/** Names each source got into the build by: parsed or reused. */
function how (r: LoadResult): { parsed: string[], reused: string[] } {
  const sources = r.build?.sources ?? []
  return { parsed: sources.filter((s) => s.parsed).map((s) => s.name), reused: sources.filter((s) => !s.parsed).map((s) => s.name) }
}

/** Everything of a snapshot but its input key and version (those digest the compiler's inputs, not its output). */
function content (data: SnapshotData): { header: string, bytes: Buffer } {
  const { inputKey: _k, version: _v, ...header } = data.header
  return { header: JSON.stringify(header), bytes: Buffer.from(data.buffer) }
}

/** Whether a verdict on `value` cites the feed `name`. */
function cites (data: SnapshotData, value: string, name: string): boolean {
  const verdict = JSON.stringify(score(value, undefined, { profile: DEFAULT_PROFILE, signalDetails: 'all', evidenceDetails: 'full' }, new Snapshot(data)))
  return verdict.includes(`"${name}"`)
}

test('after one feed changes, a rebuild parses that feed alone and equals a full compile byte for byte', async (t) => {
  const dir = await tempDir(t)
  const cacheDir = join(dir, 'cache')
  const manifest = await twoFeeds(dir)
  const cold = await loadSnapshot({ feeds: await loadManifest(manifest), cacheDir, now: kNow })
  assert.equal(cold.warm, false)
  assert.ok(how(cold).parsed.includes('small') && how(cold).parsed.includes('big'), 'the first compile parses both feeds')

  await writeFile(join(dir, 'small.netset'), '# small, changed\n192.0.2.1\n192.0.2.77\n203.0.113.0/24\n')
  const feeds = await loadManifest(manifest)
  const next = await loadSnapshot({ feeds, cacheDir, now: kNow })
  assert.equal(next.warm, false)
  assert.deepEqual(how(next).parsed, ['small'])
  assert.ok(how(next).reused.includes('big'))
  assert.ok(how(next).reused.includes('asn') && how(next).reused.includes('country') && how(next).reused.includes('eth-phishing-detect'))
  assert.equal(next.build?.parsed, 1)

  const full = await compile({ feeds, now: kNow })
  assert.equal(full.report.parsed, full.report.sources.length, 'without a parts folder every source is parsed')
  assert.deepEqual(content(next.data), content(full.data))
  const small = next.data.header.sources.find((s) => s.name === 'small')
  assert.equal(small?.indexed, 3)
  assert.equal(next.data.header.sources.find((s) => s.name === 'big')?.indexed, 20_000)
  assert.ok(cites(next.data, '192.0.2.77', 'small'), 'the changed feed\'s new entry is listed')
  assert.ok(!cites(cold.data, '192.0.2.77', 'small'))
  assert.ok(cites(next.data, 'name0.example0.net', 'big'), 'the reused feed\'s entries are still listed')
})

test('a forced build parses every source again; a damaged part is parsed again and replaced', async (t) => {
  const dir = await tempDir(t)
  const cacheDir = join(dir, 'cache')
  const manifest = await twoFeeds(dir)
  const feeds = await loadManifest(manifest)
  const first = await loadSnapshot({ feeds, cacheDir, now: kNow })
  const forced = await loadSnapshot({ feeds, cacheDir, now: kNow, force: true })
  assert.equal(forced.warm, false)
  assert.deepEqual(how(forced).reused, [])
  assert.deepEqual(content(forced.data), content(first.data))

  const parts = join(cacheDir, 'parts')
  const big = (await readdir(parts)).find((f) => f.startsWith('feed.big.'))
  assert.ok(big !== undefined, 'the big feed has a part file')
  await writeFile(join(parts, big), 'not a part')
  await writeFile(join(dir, 'small.netset'), '192.0.2.2\n')
  const again = await loadSnapshot({ feeds, cacheDir, now: kNow })
  assert.deepEqual(how(again).parsed.sort(), ['big', 'small'])
  assert.deepEqual(content(again.data), content((await compile({ feeds, now: kNow })).data))
  const reread = await loadSnapshot({ feeds, cacheDir, now: kNow, force: false })
  assert.equal(reread.warm, true, 'the snapshot was cached under its key')
})

test('a superseded part is deleted and the parts of unchanged sources are kept', async (t) => {
  const dir = await tempDir(t)
  const cacheDir = join(dir, 'cache')
  const manifest = await twoFeeds(dir)
  await loadSnapshot({ feeds: await loadManifest(manifest), cacheDir, now: kNow })
  const parts = join(cacheDir, 'parts')
  const before = await readdir(parts)
  await writeFile(join(dir, 'small.netset'), '192.0.2.3\n')
  await loadSnapshot({ feeds: await loadManifest(manifest), cacheDir, now: kNow })
  const after = await readdir(parts)
  assert.equal(after.filter((f) => f.startsWith('feed.small.')).length, 1, 'one part for the small feed')
  assert.ok(!after.includes(before.find((f) => f.startsWith('feed.small.')) as string), 'its old part is gone')
  assert.equal(after.find((f) => f.startsWith('feed.big.')), before.find((f) => f.startsWith('feed.big.')))
  assert.equal(after.filter((f) => f.startsWith('builtin.')).length, before.filter((f) => f.startsWith('builtin.')).length)
})

test('part files round-trip, and a truncated or foreign part file is refused', async (t) => {
  const dir = await tempDir(t)
  const builder = new PartBuilder(4)
  builder.add('domain', 'a.example', 1, Date.UTC(2025, 0, 2), undefined, 'Family A')
  builder.add('domain', 'A.example.', 2, Date.UTC(2024, 0, 1), Date.UTC(2025, 5, 1), 'Family B')
  builder.add('ip', '192.0.2.9', 3, 1e20, undefined, undefined)
  builder.add(null, 'not a value!', 4)
  builder.add('ip_block', '2001:db8::/32', 5)
  for (let i = 0; i < 40; i++) builder.add('domain', `n${i}.example`, 6 + i)
  const part = builder.finish({ rejected: [{ line: 9, reason: 'loader said no' }], lines: 50 })
  assert.equal(part.count, 43)
  assert.deepEqual(part.labels, ['Family A', 'Family B'])
  assert.equal(part.label[0], 1, 'a repeated key keeps its first label')
  assert.equal(part.first[0], Math.floor(Date.UTC(2024, 0, 1) / 86_400_000) + 1, 'and the widest seen-window')
  assert.equal(part.last[0], Math.floor(Date.UTC(2025, 5, 1) / 86_400_000) + 1)
  assert.equal(part.first[1], (Math.floor(1e20 / 86_400_000) + 1) % 2 ** 32, 'a day past int32 wraps as the snapshot stores it')
  assert.equal(part.rejected, 2)
  assert.deepEqual(part.rejectedSamples.map((r) => r.line), [9, 4])
  assert.deepEqual([part.v4Prefixes, part.v6Prefixes], [[32], [32]])
  assert.ok(part.net4 !== null)
  const path = join(dir, 'x.part')
  await writePartFile(path, part)
  const back = await readPartFile(path)
  assert.deepEqual({ ...back, keys: [...back.keys], first: [...back.first], last: [...back.last], label: [...back.label], net4: [...back.net4 ?? []] },
    { ...part, keys: [...part.keys], first: [...part.first], last: [...part.last], label: [...part.label], net4: [...part.net4] })
  const bytes = await readFile(path)
  await writeFile(path, bytes.subarray(0, bytes.length - 8))
  await assert.rejects(readPartFile(path), /truncated|inconsistent/)
  await writeFile(path, Buffer.concat([Buffer.from('IOCVSNP1'), bytes.subarray(8)]))
  await assert.rejects(readPartFile(path), /not a section file/)
})
