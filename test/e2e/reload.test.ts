/**
 * End to end over a real socket (127.0.0.1 only): an intel reload while requests stream in fails none of them,
 * and afterwards the verdicts, meta.data_timestamp and the snapshot version come from the new data.
 */
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { appendFileSync, cpSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { request } from 'undici'
import { build } from '../helper.ts'

type Json = Record<string, any>

const kFeeds = join(import.meta.dirname, '..', '..', 'data', 'feeds')
/** Not listed anywhere in the sample feeds (data/feeds/README.md); the test adds it to the FireHOL sample. */
const kProbe = '192.0.2.201'
/** This checkout, in the names of its fixed temporary folders. */
const kCheckout = createHash('sha256').update(import.meta.dirname).digest('hex').slice(0, 12)

test('an intel reload during a stream of requests fails none of them and switches data_timestamp and version', { timeout: 180_000 }, async (t) => {
  // A private copy of the feeds (the test edits one) and a private compiled-snapshot cache. Both paths are fixed per
  // checkout, so the next run finds the two snapshots it needs (before and after the edit) already compiled (compiled
  // snapshots are keyed by feed paths and contents, and the copy is restored to the shipped contents every run), and
  // a run in another checkout on the same machine never removes this one's copy under it.
  const feeds = join(tmpdir(), `ioc-verdict-test-reload-feeds-${kCheckout}`)
  rmSync(feeds, { recursive: true, force: true })
  cpSync(kFeeds, feeds, { recursive: true })
  t.after(() => rmSync(feeds, { recursive: true, force: true }))
  const svc = await build(t, {
    IOC_POOL_SIZE: '2',
    IOC_FEEDS: join(feeds, 'manifest.json'),
    IOC_INTEL_CACHE_DIR: join(tmpdir(), `ioc-verdict-test-intel-reload-${kCheckout}`)
  })
  const base = await svc.app.listen({ port: 0, host: '127.0.0.1' })
  const post = async (path: string, body?: unknown): Promise<{ status: number, body: Json }> => {
    const res = await request(`${base}${path}`, {
      method: 'POST',
      headers: body === undefined ? { 'x-api-key': svc.key } : { 'x-api-key': svc.key, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    return { status: res.statusCode, body: await res.body.json() as Json }
  }
  const health = async (): Promise<Json> => {
    const res = await request(`${base}/api/v2/ioc/health`)
    return await res.body.json() as Json
  }

  const before = await post('/api/v2/ioc/verdict', { indicator: { value: kProbe } })
  assert.equal(before.status, 200)
  assert.ok(!before.body.threat_context.listed_by.includes('sample_firehol'))
  const versionBefore = (await health()).checks.intel.version as string

  // Clients stream singles and bulks until told to stop; every answer is checked as it arrives.
  const state = { stop: false }
  const rounds = [0, 0, 0, 0]
  const failures: string[] = []
  const timestamps = new Set<string>()
  const client = async (c: number): Promise<void> => {
    for (let r = 0; !state.stop; r++) {
      const value = `10.${c}.${r & 255}.${(r >> 8) & 255}`
      const single = await post('/api/v2/ioc/verdict', { indicator: { value } })
      if (single.status !== 200 || single.body.indicator?.value !== value) failures.push(`single ${value}: ${single.status}`)
      else timestamps.add(single.body.meta.data_timestamp)
      const indicators = Array.from({ length: 50 }, (_, i) => ({ value: i % 2 === 0 ? `h${c}-${r}-${i}.example` : kProbe }))
      const bulk = await post('/api/v2/ioc/verdict/bulk', { indicators })
      if (bulk.status !== 200) failures.push(`bulk ${c}/${r}: ${bulk.status}`)
      else if (bulk.body.results.some((x: Json, i: number) => x.indicator.value !== indicators[i]?.value)) failures.push(`bulk ${c}/${r}: misordered`)
      rounds[c] = (rounds[c] ?? 0) + 1
    }
  }
  const until = async (cond: () => boolean): Promise<void> => {
    while (!cond()) await new Promise((resolve) => setTimeout(resolve, 5))
  }
  const clients = rounds.map(async (_, c) => await client(c))
  await until(() => rounds.every((n) => n >= 2))

  appendFileSync(join(feeds, 'firehol-sample.netset'), `${kProbe}\n`)
  const reload = await post('/api/v2/mgmt/intel/reload')
  assert.equal(reload.status, 200)
  const mark = rounds.map((n) => n)
  await until(() => rounds.every((n, c) => n >= (mark[c] ?? 0) + 2))
  state.stop = true
  await Promise.all(clients)

  assert.deepEqual(failures, [], 'no request failed during the reload')
  assert.equal(typeof reload.body.version, 'string')
  assert.notEqual(reload.body.version, versionBefore)
  assert.notEqual(reload.body.data_timestamp, before.body.meta.data_timestamp)

  const after = await post('/api/v2/ioc/verdict', { indicator: { value: kProbe } })
  assert.equal(after.body.meta.data_timestamp, reload.body.data_timestamp)
  assert.notEqual(after.body.meta.data_timestamp, before.body.meta.data_timestamp)
  assert.ok(after.body.threat_context.listed_by.includes('sample_firehol'), 'the new feed entry is in the verdict')
  const h = await health()
  assert.equal(h.checks.intel.version, reload.body.version)
  assert.equal(h.checks.intel.data_timestamp, reload.body.data_timestamp)
  const bulkAfter = await post('/api/v2/ioc/verdict/bulk', { indicators: [{ value: kProbe }] })
  assert.equal(bulkAfter.body.meta.data_timestamp, reload.body.data_timestamp)
  assert.ok(bulkAfter.body.results[0].threat_context.listed_by.includes('sample_firehol'))
  assert.ok(timestamps.has(before.body.meta.data_timestamp), 'the stream saw the old snapshot')
  assert.ok([...timestamps].every((ts) => ts === before.body.meta.data_timestamp || ts === reload.body.data_timestamp), 'each answer came from one of the two snapshots')
})

test('reloading in a loop while bulks with a quota are admitted answers every request 200', { timeout: 180_000 }, async (t) => {
  // A quota makes admission wait for the quota counter (here slowed to a remote counter's pace), the window in which a
  // request used to hold a pool that a reload then closed (503 SCORING_FAILED). Reloads here reuse the compiled
  // snapshot, so they come back to back.
  const svc = await build(t, { IOC_POOL_SIZE: '2' })
  const reserve = svc.quota.reserve.bind(svc.quota)
  svc.quota.reserve = async (...args) => {
    await new Promise((resolve) => setTimeout(resolve, 15))
    return await reserve(...args)
  }
  const key = await svc.makeKey(['verdict', 'verdict_bulk'], { quota: 10_000_000 })
  const base = await svc.app.listen({ port: 0, host: '127.0.0.1' })
  const statuses = new Map<number, number>()
  const state = { stop: false }
  const client = async (c: number): Promise<void> => {
    for (let r = 0; !state.stop; r++) {
      const single = r % 4 === 3
      const res = await request(`${base}/api/v2/ioc/verdict${single ? '' : '/bulk'}`, {
        method: 'POST',
        headers: { 'x-api-key': key, 'content-type': 'application/json' },
        body: JSON.stringify(single
          ? { indicator: { value: `10.${c}.${r & 255}.1` } }
          : { indicators: Array.from({ length: 100 }, (_, i) => ({ value: `loop${c}-${r}-${i}.example` })) })
      })
      await res.body.dump()
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1)
    }
  }
  const clients = [0, 1, 2, 3].map(async (c) => await client(c))
  let reloads = 0
  for (; reloads < 4; reloads++) await svc.intel.reload()
  state.stop = true
  await Promise.all(clients)
  const answered = [...statuses.values()].reduce((a, b) => a + b, 0)
  assert.ok(answered > reloads, `requests ran during the reloads (${answered})`)
  assert.deepEqual([...statuses.keys()], [200], `every request answered 200: ${JSON.stringify([...statuses])}`)
})
