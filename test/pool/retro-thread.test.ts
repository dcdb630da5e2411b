/**
 * The retro-hunt pass's thread runs at the lowest CPU priority (src/pool/thread-priority.ts), and only that thread:
 * the main thread and threads started elsewhere keep theirs; a thread asked to stop gets its normal priority back. The hunter notes in the store a pass owed at a stop, and
 * a hunter that starts later runs it over every listing.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test, type TestContext } from 'node:test'
import { Worker } from 'node:worker_threads'
import { passOnThread, RetroHunter, type RetroHunterOptions } from '../../src/pool/retro-hunt.ts'
import { restoreThreadPriority } from '../../src/pool/thread-priority.ts'
import { SqliteStore } from '../../src/store/index.ts'
import { compileSnapshot, loadManifest } from '../../src/intel/index.ts'
import { smallRegistries } from '../helper.ts'

const kLinux = process.platform === 'linux'

/** Compiles a snapshot of one malicious feed listing `body`'s lines, its files in a new folder under `dir`. */
async function compileFeed (dir: string, body: string): Promise<Awaited<ReturnType<typeof compileSnapshot>>> {
  const d = mkdtempSync(join(dir, 'v-'))
  writeFileSync(join(d, 'mal.txt'), body)
  writeFileSync(join(d, 'manifest.json'), JSON.stringify({
    feeds: [{ name: 'mal', format: 'plain', path: 'mal.txt', direction: 'malicious', group: 'threat_feed', subgroup: 'malware_distribution', category: 'malware', confidence: 0.8, half_life_days: 0 }]
  }))
  const r = smallRegistries()
  return await compileSnapshot({ feeds: await loadManifest(join(d, 'manifest.json')), now: new Date(), asnDir: r.IOC_ASN_DIR, countryDir: r.IOC_COUNTRY_DIR })
}

/** The nice value of thread `tid` of this process, from /proc (field 19 of stat). */
function niceOf (tid: number): number {
  const stat = readFileSync(`/proc/${process.pid}/task/${tid}/stat`, 'utf8')
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16])
}

test('lowerThisThreadPriority (src/pool/thread-priority.ts) sets nice 19 on the calling thread only', { skip: kLinux ? false : 'per-thread priority is Linux only' }, async () => {
  const before = niceOf(process.pid)
  const worker = new Worker(new URL('../fixtures/lower-priority-thread.ts', import.meta.url), { execArgv: ['--import', 'tsx'] })
  try {
    const shown = new Promise<{ lowered: boolean, tid: number }>((resolve) => worker.once('message', resolve))
    const { lowered, tid } = await shown
    assert.equal(lowered, true)
    assert.notEqual(tid, process.pid)
    assert.equal(niceOf(tid), 19)
    assert.equal(niceOf(process.pid), before, 'the main thread keeps its priority')
  } finally {
    worker.postMessage('exit')
    await new Promise((resolve) => worker.once('exit', resolve))
  }
})

test('restoreThreadPriority gives a lowered thread nice 0 back where the process may, and says when it may not', { skip: kLinux ? false : 'per-thread priority is Linux only' }, async () => {
  const worker = new Worker(new URL('../fixtures/lower-priority-thread.ts', import.meta.url), { execArgv: ['--import', 'tsx'] })
  try {
    const { tid } = await new Promise<{ lowered: boolean, tid: number }>((resolve) => worker.once('message', resolve))
    assert.equal(niceOf(tid), 19)
    const mayRaise = process.getuid?.() === 0
    assert.equal(restoreThreadPriority(tid), mayRaise)
    assert.equal(niceOf(tid), mayRaise ? 0 : 19)
  } finally {
    worker.postMessage('exit')
    await new Promise((resolve) => worker.once('exit', resolve))
  }
})

test('a retro-hunt pass on its thread runs at the lowest priority', { timeout: 300_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ioc-retro-thread-'))
  t.after(() => { rmSync(dir, { recursive: true, force: true }) })
  const compile = async (body: string): ReturnType<typeof compileFeed> => await compileFeed(dir, body)
  const prev = await compile('a.example\n')
  const next = await compile('a.example\nb.example\n')
  const pass = passOnThread({ kind: 'sqlite', path: join(dir, 'store.db') }, { prev, next, sinceMs: 0, dutyPercent: 100 })
  const result = await pass.result
  await pass.stop()
  assert.equal(result.raised, 1)
  assert.equal(result.lowPriority, kLinux)
})

test('a retro-hunt pass asked not to lower its priority keeps the normal one', { timeout: 300_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ioc-retro-thread-'))
  t.after(() => { rmSync(dir, { recursive: true, force: true }) })
  const prev = await compileFeed(dir, 'a.example\n')
  const next = await compileFeed(dir, 'a.example\nb.example\n')
  const pass = passOnThread({ kind: 'sqlite', path: join(dir, 'store.db') }, { prev, next, sinceMs: 0, dutyPercent: 100 }, false)
  const result = await pass.result
  await pass.stop()
  assert.equal(result.raised, 1)
  assert.equal(result.lowPriority, false)
})

/** A SQLite store in a new folder, and hunters over it (30 days, unpaced, `options` on top) logging into `logged`. */
async function hunters (t: TestContext, options: Partial<RetroHunterOptions> = {}): Promise<{ dir: string, store: SqliteStore, logged: string[], hunter: (more?: Partial<RetroHunterOptions>) => RetroHunter }> {
  const dir = mkdtempSync(join(tmpdir(), 'ioc-retro-hunter-'))
  const store = new SqliteStore({ path: join(dir, 'store.db') })
  await store.migrate()
  t.after(async () => {
    await store.close()
    rmSync(dir, { recursive: true, force: true })
  })
  const logged: string[] = []
  const logger = { info: (_o: object, msg: string) => { logged.push(msg) }, error: (_o: object, msg: string) => { logged.push(msg) } }
  const hunter = (more: Partial<RetroHunterOptions> = {}): RetroHunter =>
    new RetroHunter({ store: { kind: 'sqlite', path: join(dir, 'store.db') }, days: 30, retentionDays: 0, dutyPercent: 100, logger, owed: store.retroHunt, ...options, ...more })
  return { dir, store, logged, hunter }
}

test('a pass waiting at a stop is owed to the next hunter, which runs it over every listing and clears it', { timeout: 300_000 }, async (t) => {
  const { dir, store, logged, hunter } = await hunters(t)
  const compile = async (body: string): ReturnType<typeof compileFeed> => await compileFeed(dir, body)
  const s1 = await compile('a.example\n')
  const s2 = await compile('a.example\nb.example\n')
  const s3 = await compile('a.example\nb.example\nc.example\n')

  const first = hunter()
  first.onSwap(s1, s2) // runs
  first.onSwap(s2, s3) // waits behind it
  assert.equal(first.state().running, true)
  await first.close()
  assert.notEqual(await store.retroHunt.owed(), null, 'the waiting pass is owed')

  const second = hunter()
  assert.equal(await second.resumeOwed(s3), true)
  await second.idle()
  assert.equal(await store.retroHunt.owed(), null, 'cleared once the pass finished')
  assert.equal(second.state().passes, 1)
  const whole = second.state().last?.raised ?? 0
  assert.ok(whole >= 3, `every listing of the snapshot counts as raised (${whole})`)
  assert.equal(second.state().last?.cut, false)
  assert.equal(await second.resumeOwed(s3), false, 'nothing is owed any more')
  await second.close()

  // A hunter without a debt to resume, whose pass finishes: nothing is left owed.
  const third = hunter()
  third.onSwap(s2, s3)
  await third.idle()
  assert.equal(await store.retroHunt.owed(), null)
  assert.equal(third.state().last?.raised, 1, 'a swap raises what it added')
  await third.close()
  assert.equal(logged.filter((m) => m.includes('could not')).length, 0, logged.join('; '))
})

test('a start whose snapshot is not the one last hunted with runs a pass over every listing; the first start only notes it', { timeout: 300_000 }, async (t) => {
  const { dir, store, logged, hunter } = await hunters(t, { lowPriority: false })
  const s1 = await compileFeed(dir, 'a.example\n')
  const s2 = await compileFeed(dir, 'a.example\nb.example\n')

  const first = hunter()
  assert.equal(await first.resumeOwed(s1), false, 'a first start hunts nothing')
  assert.equal((await store.retroHunt.hunted())?.version, s1.header.version, 'it takes its snapshot as where hunting starts')
  await first.close()
  const same = hunter()
  assert.equal(await same.resumeOwed(s1), false, 'a restart on the same snapshot hunts nothing')
  await same.close()

  // The feed changed while no service ran: the next start hunts over every listing, then notes its snapshot.
  const changed = hunter()
  assert.equal(await changed.resumeOwed(s2), true)
  await changed.idle()
  assert.equal(changed.state().passes, 1)
  assert.ok((changed.state().last?.raised ?? 0) >= 2, 'every listing counts as raised')
  assert.equal((await store.retroHunt.hunted())?.version, s2.header.version)
  assert.match(logged.join('; '), /the snapshot changed since the last pass; a pass runs over every listing/, 'without `previous`, over every listing')
  await changed.close()
  const after = hunter()
  assert.equal(await after.resumeOwed(s2), false)
  // A swap's pass notes its new snapshot too.
  after.onSwap(s2, s1)
  await after.idle()
  assert.equal((await store.retroHunt.hunted())?.version, s1.header.version)
  await after.close()

  // Where the snapshot last hunted with can still be read, a start hunts only what changed since.
  const s3 = await compileFeed(dir, 'a.example\nc.example\n')
  const fromPrevious = hunter({ previous: async (seen) => seen.version === s1.header.version ? s1 : null })
  assert.equal(await fromPrevious.resumeOwed(s3), true)
  await fromPrevious.idle()
  assert.equal(fromPrevious.state().last?.raised, 1, 'c.example alone is raised')
  assert.equal((await store.retroHunt.hunted())?.version, s3.header.version)
  await fromPrevious.close()
  assert.equal(logged.filter((m) => m.includes('could not')).length, 0, logged.join('; '))
})
