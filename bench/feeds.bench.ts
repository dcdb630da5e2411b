/**
 * Snapshot builds with one large generated domain list (a popularity-list-sized feed) beside the built-in data. For
 * each size N, each in its own process so peak RSS is that build's alone:
 *
 *   full      a compile from scratch, no parts cache (what the first start of a service does): time, peak RSS,
 *             snapshot size, and peak RSS over the snapshot's size (also counting only what the build added to the
 *             process);
 *   rebuild   with a parts cache filled by a first compile (timed as `first_s`, in another process), one small feed
 *             beside the list changes and the snapshot is compiled again, as a refresh of that feed does: time,
 *             which sources were parsed, peak RSS, and the time against the full compile of the same run.
 *
 *   npm run bench:feeds                                  # 1M entries
 *   npm run bench:feeds -- 1000000 5000000
 *   npm run bench:feeds -- --baseline /path/to/old/checkout 1000000   # also runs that checkout's own `full` child first
 */
import { spawnSync } from 'node:child_process'
import { createWriteStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { FeedSpec } from '../src/engine/types.ts'
import { compileSnapshot, loadSnapshot } from '../src/intel/index.ts'

async function writeList (path: string, n: number): Promise<number> {
  const out = createWriteStream(path)
  let bytes = 0
  for (let i = 0; i < n; i++) {
    const line = `host${i.toString(36)}.example${i % 997}.com\n`
    bytes += line.length
    if (!out.write(line)) await new Promise<void>((resolve) => { out.once('drain', () => { resolve() }) })
  }
  await new Promise<void>((resolve) => { out.end(() => { resolve() }) })
  return bytes
}

const mb = (bytes: number): number => Math.round(bytes / 1e6)
const peakMb = (): number => Math.round(process.resourceUsage().maxRSS / 1024)

function specs (dir: string): FeedSpec[] {
  return [
    { name: 'small_feed', format: 'netset', path: join(dir, 'small.netset'), direction: 'malicious', group: 'threat_feed', subgroup: 'attack_source', category: 'abuse', confidence: 0.7, halfLifeDays: 7 },
    { name: 'bench_list', format: 'plain', path: join(dir, 'list.txt'), direction: 'safe', group: 'reputation', subgroup: 'popularity', category: 'benign', confidence: 0.5, halfLifeDays: 0 }
  ]
}

/** A small feed of `n` addresses, different for each `seed`. */
function writeSmall (dir: string, seed: number, n = 200): void {
  const lines = ['# small feed']
  for (let i = 0; i < n; i++) lines.push(`10.${seed}.${i >> 8}.${i & 255}`)
  writeFileSync(join(dir, 'small.netset'), lines.join('\n') + '\n')
}

async function full (n: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'ioc-bench-feeds-'))
  try {
    const path = join(dir, 'list.txt')
    const fileBytes = await writeList(path, n)
    const rssBefore = peakMb()
    const t0 = performance.now()
    const data = await compileSnapshot({
      feeds: [{ name: 'bench_list', format: 'plain', path, direction: 'safe', group: 'reputation', subgroup: 'popularity', category: 'benign', confidence: 0.5, halfLifeDays: 0 }]
    })
    const ms = performance.now() - t0
    const peak = peakMb()
    const snapshot = data.buffer.byteLength / 1e6
    process.stdout.write(JSON.stringify({
      mode: 'full',
      entries: n,
      file_mb: +(fileBytes / 1e6).toFixed(1),
      build_s: +(ms / 1000).toFixed(1),
      peak_rss_mb: peak,
      rss_before_build_mb: rssBefore,
      snapshot_mb: +snapshot.toFixed(1),
      peak_over_snapshot: +(peak / snapshot).toFixed(2),
      added_over_snapshot: +((peak - rssBefore) / snapshot).toFixed(2)
    }) + '\n')
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** First compile into a parts cache (writes the list and the small feed in `dir`). */
async function prepare (n: number, dir: string): Promise<void> {
  await writeList(join(dir, 'list.txt'), n)
  writeSmall(dir, 1)
  const t0 = performance.now()
  await loadSnapshot({ feeds: specs(dir), cacheDir: join(dir, 'cache') })
  process.stdout.write(JSON.stringify({ first_s: +((performance.now() - t0) / 1000).toFixed(1) }) + '\n')
}

/** The small feed changes; the snapshot is compiled again from the parts cache. */
async function rebuild (dir: string): Promise<void> {
  writeSmall(dir, 2)
  const rssBefore = peakMb()
  const t0 = performance.now()
  const r = await loadSnapshot({ feeds: specs(dir), cacheDir: join(dir, 'cache') })
  const ms = performance.now() - t0
  process.stdout.write(JSON.stringify({
    rebuild_s: +(ms / 1000).toFixed(2),
    parsed: r.build?.sources.filter((s) => s.parsed).map((s) => s.name) ?? [],
    reused: r.build?.reused ?? 0,
    peak_rss_mb: peakMb(),
    rss_before_build_mb: rssBefore,
    snapshot_mb: mb(r.data.buffer.byteLength)
  }) + '\n')
}

/** Runs this file (or another checkout's bench) as a child; its last stdout line, parsed. */
function child (script: string, args: string[]): Record<string, unknown> {
  const r = spawnSync(process.execPath, ['--import', 'tsx', script, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], cwd: join(script, '..', '..') })
  if (r.status !== 0) return { failed: `status ${String(r.status)}`, args }
  return JSON.parse(r.stdout.trim().split('\n').at(-1) as string) as Record<string, unknown>
}

const args = process.argv.slice(2)
const self = fileURLToPath(import.meta.url)
if (args[0] === '--child') {
  await full(Number(args[1]))
} else if (args[0] === '--prepare') {
  await prepare(Number(args[1]), args[2] as string)
} else if (args[0] === '--rebuild') {
  await rebuild(args[1] as string)
} else {
  let baseline: string | null = null
  const at = args.indexOf('--baseline')
  if (at >= 0) {
    baseline = args[at + 1] ?? null
    args.splice(at, 2)
  }
  const sizes = args.length > 0 ? args.map(Number) : [1_000_000]
  console.log(`node ${process.version}, ${new Date().toISOString()}`)
  for (const n of sizes) {
    if (baseline !== null) {
      const old = child(join(baseline, 'bench', 'feeds.bench.ts'), ['--child', String(n)])
      console.log(JSON.stringify({ mode: 'full (baseline checkout)', ...old }))
    }
    const now = child(self, ['--child', String(n)])
    console.log(JSON.stringify(now))
    const dir = mkdtempSync(join(tmpdir(), 'ioc-bench-rebuild-'))
    try {
      const first = child(self, ['--prepare', String(n), dir])
      const again = child(self, ['--rebuild', dir])
      const ratio = typeof again.rebuild_s === 'number' && typeof now.build_s === 'number' ? +(again.rebuild_s / now.build_s).toFixed(3) : null
      console.log(JSON.stringify({ mode: 'rebuild, one small feed changed', entries: n, ...first, ...again, rebuild_over_full: ratio }))
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }
}
