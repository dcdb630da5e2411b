/**
 * Known-good measurement: how many hosts and addresses that are known to be legitimate score above neutral (50), or
 * at 70 and more, with the default profile on the default data (built-in lists plus the sample feeds). The sets in
 * test/fixtures/known-good/ come from sources the engine does not use as lists (README.md there).
 *
 *   npm run bench:known-good            (prints a table; writes bench/results/known-good.json)
 *
 * test/engine/known-good-sets.test.ts holds every set to <= 0.5% above neutral and none at 70 or more.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { DEFAULT_PROFILE, score, type ScoringProfile, type Snapshot } from '../src/engine/index.ts'

const kRoot = join(import.meta.dirname, '..')
/** Where the sets live. */
export const kKnownGoodDir = join(kRoot, 'test', 'fixtures', 'known-good')

/** The result for one set. */
export interface SetResult {
  set: string
  count: number
  /** Indicators scoring above 50. */
  above: number
  aboveRate: number
  /** Indicators scoring 70 or more. */
  high: number
  maxScore: number
  /** Indicators scoring below 50. */
  below: number
  /** Signal ids with a positive contribution among the indicators above 50, most frequent first. */
  causes: Array<[string, number]>
  /** Up to 10 indicators above 50 with their score. */
  examples: Array<[string, number]>
}

/** Reads a set file: one indicator per line, `#` comments. */
export function readSet (file: string): string[] {
  return readFileSync(join(kKnownGoodDir, file), 'utf8').split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'))
}

/** The set files, sorted. */
export function setFiles (): string[] {
  return readdirSync(kKnownGoodDir).filter((f) => f.endsWith('.txt')).sort()
}

/** Scores every indicator of a set. */
export function measureSet (snap: Snapshot, set: string, values: string[], profile: ScoringProfile = DEFAULT_PROFILE): SetResult {
  let above = 0
  let high = 0
  let below = 0
  let maxScore = 0
  const causes = new Map<string, number>()
  const examples: Array<[string, number]> = []
  for (const value of values) {
    const r = score(value, undefined, { profile, signalDetails: 'all', evidenceDetails: 'summary' }, snap)
    if (!r.ok) throw new Error(`${set}: ${value} is not a valid indicator: ${r.errors.join('; ')}`)
    const s = r.verdict.risk.score
    if (s > maxScore) maxScore = s
    if (s < 50) below++
    if (s >= 70) high++
    if (s > 50) {
      above++
      if (examples.length < 10) examples.push([value, s])
      for (const sig of r.verdict.signals) {
        if ((sig.evidence?.contribution as number) > 0) causes.set(sig.signal_id, (causes.get(sig.signal_id) ?? 0) + 1)
      }
    }
  }
  return {
    set,
    count: values.length,
    above,
    aboveRate: values.length === 0 ? 0 : above / values.length,
    high,
    maxScore,
    below,
    causes: [...causes].sort((a, b) => b[1] - a[1]).slice(0, 5),
    examples
  }
}

/** Every set. */
export function measureAll (snap: Snapshot, profile: ScoringProfile = DEFAULT_PROFILE): SetResult[] {
  return setFiles().map((f) => measureSet(snap, f.replace(/\.txt$/, ''), readSet(f), profile))
}

function pct (x: number): string {
  return `${(x * 100).toFixed(2)}%`
}

async function main (): Promise<void> {
  const { loadManifest, loadSnapshot } = await import('../src/intel/index.ts')
  const { Snapshot } = await import('../src/engine/index.ts')
  const { mkdtemp, rm } = await import('node:fs/promises')
  const { tmpdir } = await import('node:os')
  const cacheDir = await mkdtemp(join(tmpdir(), 'ioc-verdict-known-good-'))
  try {
    const feeds = await loadManifest(join(kRoot, 'data', 'feeds', 'manifest.json'))
    const snap = new Snapshot((await loadSnapshot({ feeds, cacheDir })).data)
    const results = measureAll(snap)
    const rows = results.map((r) => ({
      set: r.set,
      count: r.count,
      'above 50': `${r.above} (${pct(r.aboveRate)})`,
      '>= 70': r.high,
      'below 50': `${r.below} (${pct(r.below / r.count)})`,
      max: r.maxScore,
      causes: r.causes.map(([id, n]) => `${id} x${n}`).join(', ')
    }))
    console.table(rows)
    const total = results.reduce((a, r) => a + r.count, 0)
    const above = results.reduce((a, r) => a + r.above, 0)
    console.log(`all sets: ${above} of ${total} above neutral (${pct(above / total)}), ${results.reduce((a, r) => a + r.high, 0)} at 70 or more; profile ${DEFAULT_PROFILE.version}, data ${snap.dataTimestamp}`)
    for (const r of results) if (r.examples.length > 0) console.log(`${r.set}: ${r.examples.map(([v, s]) => `${v} ${s}`).join(', ')}`)
    writeFileSync(join(kRoot, 'bench', 'results', 'known-good.json'), JSON.stringify({ profile: DEFAULT_PROFILE.version, date: new Date().toISOString().slice(0, 10), results }, null, 2) + '\n')
  } finally {
    await rm(cacheDir, { recursive: true, force: true })
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main()
