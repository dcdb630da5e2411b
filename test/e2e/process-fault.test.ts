/**
 * Process safety: an exception or a promise rejection that nothing catches makes the service log it, drain (answered
 * requests keep their history records) and exit with code 1 so a supervisor restarts it.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { request } from 'undici'
import { openStore } from '../../src/store/index.ts'
import { kTestIntelCache, serviceEnv } from '../helper.ts'

const kRoot = join(import.meta.dirname, '..', '..')
const kFixture = join(import.meta.dirname, '..', 'fixtures', 'fault-on-sigusr2.mjs')

for (const fault of ['exception', 'rejection']) {
  test(`an unhandled ${fault} drains, keeps the answered requests' history and exits 1`, { timeout: 60_000 }, async (t) => {
    const dataDir = mkdtempSync(join(tmpdir(), 'ioc-verdict-test-fault-'))
    t.after(() => rmSync(dataDir, { recursive: true, force: true }))
    const store = await openStore({ kind: 'sqlite', path: join(dataDir, 'ioc-verdict.db') })
    const { key } = await store.createKey({ tenant: 't1', permissions: ['verdict_bulk'] })
    await store.close()
    const child = spawn(process.execPath, ['--import', kFixture, join(kRoot, 'bin', 'ioc-verdict.js'), 'serve'], {
      env: serviceEnv({ FAULT: fault, IOC_DATA_DIR: dataDir, IOC_PORT: '0', IOC_POOL_SIZE: '1', IOC_BOOTSTRAP_KEY: '0', IOC_INTEL_CACHE_DIR: kTestIntelCache, IOC_HISTORY_FLUSH_MS: '2000' }),
      stdio: ['ignore', 'pipe', 'pipe']
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (b: Buffer) => { stdout += b.toString() })
    child.stderr.on('data', (b: Buffer) => { stderr += b.toString() })
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
    let early: number | null | undefined
    void exited.then((code) => { early = code })
    while (!/listening on (http:\/\/\S+)/.test(stderr)) {
      assert.equal(early, undefined, `the service exited before listening: ${stderr}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    const base = (/listening on (http:\/\/\S+)/.exec(stderr) as RegExpExecArray)[1] as string
    const indicators = Array.from({ length: 50 }, (_, i) => ({ value: `fault-${i}.example` }))
    const res = await request(`${base}/api/v2/ioc/verdict/bulk`, { method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: JSON.stringify({ indicators }) })
    await res.body.dump()
    assert.equal(res.statusCode, 200)
    // The history flush interval is 2 s: the records are still pending when the fault strikes.
    child.kill('SIGUSR2')
    assert.equal(await exited, 1)
    assert.match(stdout, new RegExp(`"level":60.*${fault === 'exception' ? 'uncaughtException' : 'unhandledRejection'}`), 'logged at fatal')
    assert.match(stdout, /injected/)
    assert.match(stdout, /shutdown complete/)
    const after = await openStore({ kind: 'sqlite', path: join(dataDir, 'ioc-verdict.db') })
    t.after(async () => { await after.close() })
    const page = await after.searchHistory('t1', {}, 100, null)
    assert.equal(page.results.length, 50, 'every answered indicator was recorded before the exit')
  })
}
