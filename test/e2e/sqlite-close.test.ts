/**
 * Every SQLite database the service opens, in any thread, is closed by the service before that thread or the process
 * ends, whichever way it ends: a drain after SIGTERM (with an intel reload before it), a start that fails (the port
 * is taken, the database file is not a database), a second fault while draining, a history writer thread that dies,
 * and the CLI's commands. Nothing is left to better-sqlite3's cleanup at teardown, the path on which a native module's
 * finalizer can abort the process. Each process runs with test/fixtures/sqlite-open-log.cjs preloaded (in every
 * thread), which logs each database opened and closed.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test, type TestContext } from 'node:test'
import { request } from 'undici'
import { kSqliteOpenLog, kTestIntelCache, sqliteLeftOpen } from '../helper.ts'
import { runCli, spawnServe, ServeStartError, type Exit } from '../fixtures/serve-process.ts'

const kFaultOnSigusr2 = join(import.meta.dirname, '..', 'fixtures', 'fault-on-sigusr2.mjs')
const kFaultInHistory = join(import.meta.dirname, '..', 'fixtures', 'fault-in-history-thread.mjs')

/** A data directory and the open/close log of the processes run on it. */
function workspace (t: TestContext): { dir: string, log: string, env: Record<string, string> } {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-sqlite-close-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const log = join(dir, 'sqlite-open.log')
  return {
    dir,
    log,
    env: { IOC_DATA_DIR: join(dir, 'data'), IOC_POOL_SIZE: '1', IOC_LOG_LEVEL: 'info', IOC_INTEL_CACHE_DIR: kTestIntelCache, SQLITE_OPEN_LOG: log }
  }
}

/** Runs `ioc-verdict ...args` with the open/close log preloaded. */
async function cli (args: string[], env: Record<string, string>): Promise<Exit & { stdout: string, stderr: string }> {
  return await runCli(args, { env, nodeArgs: ['--require', kSqliteOpenLog] })
}

/** Starts serve, expecting it to fail before its banner; resolves to how it ended. */
async function failedStart (env: Record<string, string>, nodeArgs: string[] = []): Promise<ServeStartError> {
  const err = await spawnServe({ env, nodeArgs: ['--require', kSqliteOpenLog, ...nodeArgs] }).then(
    async (s) => { await s.stop('SIGKILL'); return null },
    (e: unknown) => e)
  assert.ok(err instanceof ServeStartError && err.exit !== null, `serve was expected to fail at start: ${String(err)}`)
  return err
}

test('a drained service (after bulks and an intel reload) and the CLI commands close every database they opened', { timeout: 180_000 }, async (t) => {
  const w = workspace(t)
  const s = await spawnServe({ env: { ...w.env, IOC_BOOTSTRAP_KEY: '1' }, nodeArgs: ['--require', kSqliteOpenLog] })
  t.after(async () => { await s.stop('SIGKILL') })
  assert.ok(s.key !== null)
  const indicators = Array.from({ length: 200 }, (_, i) => ({ value: `198.51.100.${i}` }))
  const res = await request(`${s.base}/api/v2/ioc/verdict/bulk`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': s.key }, body: JSON.stringify({ indicators })
  })
  assert.equal(res.statusCode, 200)
  await res.body.dump()
  s.proc.kill('SIGHUP')
  while (!s.stdout().includes('intel snapshot reloaded (SIGHUP)')) {
    assert.ok(!s.stdout().includes('intel reload failed'), s.stdout())
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  assert.deepEqual(await s.stop(), { code: 0, signal: null }, s.stderr())

  const created = await cli(['keys', 'create', '--tenant', 'acme', '--permissions', 'verdict'], w.env)
  assert.equal(created.code, 0, created.stderr)
  for (const args of [['keys', 'list'], ['keys', 'revoke', created.stdout.trim().split('_')[1] as string], ['users', 'list'], ['score', '8.8.8.8']]) {
    const r = await cli(args, w.env)
    assert.deepEqual({ code: r.code, signal: r.signal }, { code: 0, signal: null }, `${args.join(' ')}: ${r.stderr}`)
  }
  const { opened, left } = sqliteLeftOpen(w.log)
  // The service's store, its history writer's, and one per keys or users command.
  assert.ok(opened >= 6, `databases opened: ${opened}`)
  assert.deepEqual(left, [])
})

test('a start that fails because the port is taken closes every database before the process exits', { timeout: 120_000 }, async (t) => {
  const w = workspace(t)
  const holder = createServer()
  holder.listen(0, '127.0.0.1')
  await once(holder, 'listening')
  t.after(() => holder.close())
  const err = await failedStart({ ...w.env, IOC_PORT: String((holder.address() as AddressInfo).port) })
  assert.deepEqual(err.exit, { code: 1, signal: null })
  assert.match(err.stderr, /EADDRINUSE/)
  const { opened, left } = sqliteLeftOpen(w.log)
  assert.ok(opened >= 2, 'the store and the history writer had opened theirs')
  assert.deepEqual(left, [])
})

test('a start that fails on a database file that is not a database closes it before the process exits', { timeout: 120_000 }, async (t) => {
  const w = workspace(t)
  const data = w.env.IOC_DATA_DIR as string
  mkdirSync(data)
  writeFileSync(join(data, 'ioc-verdict.db'), 'this is not an SQLite database, only some text long enough to hold a header. '.repeat(20))
  const err = await failedStart(w.env)
  assert.deepEqual(err.exit, { code: 1, signal: null })
  assert.match(err.stderr, /STORE_ERROR|SQLITE_NOTADB/)
  const { opened, left } = sqliteLeftOpen(w.log)
  assert.equal(opened, 1)
  assert.deepEqual(left, [])
})

test('a second fault while the first one drains ends the process with exit 1 and every database closed', { timeout: 120_000 }, async (t) => {
  const w = workspace(t)
  const s = await spawnServe({ env: { ...w.env, IOC_BOOTSTRAP_KEY: '0', FAULT: 'double' }, nodeArgs: ['--require', kSqliteOpenLog, '--import', kFaultOnSigusr2] })
  t.after(async () => { await s.stop('SIGKILL') })
  s.proc.kill('SIGUSR2')
  assert.deepEqual(await s.exited, { code: 1, signal: null })
  assert.match(s.stdout(), /injected second uncaught exception/)
  const { opened, left } = sqliteLeftOpen(w.log)
  assert.ok(opened >= 2)
  assert.deepEqual(left, [])
})

test('a history writer thread that dies of an exception closes its database; its successor and the service close theirs', { timeout: 120_000 }, async (t) => {
  const w = workspace(t)
  const s = await spawnServe({
    env: { ...w.env, IOC_BOOTSTRAP_KEY: '0', FAULT_MARKER: join(w.dir, 'fault-marker') },
    nodeArgs: ['--require', kSqliteOpenLog, '--import', kFaultInHistory]
  })
  t.after(async () => { await s.stop('SIGKILL') })
  while (!s.stdout().includes('history worker exited; restarting')) await new Promise((resolve) => setTimeout(resolve, 50))
  // The successor starts after a second and opens its database.
  while (sqliteLeftOpen(w.log).opened < 3) await new Promise((resolve) => setTimeout(resolve, 50))
  assert.match(s.stdout(), /injected uncaught exception in the history writer/)
  assert.deepEqual(await s.stop(), { code: 0, signal: null }, s.stderr())
  assert.deepEqual(sqliteLeftOpen(w.log).left, [])
})
