/**
 * Graceful shutdown under load, end to end: a real `ioc-verdict serve` process takes a stream of concurrent bulks
 * over HTTP, gets SIGTERM mid-stream and must exit 0 with the history of every acknowledged (200) bulk in the store.
 * The writer is configured to hold records in memory for a while, so the shutdown itself has to flush them.
 *
 * A SIGKILL loses nothing acknowledged (the journal, test/e2e/durability.test.ts); the last test checks that an
 * acknowledged bulk reaches the store itself within the writer's flush interval (IOC_HISTORY_FLUSH_MS).
 */
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test, type TestContext } from 'node:test'
import { Agent, request } from 'undici'
import { openStore } from '../../src/store/index.ts'
import { kTestIntelCache } from '../helper.ts'
import { dbPathOf, readHistory, today } from '../fixtures/read-history.ts'

const kRoot = join(import.meta.dirname, '..', '..')
const kStreams = 6
const kBulkSize = 400
/** Bulks acknowledged before the signal is sent. */
const kBeforeSignal = 12

interface RunOptions {
  /** Close the clients' connections once every stream has stopped (a client that sees 503/ECONNRESET and backs off). */
  closeClientConnections: boolean
  env?: Record<string, string>
}

interface Server {
  dir: string
  proc: ChildProcess
  base: string
  key: string
  exited: Promise<[number | null, NodeJS.Signals | null]>
  stderr: () => string
}

/** Starts `ioc-verdict serve` on 127.0.0.1 with a fresh data dir and waits for its URL and bootstrap key (stderr). */
async function startServer (t: TestContext, env: Record<string, string>): Promise<Server> {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-shutdown-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const proc = spawn(process.execPath, [join(kRoot, 'bin', 'ioc-verdict.js'), 'serve'], {
    cwd: kRoot,
    env: {
      PATH: process.env.PATH,
      IOC_DATA_DIR: dir,
      IOC_HOST: '127.0.0.1',
      IOC_PORT: '0',
      IOC_POOL_SIZE: '2',
      IOC_LOG_LEVEL: 'warn',
      IOC_BOOTSTRAP_KEY: '1',
      IOC_INTEL_CACHE_DIR: kTestIntelCache,
      ...env
    },
    stdio: ['ignore', 'ignore', 'pipe']
  })
  const exited = once(proc, 'exit') as Promise<[number | null, NodeJS.Signals | null]>
  t.after(() => { if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL') })
  let stderr = ''
  proc.stderr!.setEncoding('utf8')
  const banner = await new Promise<{ base: string, key: string }>((resolve, reject) => {
    proc.stderr!.on('data', (d: string) => {
      stderr += d
      const base = /ioc-verdict listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(stderr)?.[1]
      const key = /^\s+(iocv_\S+)$/m.exec(stderr)?.[1]
      if (base !== undefined && key !== undefined) resolve({ base, key })
    })
    void exited.then(([code]) => reject(new Error(`server exited with ${code} before listening:\n${stderr}`)))
  })
  return { dir, proc, ...banner, exited, stderr: () => stderr }
}

async function sigtermUnderLoad (t: TestContext, options: RunOptions): Promise<void> {
  // Records wait up to 2 s (or 50,000 rows) in the writer's memory, so SIGTERM finds some there.
  const server = await startServer(t, { IOC_HISTORY_FLUSH_MS: '2000', IOC_HISTORY_BATCH: '50000', ...options.env })
  const { dir, proc, exited } = server
  const agent = new Agent({ connections: kStreams })
  t.after(async () => await agent.destroy().catch(() => {}))
  /** bulk_request_id -> indicators, for every 200. */
  const acknowledged = new Map<string, number>()
  const outcomes = new Map<string, number>()
  let signalled = false
  let serial = 0

  const stream = async (s: number): Promise<void> => {
    for (;;) {
      const n = serial++
      // Fresh addresses per bulk, so the scoring cache stays cold and history rows are distinct.
      const indicators = Array.from({ length: kBulkSize }, (_, i) => {
        const x = n * kBulkSize + i
        return { value: `10.${(x >> 16) & 255}.${(x >> 8) & 255}.${x & 255}` }
      })
      let status: number
      try {
        const res = await request(`${server.base}/api/v2/ioc/verdict/bulk`, {
          method: 'POST',
          dispatcher: agent,
          headers: { 'content-type': 'application/json', 'x-api-key': server.key },
          body: JSON.stringify({ indicators, project_id: `stream-${s}` })
        })
        status = res.statusCode
        const body = await res.body.json() as { meta?: { bulk_request_id: string, record_count: number } }
        if (status === 200 && body.meta !== undefined) {
          assert.equal(body.meta.record_count, kBulkSize)
          acknowledged.set(body.meta.bulk_request_id, body.meta.record_count)
        }
      } catch {
        status = -1 // connection refused or reset: the server has stopped listening
      }
      outcomes.set(String(status), (outcomes.get(String(status)) ?? 0) + 1)
      if (!signalled && acknowledged.size >= kBeforeSignal) {
        signalled = true
        proc.kill('SIGTERM')
      }
      if (status !== 200) return
    }
  }
  await Promise.all(Array.from({ length: kStreams }, async (_, s) => await stream(s)))
  assert.ok(signalled, `the signal was sent (outcomes ${JSON.stringify([...outcomes])}):\n${server.stderr()}`)

  if (options.closeClientConnections) await agent.close()
  const [code, signal] = await exited
  // Only 200s and the refusals of a closing server (503 or a closed connection) were seen.
  for (const status of outcomes.keys()) assert.ok(['200', '503', '-1'].includes(status), `unexpected status ${status}`)

  const stored = readHistory(dir)
  const perBulk = new Map<string | null, number>()
  for (const { record } of stored) perBulk.set(record.bulk_request_id, (perBulk.get(record.bulk_request_id) ?? 0) + 1)
  for (const [id, n] of acknowledged) assert.equal(perBulk.get(id), n, `bulk ${id}: every indicator of an acknowledged bulk is in history`)
  // Nothing was written that the clients were not told about either.
  assert.deepEqual([...perBulk.keys()].sort(), [...acknowledged.keys()].sort())
  const rows = stored.length
  assert.equal(rows, acknowledged.size * kBulkSize)

  const store = await openStore({ kind: 'sqlite', path: dbPathOf(dir) })
  t.after(async () => await store.close())
  assert.equal((await store.usage('default', null, today())).total, rows, 'usage equals rows')
  // A graceful stop leaves nothing spooled for the next start.
  const spool = join(dir, 'spool', 'history.spool')
  assert.ok(!existsSync(spool) || statSync(spool).size === 0)
  assert.equal(signal, null, server.stderr())
  assert.equal(code, 0, `graceful shutdown exits 0:\n${server.stderr()}`)
}

test('SIGTERM under a stream of bulks exits 0 with every acknowledged indicator in history and usage equal to rows', async (t) => {
  await sigtermUnderLoad(t, { closeClientConnections: true })
})

test('SIGTERM exits 0 even when clients keep their keep-alive connections open', async (t) => {
  await sigtermUnderLoad(t, { closeClientConnections: false, env: { IOC_SHUTDOWN_TIMEOUT_MS: '5000' } })
})

test('a bulk acknowledged more than one flush interval before a SIGKILL is in history after the kill', async (t) => {
  const server = await startServer(t, { IOC_HISTORY_FLUSH_MS: '100' })
  const res = await request(`${server.base}/api/v2/ioc/verdict/bulk`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': server.key },
    body: JSON.stringify({ indicators: [{ value: '198.51.100.1' }, { value: 'example.com' }] })
  })
  assert.equal(res.statusCode, 200)
  const { meta } = await res.body.json() as { meta: { bulk_request_id: string } }
  // Ten flush intervals: the documented window has passed (this waits for an event, it asserts no duration).
  await new Promise((resolve) => setTimeout(resolve, 1_000))
  server.proc.kill('SIGKILL')
  await server.exited
  assert.equal(readHistory(server.dir).filter((r) => r.record.bulk_request_id === meta.bulk_request_id).length, 2)
})
