/**
 * A/B cost of an engine change: two checkouts' engines in one process, scoring the same mixed corpora in alternating
 * rounds, so a busy machine slows both alike and the ratio stays meaningful where absolute rates do not.
 *
 *   git worktree add --detach ../base main && ln -s "$PWD/node_modules" ../base/node_modules
 *   node --import tsx bench/engine-ab.ts ../base .            (A = ../base, B = this checkout)
 *
 * Each checkout compiles its own snapshot (its built-in data and the sample feeds) with its own compiler. A round
 * scores one fresh 10,000-indicator mixed corpus (bench/corpus.ts, normalize + assess + render at signal_details
 * none, as the engine bench's mixed task) AB_REPEAT times with A, then with B (the order flips every round). Prints
 * per-round CPU time (process user + system) and the median ratio B / A of indicators per CPU-second, then the same
 * with the load order reversed (in a child process) and the geometric mean of both. AB_ROUNDS,
 * AB_REPEAT and AB_TYPES (e.g. `ip,domain`) change the defaults (60 rounds, 5 passes, every type).
 *
 * AB_PATH=chunk measures the answer path instead of the engine's objects: each checkout's scoreBulkChunk
 * (src/pool/score-chunk.ts) on the round's corpus as one JSON chunk at signal_details none without a verdict cache,
 * i.e. normalize, assess, the item's bytes and its history record, as a scoring thread does for a cold bulk.
 * AB_PATH=cache does the same with a verdict cache of the service's default size (100,000 verdicts, kept across
 * rounds, so it fills and evicts as a scoring thread's does under cold bulks). AB_PATH=warm is AB_PATH=cache with
 * each round's corpus scored once before the timed passes: every timed indicator is a cache hit, as in a warm bulk.
 *
 * AB_SEPARATE=N runs each engine in processes of its own instead: N pairs of child processes, A then B, then B then A
 * and so on, each child scoring AB_ROUNDS fresh corpora after its warm-up and reporting its median; the ratio is the
 * median of the pairs'. Slower, but neither engine's garbage, compiled code or memory placement meets the other's:
 * on a noisy machine the one-process rounds can range from 0.6 to 1.7 where the pairs agree within a few percent.
 */
import { execFileSync } from 'node:child_process'
import { join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { mixedCorpus } from './corpus.ts'

interface Engine {
  name: string
  score: (value: unknown, type: unknown, params: unknown, snap: unknown) => { ok: boolean }
  chunk: (items: unknown[], params: unknown, ctx: unknown) => { invalid: number, ends: Uint32Array }
  profile: unknown
  snap: unknown
  /** The scoring context chunks are scored in (no cache); kept across rounds as a scoring thread keeps its own. */
  ctx: unknown
}

const [rootA, rootB] = [resolve(process.argv[2] ?? ''), resolve(process.argv[3] ?? '.')]
const kRounds = Number(process.env.AB_ROUNDS ?? 60)
/** Passes over each round's corpus: about 0.2 s of CPU per engine and round, far above the accounting tick. */
const kRepeat = Number(process.env.AB_REPEAT ?? 5)
const kCorpusSize = 10_000
/** AB_TYPES=ip,domain keeps only corpus items of those types (as normalized), to find where a cost is. */
const kTypes = process.env.AB_TYPES === undefined ? null : new Set(process.env.AB_TYPES.split(','))
const kChunk = process.env.AB_PATH === 'chunk' || process.env.AB_PATH === 'cache' || process.env.AB_PATH === 'warm'
const kWarm = process.env.AB_PATH === 'warm'
const kCacheSize = process.env.AB_PATH === 'cache' || kWarm ? 100_000 : 0
const kSeparate = Number(process.env.AB_SEPARATE ?? 0)
/** What a round scores, for the report. */
const kPathLabel = kChunk
  ? `JSON bulk chunks at signal_details none, ${kCacheSize > 0 ? `a verdict cache of 100,000${kWarm ? ', every indicator cached by an untimed pass' : ''}` : 'no cache'}`
  : 'score()'

async function load (name: string, root: string): Promise<Engine> {
  const engine = await import(pathToFileURL(join(root, 'src', 'engine', 'index.ts')).href) as Record<string, unknown>
  const intel = await import(pathToFileURL(join(root, 'src', 'intel', 'index.ts')).href) as Record<string, unknown>
  const loadManifest = intel.loadManifest as (p: string) => Promise<unknown[]>
  const compileSnapshot = intel.compileSnapshot as (o: unknown) => Promise<unknown>
  const SnapshotCtor = engine.Snapshot as new (d: unknown) => unknown
  const feeds = await loadManifest(join(root, 'data', 'feeds', 'manifest.json'))
  const snap = new SnapshotCtor(await compileSnapshot({ feeds }))
  const pool = await import(pathToFileURL(join(root, 'src', 'pool', 'score-chunk.ts')).href) as Record<string, unknown>
  const cache = kCacheSize > 0 ? (pool.createShardCache as (max: number) => unknown)(kCacheSize) : null
  return { name, score: engine.score as Engine['score'], chunk: pool.scoreBulkChunk as Engine['chunk'], profile: engine.DEFAULT_PROFILE, snap, ctx: { snapshot: snap, cache } }
}

function cpuMs (): number {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}

/** Scores a corpus `kRepeat` times; CPU milliseconds (a round must be long against the kernel's accounting tick). */
function run (e: Engine, corpus: Array<{ type?: string, value: string }>): number {
  const params = { profile: e.profile, signalDetails: 'none', evidenceDetails: 'none' }
  let ok = 0
  if (kChunk) {
    const items = corpus.map((it) => [it.type, it.value, null, null])
    const chunkParams = { mode: 'bulk', format: 'json', scoringVersion: null, signalDetails: 'none', evidenceDetails: 'none' }
    if (kWarm) e.chunk(items, chunkParams, e.ctx)
    const t0 = cpuMs()
    for (let i = 0; i < kRepeat; i++) {
      const out = e.chunk(items, chunkParams, e.ctx)
      ok += out.ends.length - out.invalid
    }
    if (ok === 0) throw new Error(`${e.name}: nothing scored`)
    return cpuMs() - t0
  }
  const t0 = cpuMs()
  for (let i = 0; i < kRepeat; i++) for (const it of corpus) if (e.score(it.value, it.type, params, e.snap).ok) ok++
  if (ok === 0) throw new Error(`${e.name}: nothing scored`)
  return cpuMs() - t0
}

function median (xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 === 1 ? s[m] as number : ((s[m - 1] as number) + (s[m] as number)) / 2
}

/** AB_ONE=root: one engine alone (a child of AB_SEPARATE), printing its median CPU ms per round as JSON. */
if (process.env.AB_ONE !== undefined) {
  const e = await load('one', resolve(process.env.AB_ONE))
  for (let seed = 900; seed < 905; seed++) run(e, mixedCorpus(kCorpusSize, seed))
  const ms: number[] = []
  for (let r = 0; r < kRounds; r++) ms.push(run(e, mixedCorpus(kCorpusSize, 1000 + r)))
  process.stdout.write(JSON.stringify({ ms: median(ms) }))
  process.exit(0)
}

if (kSeparate > 0) {
  if (kTypes !== null) throw new Error('AB_TYPES is not supported with AB_SEPARATE')
  const one = (root: string): number => (JSON.parse(execFileSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url)], { env: { ...process.env, AB_ONE: root }, encoding: 'utf8' })) as { ms: number }).ms
  console.log(`A ${rootA}\nB ${rootB}`)
  console.log(`${kSeparate} pairs of processes, each ${kRounds} rounds of ${kRepeat} x ${kCorpusSize.toLocaleString('en')} mixed indicators, ${kPathLabel}; median CPU time per round`)
  const pairs: number[] = []
  for (let i = 0; i < kSeparate; i++) {
    let ta: number
    let tb: number
    if (i % 2 === 0) {
      ta = one(rootA)
      tb = one(rootB)
    } else {
      tb = one(rootB)
      ta = one(rootA)
    }
    pairs.push(ta / tb)
    console.log(`pair ${i + 1}: A ${ta.toFixed(1)} ms, B ${tb.toFixed(1)} ms, B / A ${(ta / tb).toFixed(3)}`)
  }
  console.log(`B / A indicators per CPU-second: median of ${kSeparate} pairs ${median(pairs).toFixed(3)} (range ${Math.min(...pairs).toFixed(3)}-${Math.max(...pairs).toFixed(3)})`)
  process.exit(0)
}

const a = await load('A', rootA)
const { normalize } = await import(pathToFileURL(join(rootB, 'src', 'engine', 'index.ts')).href) as { normalize: (v: unknown, t: unknown) => { ok: boolean, indicator?: { type: string } } }
function corpusOf (seed: number): Array<{ type?: string, value: string }> {
  const all = mixedCorpus(kCorpusSize, seed)
  if (kTypes === null) return all
  return all.filter((it) => { const n = normalize(it.value, it.type); return n.ok && kTypes.has(n.indicator?.type ?? '') })
}
const b = await load('B', rootB)
// Warm both (JIT, per-thread caches of immutable snapshot facts) on corpora the rounds do not use.
for (let seed = 900; seed < 905; seed++) {
  const c = corpusOf(seed)
  run(a, c)
  run(b, c)
}
const ratios: number[] = []
const msA: number[] = []
const msB: number[] = []
for (let r = 0; r < kRounds; r++) {
  const corpus = corpusOf(1000 + r)
  const first = r % 2 === 0 ? a : b
  const second = first === a ? b : a
  const t1 = run(first, corpus)
  const t2 = run(second, corpus)
  const ta = first === a ? t1 : t2
  const tb = first === a ? t2 : t1
  msA.push(ta)
  msB.push(tb)
  ratios.push(ta / tb)
}
const size = corpusOf(1000).length
const perSec = (ms: number): number => Math.round((size * kRepeat) / (ms / 1000))
const ratio = median(ratios)
if (process.env.AB_CHILD === '1') {
  // The reversed run reports its ratio to the parent only.
  process.stdout.write(JSON.stringify({ ratio }))
  process.exit(0)
}
console.log(`A ${rootA}\nB ${rootB}`)
console.log(`${kRounds} rounds of ${kRepeat} x ${size.toLocaleString('en')} mixed indicators${kTypes === null ? '' : ` (${[...kTypes].join(', ')})`}, ${kPathLabel}; CPU time per round (user + system)`)
console.log(`A: median ${median(msA).toFixed(1)} ms (${perSec(median(msA)).toLocaleString('en')} indicators per CPU-second)`)
console.log(`B: median ${median(msB).toFixed(1)} ms (${perSec(median(msB)).toLocaleString('en')} indicators per CPU-second)`)
console.log(`B / A indicators per CPU-second: median of per-round ratios ${ratio.toFixed(3)} (range ${Math.min(...ratios).toFixed(3)}-${Math.max(...ratios).toFixed(3)})`)
// The engine loaded second runs a few percent slower or faster for reasons of memory placement alone (an A/A run
// shows it): a second process loads them the other way round, and the geometric mean of both ratios cancels it.
const child = execFileSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), rootB, rootA], { env: { ...process.env, AB_CHILD: '1' }, encoding: 'utf8' })
const reversed = 1 / (JSON.parse(child) as { ratio: number }).ratio
console.log(`reversed load order (B loaded first): B / A ${reversed.toFixed(3)}`)
console.log(`B / A, both load orders (geometric mean): ${Math.sqrt(ratio * reversed).toFixed(3)}`)
