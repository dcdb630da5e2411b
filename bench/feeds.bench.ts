/**
 * Build time and peak RSS of a snapshot compiled from the built-in data plus one generated domain list of N entries
 * (a popularity-list-sized feed). Each size runs in its own process, so peak RSS is that build's alone.
 *
 *   npm run bench:feeds              # 1M entries
 *   npm run bench:feeds -- 1000000 5000000
 */
import { spawnSync } from 'node:child_process'
import { createWriteStream, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { compileSnapshot } from '../src/intel/compile.ts'

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

async function child (n: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'ioc-bench-feeds-'))
  try {
    const path = join(dir, 'list.txt')
    const fileBytes = await writeList(path, n)
    const rssBefore = process.resourceUsage().maxRSS
    const t0 = performance.now()
    const data = await compileSnapshot({
      feeds: [{ name: 'bench_list', format: 'plain', path, direction: 'safe', group: 'reputation', subgroup: 'popularity', category: 'benign', confidence: 0.5, halfLifeDays: 0 }]
    })
    const ms = performance.now() - t0
    process.stdout.write(JSON.stringify({
      entries: n,
      file_mb: +(fileBytes / 1e6).toFixed(1),
      build_s: +(ms / 1000).toFixed(1),
      peak_rss_mb: Math.round(process.resourceUsage().maxRSS / 1024),
      rss_before_build_mb: Math.round(rssBefore / 1024),
      snapshot_mb: +(data.buffer.byteLength / 1e6).toFixed(1)
    }) + '\n')
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

const args = process.argv.slice(2)
if (args[0] === '--child') {
  await child(Number(args[1]))
} else {
  const sizes = args.length > 0 ? args.map(Number) : [1_000_000]
  console.log(`node ${process.version}, ${new Date().toISOString()}`)
  for (const n of sizes) {
    const r = spawnSync(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--child', String(n)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
    console.log(r.status === 0 ? r.stdout.trim() : `entries ${n}: failed with status ${String(r.status)}`)
  }
}
