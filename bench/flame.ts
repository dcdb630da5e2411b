/**
 * A flame graph of one `node --cpu-prof` profile as a self-contained SVG (no script, no network): one box per call
 * path, as wide as the time spent in it and under it, callers below callees, hover for name, place and time. The idle
 * and "(program)" roots are left out, so the width is the thread's busy time. bench/profile-summary.ts --flame writes
 * one per profile of a directory (one per thread of the service the capacity bench profiled).
 */

export interface ProfileNode {
  id: number
  callFrame: { functionName: string, url: string, lineNumber: number }
  children?: number[]
}
export interface Profile { nodes: ProfileNode[], samples: number[], timeDeltas: number[], startTime: number, endTime: number }

const kWidth = 1200
const kRow = 16
const kTop = 40
/** Boxes narrower than this many pixels are not drawn (their time still counts in their callers' width). */
const kMinPixels = 0.5
const kLeftOut = new Set(['(idle)', '(program)'])

/** Text escaped for XML and HTML (element content and quoted attribute values). */
export const esc = (s: string): string => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

/** A function's name and place, with `place` shortening its file's URL. */
export function frameName (frame: ProfileNode['callFrame'], place: (url: string) => string = (u) => u): string {
  const name = frame.functionName === '' ? '(anonymous)' : frame.functionName
  return frame.url === '' ? name : `${name} ${place(frame.url)}:${frame.lineNumber + 1}`
}

/** Box colour by where the code is: the project, its dependencies, Node.js itself, or the engine (GC and such). */
function colour (frame: ProfileNode['callFrame']): string {
  const u = frame.url
  if (u === '') return '#b0b0b0'
  if (u.includes('/node_modules/')) return '#e8a838'
  if (u.startsWith('node:')) return '#7fb3d5'
  return '#e2704d'
}

/** The SVG text of the flame graph of `profile`. */
export function flameSvg (profile: Profile, title: string, place?: (url: string) => string): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const self = new Map<number, number>()
  profile.samples.forEach((id, i) => { self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)) })
  const root = profile.nodes[0]
  // Each node's time with its callees', children before parents, without recursion (call trees can be deep).
  const totals = new Map<number, number>()
  const order: number[] = []
  const pending = root === undefined ? [] : [root.id]
  while (pending.length > 0) {
    const id = pending.pop() as number
    order.push(id)
    for (const c of byId.get(id)?.children ?? []) pending.push(c)
  }
  for (let i = order.length - 1; i >= 0; i--) {
    const id = order[i] as number
    let t = self.get(id) ?? 0
    for (const c of byId.get(id)?.children ?? []) t += totals.get(c) ?? 0
    totals.set(id, t)
  }
  const roots = (root?.children ?? []).filter((c) => !kLeftOut.has(byId.get(c)?.callFrame.functionName ?? ''))
  const busy = roots.reduce((s, c) => s + (totals.get(c) ?? 0), 0)
  const boxes: Array<{ node: ProfileNode, x: number, w: number, depth: number, time: number }> = []
  if (busy > 0) {
    const scale = kWidth / busy
    const stack: Array<[number, number, number]> = [] // node id, x, depth
    let x = 0
    for (const c of roots) {
      stack.push([c, x, 0])
      x += (totals.get(c) ?? 0) * scale
    }
    while (stack.length > 0) {
      const [id, x0, depth] = stack.pop() as [number, number, number]
      const node = byId.get(id)
      const time = totals.get(id) ?? 0
      if (node === undefined || time * scale < kMinPixels) continue
      boxes.push({ node, x: x0, w: time * scale, depth, time })
      let cx = x0
      for (const c of node.children ?? []) {
        stack.push([c, cx, depth + 1])
        cx += (totals.get(c) ?? 0) * scale
      }
    }
  }
  const rows = boxes.reduce((m, b) => Math.max(m, b.depth + 1), 1)
  const height = kTop + rows * kRow + 10
  const body = boxes.map(({ node, x, w, depth, time }) => {
    const name = frameName(node.callFrame, place)
    const y = height - 10 - (depth + 1) * kRow
    const label = w > 50 ? `<text x="${(x + 3).toFixed(2)}" y="${y + kRow - 4}" font-size="11">${esc(name.slice(0, Math.floor(w / 7)))}</text>` : ''
    return `<g><title>${esc(`${name}: ${(time / 1000).toFixed(1)} ms, ${(100 * time / busy).toFixed(1)}%`)}</title>` +
      `<rect x="${x.toFixed(2)}" y="${y}" width="${w.toFixed(2)}" height="${kRow - 1}" fill="${colour(node.callFrame)}"/>${label}</g>`
  }).join('\n')
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${kWidth}" height="${height}" viewBox="0 0 ${kWidth} ${height}" font-family="monospace">
<text x="0" y="16" font-size="14" font-weight="bold">${esc(title)}</text>
<text x="0" y="32" font-size="11">busy ${(busy / 1e6).toFixed(2)} s (idle left out); width = time in a call path and its callees; red: project, orange: dependencies, blue: Node.js, grey: V8</text>
${body}
</svg>
`
}
