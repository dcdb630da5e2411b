/**
 * A first start's bootstrap key is shown to the operator whatever happens to that start: a start that fails before
 * every part has started makes no key (the next start makes and shows one), and a start that made its key but cannot
 * listen shows the key with its error (the next start finds a key and shows none). The data directory a first start
 * makes, which holds every tenant's history, is its owner's alone.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { createServer, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test, type TestContext } from 'node:test'
import { request } from 'undici'
import { kTestIntelCache } from '../helper.ts'
import { runCli, spawnServe, ServeStartError } from '../fixtures/serve-process.ts'

function env (t: TestContext): Record<string, string> {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-bootstrap-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  return { IOC_DATA_DIR: join(dir, 'data'), IOC_POOL_SIZE: '0', IOC_LOG_LEVEL: 'warn', IOC_INTEL_CACHE_DIR: kTestIntelCache, IOC_RETRO_HUNT_DAYS: '0' }
}

async function failedStart (e: Record<string, string>): Promise<ServeStartError> {
  const err = await spawnServe({ env: e }).then(async (s) => { await s.stop('SIGKILL'); return null }, (x: unknown) => x)
  assert.ok(err instanceof ServeStartError && err.exit !== null, `serve was expected to fail at start: ${String(err)}`)
  assert.deepEqual(err.exit, { code: 1, signal: null })
  return err
}

async function verdictStatus (base: string, key: string): Promise<number> {
  const res = await request(`${base}/api/v2/ioc/verdict`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key }, body: JSON.stringify({ indicator: { value: '198.51.100.7' } })
  })
  await res.body.dump()
  return res.statusCode
}

test('a first start that cannot listen shows the key it made; the next start shows none and that key works', { timeout: 120_000 }, async (t) => {
  const e = env(t)
  const holder = createServer()
  holder.listen(0, '127.0.0.1')
  await once(holder, 'listening')
  t.after(() => holder.close())
  const err = await failedStart({ ...e, IOC_PORT: String((holder.address() as AddressInfo).port) })
  assert.match(err.stderr, /EADDRINUSE/)
  assert.match(err.stderr, /did not start, but its first start created a bootstrap API key/)
  const shown = /^\s+(iocv_\S+)$/m.exec(err.stderr)?.[1]
  assert.ok(shown !== undefined, err.stderr)

  const s = await spawnServe({ env: e })
  t.after(async () => { await s.stop('SIGKILL') })
  assert.equal(s.key, null, 'the store holds the key the failed start showed')
  assert.equal(await verdictStatus(s.base, shown), 200)
  assert.deepEqual(await s.stop(), { code: 0, signal: null })
})

test('a first start that fails before every part has started makes no key; the next start makes and shows one', { timeout: 120_000 }, async (t) => {
  const e = env(t)
  // Nothing listens on port 1: the quota part (Redis) fails to start, after the store has opened.
  const err = await failedStart({ ...e, IOC_REDIS_URL: 'redis://127.0.0.1:1' })
  assert.match(err.stderr, /QUOTA_UNAVAILABLE/)
  assert.doesNotMatch(err.stderr, /iocv_/)
  const list = await runCli(['keys', 'list'], { env: e })
  assert.equal(list.code, 0, list.stderr)
  assert.equal(list.stdout.trim(), '', 'no key was made')

  const s = await spawnServe({ env: e })
  t.after(async () => { await s.stop('SIGKILL') })
  assert.ok(s.key !== null, 'the next start makes a key and shows it')
  assert.equal(statSync(e.IOC_DATA_DIR as string).mode & 0o777, 0o700, 'the data directory is its owner\'s alone')
  assert.equal(await verdictStatus(s.base, s.key), 200)
  assert.deepEqual(await s.stop(), { code: 0, signal: null })
})
