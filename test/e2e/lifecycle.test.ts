/**
 * The service's parts (kServiceParts, src/service.ts) over one lifecycle: started in the registry's order, closed and
 * destroyed in the reverse order, unwound in reverse when a start fails; a destroy aborts a feed download in flight;
 * docs/ARCHITECTURE.md shows the registry as it is.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { test, type TestContext } from 'node:test'
import pino from 'pino'
import { loadConfig, type Config } from '../../src/config.ts'
import { lifecycleTable } from '../../src/lifecycle.ts'
import { kServiceParts, startService, type Service } from '../../src/service.ts'
import { kFailOnStartEntry } from '../fixtures/fail-on-start.ts'
import { kTestIntelCache, smallRegistries } from '../helper.ts'

const kNames = kServiceParts.map((p) => p.name)

/** A data dir for one test, and the config of a service on it. */
function configFor (t: TestContext, env: Record<string, string> = {}): Readonly<Config> {
  const dir = mkdtempSync(join(tmpdir(), 'ioc-verdict-test-lifecycle-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  return loadConfig({ IOC_DATA_DIR: dir, IOC_POOL_SIZE: '0', IOC_BOOTSTRAP_KEY: '0', IOC_INTEL_CACHE_DIR: kTestIntelCache, IOC_LOG_LEVEL: 'debug', ...env })
}

/** A logger at debug level whose lines are kept; `events(msg)` lists the parts the lifecycle logged `msg` for. */
function capture (): { logger: pino.Logger, events: (msg: string) => string[] } {
  const lines: string[] = []
  const logger = pino({ level: 'debug' }, new Writable({ write (chunk, _enc, cb) { lines.push(String(chunk)); cb() } }))
  const events = (msg: string): string[] => lines.map((l) => JSON.parse(l) as { component?: string, msg: string, part?: string })
    .filter((l) => l.component === 'lifecycle' && l.msg === msg).map((l) => l.part as string)
  return { logger, events }
}

test('docs/ARCHITECTURE.md shows the lifecycle table as the registry renders it', () => {
  const doc = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'ARCHITECTURE.md'), 'utf8')
  const at = doc.indexOf('<!-- lifecycle table: npm run docs:lifecycle -->\n')
  const end = doc.indexOf('\n<!-- end of lifecycle table -->')
  assert.ok(at >= 0 && end > at, 'the table is marked')
  assert.equal(doc.slice(doc.indexOf('\n', at) + 1, end), lifecycleTable(kServiceParts))
})

test('a service starts its parts in the registry\'s order and closing the app closes them in reverse', async (t) => {
  const { logger, events } = capture()
  const svc = await startService(configFor(t), { logger })
  assert.deepEqual(svc.parts, kNames)
  assert.deepEqual(events('part started'), kNames)
  await svc.app.close()
  assert.deepEqual(events('part closed'), [...kNames].reverse())
  assert.deepEqual(events('part destroyed'), [])
})

test('a destroy stops every part in reverse order, each once, and a close afterwards changes nothing', async (t) => {
  const { logger, events } = capture()
  const svc = await startService(configFor(t), { logger })
  await Promise.all([svc.destroy(new Error('test')), svc.destroy()])
  await svc.app.close()
  const stopped = [...events('part destroyed'), ...events('part closed')]
  assert.deepEqual(stopped.sort(), [...kNames].sort(), 'each part stopped once')
  assert.deepEqual(events('part destroyed'), ['http', 'feeds', 'webhooks', 'intel', 'history'], 'the parts with work to stop now, in reverse')
  assert.deepEqual(events('part closed'), ['retro-hunt', 'fleet', 'quota', 'store', 'data-dir'], 'then the others, closed, in reverse')
})

test('a start that fails at the scoring pool stops what started in reverse (history after scoring), and frees the data dir', async (t) => {
  const { logger, events } = capture()
  const config = configFor(t, { IOC_POOL_SIZE: '1' })
  await assert.rejects(startService(config, { logger, scoringEntry: kFailOnStartEntry }), /the thread did not start/)
  assert.deepEqual(events('part started'), ['data-dir', 'store', 'quota', 'history', 'fleet'])
  assert.deepEqual(events('part closed'), ['fleet', 'history', 'quota', 'store', 'data-dir'])
  // The lock was released: the same data dir starts again.
  const again = await startService(config, { logger: pino({ level: 'silent' }) })
  await again.app.close()
})

test('a destroy during a feed download aborts the download and returns at once', { timeout: 60_000 }, async (t) => {
  // A feed host that sends the headers and a first chunk, then nothing more (for longer than the test runs).
  let arrived: (req: IncomingMessage) => void = () => {}
  const downloading = new Promise<IncomingMessage>((resolve) => { arrived = resolve })
  const host = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' })
    res.write('# slow feed\n10.1.0.1\n', () => { arrived(req) })
  })
  host.listen(0, '127.0.0.1')
  await new Promise((resolve) => host.once('listening', resolve))
  t.after(() => { host.closeAllConnections(); host.close() })
  const config = configFor(t, { ...smallRegistries(), IOC_INTEL_CACHE_DIR: '' })
  const manifest = join(config.dataDir, 'manifest.json')
  writeFileSync(manifest, JSON.stringify({
    feeds: [{
      name: 'slow_list',
      format: 'netset',
      direction: 'malicious',
      group: 'threat_feed',
      subgroup: 'attack_source',
      category: 'abuse',
      confidence: 0.8,
      half_life_days: 0,
      url: `http://127.0.0.1:${(host.address() as AddressInfo).port}/slow.netset`,
      refresh_seconds: 3600,
      // Far longer than the test's own timeout: a destroy that waited for it would fail the test.
      timeout_seconds: 3600
    }]
  }))
  const { logger, events } = capture()
  const svc: Service = await startService({ ...config, feeds: manifest }, { logger })
  const req = await downloading
  const cut = new Promise<void>((resolve) => { req.socket.once('close', () => resolve()) })
  await svc.destroy()
  await cut
  assert.deepEqual(events('part destroyed'), ['http', 'feeds', 'webhooks', 'intel', 'history'])
  assert.equal(svc.feeds.rows()[0]?.status, 'pending', 'an aborted download records nothing')
})
