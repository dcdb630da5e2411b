/**
 * Golden answers: the bytes of every scoring profile's answers, pinned. A change of member order, of a number's
 * rounding or of a text reaches these files, so it is a decision made in a diff, never an accident of a refactor.
 *
 * Per profile version, test/fixtures/golden/<version>.txt holds the single verdict (signal_details all, evidence_details
 * full) of each indicator of kNamed as a JSON line, and the SHA-256 of the bulk answer bytes and history part of a
 * 3,000-indicator mixed corpus for each format and signal detail level. The snapshot is the sample feeds compiled as of
 * a fixed day, so decay does not move with the calendar. After a deliberate change of the answers:
 *
 *   UPDATE_GOLDEN=1 node --import tsx --test test/pool/golden-answers.test.ts
 */
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { mixedCorpus } from '../../bench/corpus.ts'
import { PROFILES, Snapshot } from '../../src/engine/index.ts'
import { compileSnapshot, loadManifest } from '../../src/intel/index.ts'
import { createShardCache, scoreBulkChunk, scoreSingle, type ChunkItem, type ChunkParams, type ScoringContext } from '../../src/pool/score-chunk.ts'
import { kSampleManifest } from '../helper.ts'

const kDir = join(import.meta.dirname, '..', 'fixtures', 'golden')
const kUpdate = process.env.UPDATE_GOLDEN === '1'

/** Indicators that reach every kind of evidence of the built-in data and the sample feeds. */
const kNamed: ChunkItem[] = [
  '198.51.100.23', '203.0.113.9', '203.0.113.77', '192.0.2.44', '10.0.0.1', '127.0.0.1', '169.254.1.1', 'fe80::1', '::1',
  '8.8.8.8', '1.1.1.1', '9.9.9.9', '2001:4860:4860::8888', '2606:4700:4700::1111', '104.16.0.1', '192.0.0.9', '198.18.0.1',
  '240.0.0.1', '52.95.110.1', '35.190.0.1', '45.137.21.10', '5.6.7.8', '2001:db8:bad::10', '1.2.3[.]4',
  '1.0.0.0/24', '1.0.0.0/8', '203.0.113.0/24', '203.0.113.128/25', '198.51.100.64/26', '10.0.0.0/8', '0.0.0.0/0', '::/0',
  'AS64511', 'AS13335', 'AS15169', 'AS16509', 'AS112', 'AS64500', 'AS0', 'AS4294967295', 'AS23456', 'AS399999',
  'cegelecinfo.fr', 'malware-c2.example', 'payload-drop.test', 'cdn.xiaoduoai.com', 'ct3-24.ru', 'dns.google', 'one.one.one.one',
  'mailinator.com', 'someone.github.io', 'qx7zk2vb9wrt4m.com', 'xn--80ak6aa92e.com', 'goog1e.com', 'faceb00k.com', 'g00gle.co.uk',
  'google.com', 'www.google.com', 'mail.google.com', 'wikipedia.org', 'bücher.de', 'EXAMPLE.com.', 'example[.]com',
  'xn--metamsk-en4c.io', 'login.xn--pple-43d.com', 'hxxp://evil[.]example/x', 'unlisted-name.example',
  '275a021bbfb6489e54d471899f7db9d1663fc695ec2fe2a2c4538aabf651fd0f', 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
  '0000000000000000000000000000000000000000000000000000000000000001'
].map((v) => [undefined, v, null, null])

/** The sample feeds compiled as of 2025-10-26, two days after their newest listings. */
async function goldenSnapshot (): Promise<Snapshot> {
  return new Snapshot(await compileSnapshot({ feeds: await loadManifest(kSampleManifest), now: new Date('2025-10-26T00:00:00Z') }))
}

function sha256 (bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex')
}

/** The golden text of one profile: a line per named verdict, then a digest line per format and signal detail level. */
function goldenText (snapshot: Snapshot, version: string): string {
  const lines: string[] = []
  const fresh: ScoringContext = { snapshot, cache: null }
  const single: ChunkParams = { mode: 'single', format: 'json', scoringVersion: version, signalDetails: 'all', evidenceDetails: 'full' }
  for (const item of kNamed) {
    const out = scoreSingle(item, single, fresh)
    lines.push(JSON.stringify(out.verdict ?? { errors: out.errors }))
  }
  const corpus: ChunkItem[] = mixedCorpus(3000, 4242).map((x, i) => [x.type, x.value, i % 7 === 0 ? 'block' : null, i % 11 === 0 ? 'edr' : null])
  for (const format of ['json', 'msgpack'] as const) {
    for (const signalDetails of ['none', 'top', 'all'] as const) {
      const out = scoreBulkChunk(corpus, { mode: 'bulk', format, scoringVersion: version, signalDetails, evidenceDetails: 'none' }, fresh)
      lines.push(`bulk ${format} ${signalDetails}: body ${sha256(out.body)} history ${sha256(out.history)}`)
    }
  }
  return lines.join('\n') + '\n'
}

test('every profile answers the pinned golden bytes, single and bulk, in JSON and MessagePack, cached or not', async () => {
  const snapshot = await goldenSnapshot()
  if (kUpdate) mkdirSync(kDir, { recursive: true })
  for (const profile of PROFILES) {
    const file = join(kDir, `${profile.version}.txt`)
    const got = goldenText(snapshot, profile.version)
    if (kUpdate) {
      writeFileSync(file, got)
      continue
    }
    const want = readFileSync(file, 'utf8')
    const gotLines = got.split('\n')
    const wantLines = want.split('\n')
    for (let i = 0; i < Math.max(gotLines.length, wantLines.length); i++) {
      assert.equal(gotLines[i], wantLines[i], `${profile.version}, line ${i + 1}`)
    }
  }
  // The same bytes when the verdicts come from a cache (filled by the first pass, hit by the second).
  const cached: ScoringContext = { snapshot, cache: createShardCache(50_000) }
  const fresh: ScoringContext = { snapshot, cache: null }
  const corpus: ChunkItem[] = mixedCorpus(1500, 99).map((x) => [x.type, x.value, null, null])
  for (const profile of PROFILES) {
    for (const format of ['json', 'msgpack'] as const) {
      for (const signalDetails of ['none', 'top', 'all'] as const) {
        const params: ChunkParams = { mode: 'bulk', format, scoringVersion: profile.version, signalDetails, evidenceDetails: 'none' }
        const want = sha256(scoreBulkChunk(corpus, params, fresh).body)
        for (let round = 0; round < 2; round++) assert.equal(sha256(scoreBulkChunk(corpus, params, cached).body), want, `${profile.version} ${format} ${signalDetails} round ${round}`)
      }
    }
  }
})
