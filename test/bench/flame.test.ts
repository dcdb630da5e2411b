/**
 * The flame graph of a CPU profile (bench/flame.ts): boxes as wide as a call path's time with its callees', callers
 * below callees, the idle roots left out, names escaped, nothing loaded from anywhere.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { flameSvg, type Profile } from '../../bench/flame.ts'

const frame = (functionName: string, url = 'file:///app/src/x.ts', lineNumber = 0): Profile['nodes'][number]['callFrame'] => ({ functionName, url, lineNumber })

/** (root) -> main -> [work (30 ms self) -> <inner> (10 ms), io (20 ms)], (idle) 1 s, (garbage collector) 40 ms. */
const profile: Profile = {
  nodes: [
    { id: 1, callFrame: frame('(root)', ''), children: [2, 6, 7] },
    { id: 2, callFrame: frame('main'), children: [3, 5] },
    { id: 3, callFrame: frame('work', 'file:///app/node_modules/dep/index.js', 41), children: [4] },
    { id: 4, callFrame: frame('<inner> & "co"', 'node:internal/x') },
    { id: 5, callFrame: frame('io') },
    { id: 6, callFrame: frame('(idle)', '') },
    { id: 7, callFrame: frame('(garbage collector)', '') }
  ],
  // Samples of 10 ms each: work x3, <inner> x1, io x2, idle x100, gc x4.
  samples: [...Array(3).fill(3), 4, 5, 5, ...Array(100).fill(6), ...Array(4).fill(7)] as number[],
  timeDeltas: Array(110).fill(10_000) as number[],
  startTime: 0,
  endTime: 1_100_000
}

/** The box whose tooltip starts with `name`: its x, y, width and tooltip. */
function box (svg: string, name: string): { x: number, y: number, w: number, title: string } {
  const m = new RegExp(`<title>(${name}[^<]*)</title><rect x="([\\d.]+)" y="(\\d+)" width="([\\d.]+)"`).exec(svg)
  assert.ok(m !== null, `a box for ${name}`)
  return { title: m[1] as string, x: Number(m[2]), y: Number(m[3]), w: Number(m[4]) }
}

test('a flame graph draws each call path as wide as its time, callers below callees, without the idle roots', () => {
  const svg = flameSvg(profile, 'thread <1>')
  assert.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/)
  assert.match(svg, /busy 0\.10 s \(idle left out\)/)
  assert.ok(svg.includes('thread &#60;1&#62;'))
  const main = box(svg, 'main ')
  const work = box(svg, 'work ')
  const inner = box(svg, '&#60;inner&#62; &#38; &#34;co&#34;')
  const io = box(svg, 'io ')
  const gc = box(svg, '\\(garbage collector\\)')
  // 100 ms busy over 1,200 px: main 60 ms, work 40 (its own 30 and <inner>'s 10), io 20, gc 40.
  assert.equal(main.w, 720)
  assert.equal(work.w, 480)
  assert.equal(inner.w, 120)
  assert.equal(io.w, 240)
  assert.equal(gc.w, 480)
  assert.equal(work.title, 'work file:///app/node_modules/dep/index.js:42: 40.0 ms, 40.0%')
  // Callees sit on the row above their caller, inside its span.
  assert.equal(work.y, main.y - 16)
  assert.equal(inner.y, work.y - 16)
  assert.ok(work.x >= main.x && io.x >= work.x + work.w - 0.01 && io.x + io.w <= main.x + main.w + 0.01)
  assert.ok(!svg.includes('(idle)'))
  assert.doesNotMatch(svg, /<(script|image|use|foreignObject)\b|href=/i)
})

test('a place function shortens file URLs, and a profile with nothing but idle time draws no box', () => {
  const svg = flameSvg(profile, 't', (url) => url.replace('file:///app/', ''))
  assert.match(box(svg, 'work ').title, /^work node_modules\/dep\/index\.js:42: 40\.0 ms/)
  const idle: Profile = { ...profile, samples: Array(5).fill(6) as number[], timeDeltas: Array(5).fill(10_000) as number[] }
  const empty = flameSvg(idle, 'idle thread')
  assert.match(empty, /busy 0\.00 s/)
  assert.doesNotMatch(empty, /<rect/)
})
