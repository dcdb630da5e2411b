/**
 * Top self-time functions of each `node --cpu-prof` profile in a directory (one file per thread: the main thread,
 * scoring threads, the history writer), as the capacity bench's --profile writes them.
 *
 *   node --import tsx bench/profile-summary.ts DIR [--top 15] [--flame]
 *
 * --flame also writes a flame graph of each profile beside it (bench/flame.ts): DIR/<profile>.svg.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { parseArgs } from 'node:util'
import { flameSvg, frameName, type Profile } from './flame.ts'

const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string', default: '15' }, flame: { type: 'boolean', default: false } } })
const dir = positionals[0]
if (dir === undefined) {
  process.stderr.write('usage: profile-summary.ts DIR [--top 15] [--flame]\n')
  process.exit(2)
}
const kRoot = join(import.meta.dirname, '..')
/** A file URL as a path from the checkout's root; other URLs (node:...) as they are. */
const place = (url: string): string => url.startsWith('file://') ? relative(kRoot, new URL(url).pathname) : url
for (const file of readdirSync(dir).filter((f) => f.endsWith('.cpuprofile')).sort()) {
  const p = JSON.parse(readFileSync(join(dir, file), 'utf8')) as Profile
  const byId = new Map(p.nodes.map((n) => [n.id, n]))
  const self = new Map<string, number>()
  let total = 0
  p.samples.forEach((id, i) => {
    const dt = p.timeDeltas[i] ?? 0
    const n = byId.get(id)
    if (n === undefined) return
    const key = frameName(n.callFrame, place)
    self.set(key, (self.get(key) ?? 0) + dt)
    total += dt
  })
  const busy = [...self].filter(([k]) => !k.startsWith('(idle)') && !k.startsWith('(program)')).reduce((s, [, v]) => s + v, 0)
  console.log(`\n${file}: ${(total / 1e6).toFixed(1)} s sampled, ${(busy / 1e6).toFixed(2)} s not idle/program`)
  for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top))) {
    console.log(`  ${(v / 1000).toFixed(0).padStart(7)} ms ${(100 * v / total).toFixed(1).padStart(5)}%  ${k}`)
  }
  if (values.flame === true) {
    const svg = join(dir, `${file}.svg`)
    writeFileSync(svg, flameSvg(p, file, place))
    console.log(`  flame graph: ${svg}`)
  }
}
