/**
 * A retro-hunt pass owed (cut by a stop or a crash: the note a pass makes when it starts, cleared only when it
 * finishes uncut) is run by the next start on the same data directory: a pass over every listing of its snapshot,
 * with no swap, that finds the hit the cut pass would have found, then clears the debt. A file feed edited while the
 * service was stopped is hunted at the next start too. Which passes note a debt, and when, is tested on the hunter
 * itself (test/pool/retro-thread.test.ts).
 */
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { loadConfig } from '../../src/config.ts'
import { startService, type Service } from '../../src/service.ts'
import { waitFor } from '../fixtures/read-history.ts'
import { feedHost, retroEnv, writeFeedManifest } from '../fixtures/retro-feed.ts'

const kDomain = 'retro-resume.example'

/** Resolves once `svc` finds `key`'s query of `value` in history: a pass sees only stored queries. */
async function inHistory (svc: Service, key: string, value: string): Promise<void> {
  await waitFor('the query in history', async () => {
    const res = await svc.app.inject({ method: 'GET', url: `/api/v2/mgmt/enrich-logs/search-history?indicator_value=${value}`, headers: { 'x-api-key': key } })
    return res.statusCode === 200 && res.json().results.length > 0 ? true : undefined
  })
}

test('a pass owed at a stop runs at the next start, over every listing, and finds the hit', { timeout: 400_000 }, async (t) => {
  const host = await feedHost(t, 'unrelated-resume-entry.example\n')
  const dir = mkdtempSync(join(tmpdir(), 'ioc-retro-resume-'))
  let svc: Service | null = null
  // One hook, the running service closed before the folder goes (after hooks run in the order they were added).
  t.after(async () => {
    await svc?.app.close()
    rmSync(dir, { recursive: true, force: true })
  })
  const manifest = join(dir, 'manifest.json')
  writeFeedManifest(manifest, 'resume_feed', host.url)
  const env = retroEnv(join(dir, 'data'), manifest)

  // The first run hunts nothing (lookback 0): a tenant asks about the domain, then the feed starts listing it.
  svc = await startService(loadConfig({ ...env, IOC_RETRO_HUNT_DAYS: '0' }))
  const key = (await svc.store.createKey({ tenant: 'tenant-r', permissions: ['verdict', 'mgmt'], quota: null })).key
  const admin = (await svc.store.createKey({ tenant: 'ops', permissions: ['verdict', 'mgmt', 'admin'], quota: null })).key
  const refresh = async (s: Service): Promise<void> => {
    const res = await s.app.inject({ method: 'POST', url: '/api/v2/mgmt/intel/sources/refresh', headers: { 'x-api-key': admin } })
    assert.equal(res.statusCode, 200)
  }
  await refresh(svc)
  const asked = await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'x-api-key': key }, payload: { indicator: { value: kDomain } } })
  assert.equal(asked.statusCode, 200)
  const then = { score: asked.json().risk.score, category: asked.json().risk.category }
  await inHistory(svc, key, kDomain)
  host.set(`unrelated-resume-entry.example\n${kDomain}\n`)
  await refresh(svc)
  // What a pass leaves when the process dies during it: the note it made as it started, never cleared.
  await svc.store.retroHunt.noteOwed(Date.now() - 86_400_000)
  await svc.app.close()
  svc = null

  // The next start: the pass owed runs by itself, with no swap.
  svc = await startService(loadConfig(env))
  const second = svc
  const hits = await waitFor('the hit of the owed pass', async () => {
    const res = await second.app.inject({ method: 'GET', url: '/api/v2/mgmt/retro-hunt/hits', headers: { 'x-api-key': key } })
    assert.equal(res.statusCode, 200, res.body)
    return res.json().hits.length > 0 ? res.json().hits : undefined
  }, 240_000) // a pass over every listing, at the lowest CPU priority: long on a busy machine
  assert.equal(hits.length, 1)
  assert.equal(hits[0].indicator.value, kDomain)
  assert.deepEqual(hits[0].cause, { signal_id: 'resume_feed:exact', source: 'resume_feed', match: 'exact', listed_value: kDomain })
  assert.deepEqual(hits[0].then, then)
  await second.retroHunt.idle()
  assert.equal(await second.store.retroHunt.owed(), null, 'the debt is cleared once the pass finished')
  assert.equal(second.retroHunt.state().last?.cut, false)
  assert.equal(second.retroHunt.state().passes, 1)
})

test('a file feed that starts listing an indicator while the service is stopped gives its hit at the next start', { timeout: 400_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ioc-retro-file-'))
  let svc: Service | null = null
  t.after(async () => {
    await svc?.app.close()
    rmSync(dir, { recursive: true, force: true })
  })
  const feeds = join(dir, 'feeds')
  mkdirSync(feeds)
  const list = join(feeds, 'local.txt')
  writeFileSync(list, 'unrelated-file-entry.example\n')
  writeFileSync(join(feeds, 'manifest.json'), JSON.stringify({
    feeds: [{ name: 'local_feed', format: 'plain', path: 'local.txt', direction: 'malicious', group: 'threat_feed', subgroup: 'malware_distribution', category: 'malware', confidence: 0.95, half_life_days: 0 }]
  }))
  const env = retroEnv(join(dir, 'data'), join(feeds, 'manifest.json'))
  svc = await startService(loadConfig(env))
  const key = (await svc.store.createKey({ tenant: 'tenant-f', permissions: ['verdict', 'mgmt'], quota: null })).key
  const value = 'file-edited.example'
  const asked = await svc.app.inject({ method: 'POST', url: '/api/v2/ioc/verdict', headers: { 'x-api-key': key }, payload: { indicator: { value } } })
  assert.equal(asked.statusCode, 200)
  await inHistory(svc, key, value)
  await svc.app.close()
  svc = null

  // Edited while no service runs, as an operator updates a local list and restarts.
  writeFileSync(list, `unrelated-file-entry.example\n${value}\n`)
  svc = await startService(loadConfig(env))
  const second = svc
  const hits = await waitFor('the hit at the next start', async () => {
    const res = await second.app.inject({ method: 'GET', url: '/api/v2/mgmt/retro-hunt/hits', headers: { 'x-api-key': key } })
    assert.equal(res.statusCode, 200, res.body)
    return res.json().hits.length > 0 ? res.json().hits : undefined
  }, 240_000)
  assert.deepEqual(hits.map((h: Record<string, any>) => [h.indicator.value, h.cause.source, h.then.score]), [[value, 'local_feed', asked.json().risk.score]])
  await second.retroHunt.idle()
  assert.equal(second.retroHunt.state().last?.raised, 1, 'from the snapshot last hunted with, read from the intel cache: the new listing alone')

  // A restart with nothing changed hunts nothing.
  await svc.app.close()
  svc = await startService(loadConfig(env))
  assert.equal(await svc.retroHunt.resumeOwed(svc.intel.data), false)
  assert.equal((await svc.store.retroHunt.hunted())?.version, svc.intel.data.header.version)
})
