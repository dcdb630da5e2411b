import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer as createHttpServer, type Server } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { build } from '../helper.ts'

const kBench = join(import.meta.dirname, '..', '..', 'bench', 'capacity.ts')

/** Runs the capacity bench in a child process (asynchronously: the service under test runs in this one). */
async function runBench (args: string[]): Promise<{ code: number | null, stdout: string, stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', kBench, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d: Buffer) => { stdout += d.toString() })
  child.stderr.on('data', (d: Buffer) => { stderr += d.toString() })
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
  return { code, stdout, stderr }
}

/** A fresh directory for the bench's reports, removed after the test. */
function outDir (t: TestContext): string {
  const out = mkdtempSync(join(tmpdir(), 'ioc-verdict-capacity-test-'))
  t.after(() => rmSync(out, { recursive: true, force: true }))
  return out
}

test('the capacity bench measures a deployment it did not start and writes the JSON and HTML reports with a sizing', async (t) => {
  const svc = await build(t)
  await svc.app.listen({ port: 0, host: '127.0.0.1' })
  const url = `http://127.0.0.1:${(svc.app.server.address() as AddressInfo).port}`
  const out = outDir(t)

  const run = await runBench(['--url', url, '--key', svc.key, '--duration', '1', '--bulk', '200', '--concurrency', '1,2', '--warmup', '2', '--out', out])
  assert.equal(run.code, 0, run.stderr)
  assert.ok(existsSync(join(out, 'capacity.json')))
  assert.ok(existsSync(join(out, 'capacity.html')))

  const report = JSON.parse(readFileSync(join(out, 'capacity.json'), 'utf8')) as {
    rows: Array<{ concurrency: number, indicatorsPerSec: number, requests: number, errors: number, mainGcUsPerIndicator: number | null }>
    sizing: { indicators_per_sec: number, p99_ms: number, concurrency: number }
    sentence: string
    options: { key: string }
    client_bound: string[]
  }
  assert.ok(report.rows.length >= 1)
  for (const row of report.rows) {
    assert.ok(row.requests > 0)
    assert.equal(row.errors, 0)
    // The service's main-thread garbage collection time, read from its /metrics around the level.
    assert.ok(typeof row.mainGcUsPerIndicator === 'number' && row.mainGcUsPerIndicator >= 0, String(row.mainGcUsPerIndicator))
  }
  assert.match(run.stdout, /srv µs\/ind +gc µs\/ind/)
  assert.ok(report.sizing.indicators_per_sec > 0)
  assert.ok(report.sizing.p99_ms > 0)
  assert.ok([1, 2].includes(report.sizing.concurrency))
  assert.notEqual(report.options.key, svc.key)
  // Levels where the bench's own client was near a full core are named, so a reader knows what limited them.
  assert.ok(Array.isArray(report.client_bound))
  for (const level of report.client_bound) assert.match(level, / c=\d+ \((9\d|1\d\d)(\.\d)?%\)$/)
  if (report.client_bound.length > 0) assert.match(run.stdout, /^client-bound /m)
  assert.match(report.sentence, /^one instance sustains \d+ indicators\/s at p99 <= [\d.]+ ms .*; for \d+ indicators\/s run \d+ instances/)

  const html = readFileSync(join(out, 'capacity.html'), 'utf8')
  assert.ok(html.includes(report.sentence.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)))
  assert.match(html, /<svg/)
  assert.doesNotMatch(html, /(src|href)\s*=\s*["']?https?:\/\//i)
  assert.doesNotMatch(html, /<(script|link|img|iframe)\b/i)
  assert.ok(!html.includes(svc.key) && !run.stdout.includes(svc.key))
  assert.match(run.stdout, /one instance sustains/)
})

test('with several --url the capacity bench drives every instance at once and sizes on the fleet, history drained on each', async (t) => {
  const svc = await build(t)
  await svc.app.listen({ port: 0, host: '127.0.0.1' })
  // A second address of the same instance stands in for a second instance sharing its store and key.
  const second = createHttpServer((req, res) => { svc.app.routing(req, res) })
  await new Promise<void>((resolve) => second.listen(0, '127.0.0.1', resolve))
  t.after(() => second.close())
  const urls = [svc.app.server, second].map((s) => `http://127.0.0.1:${(s.address() as AddressInfo).port}`)
  const out = outDir(t)

  const run = await runBench(['--url', urls[0] as string, '--url', urls[1] as string, '--key', svc.key, '--duration', '1', '--bulk', '200', '--concurrency', '1,2',
    '--warmup', '1', '--out', out])
  assert.equal(run.code, 0, run.stderr)
  const report = JSON.parse(readFileSync(join(out, 'capacity.json'), 'utf8')) as {
    instances: number
    rows: Array<{ target: string, concurrency: number, indicators: number, seconds: number, historyDrainMs: number | null, sustainedIndicatorsPerSec: number | null, errors: number }>
    sizing: { indicators_per_sec: number, concurrency: number }
    sentence: string
  }
  assert.equal(report.instances, 2)
  const levels = [...new Set(report.rows.map((r) => r.concurrency))]
  assert.ok(levels.length >= 1)
  for (const c of levels) {
    const at = report.rows.filter((r) => r.concurrency === c)
    assert.deepEqual(at.map((r) => r.target), ['instance1', 'instance2', 'fleet'])
    const [a, b, fleet] = at as [typeof at[0], typeof at[0], typeof at[0]]
    assert.equal(fleet.indicators, a.indicators + b.indicators)
    assert.equal(fleet.errors, 0)
    assert.equal(fleet.historyDrainMs, Math.max(a.historyDrainMs as number, b.historyDrainMs as number), 'the fleet waits for every instance\'s history')
    assert.equal(fleet.sustainedIndicatorsPerSec, Math.round(fleet.indicators / (fleet.seconds + (fleet.historyDrainMs as number) / 1000)))
  }
  assert.equal(report.sizing.indicators_per_sec, report.rows.find((r) => r.target === 'fleet' && r.concurrency === report.sizing.concurrency)?.sustainedIndicatorsPerSec)
  assert.match(report.sentence, /^2 instances together sustain \d+ indicators\/s at p99 <= [\d.]+ ms \(concurrency \d each\)/)
  assert.match(run.stdout, /^fleet of 2 /m)
})

test('the capacity bench rejects bad options with a clear error and a non-zero exit, and writes nothing', async (t) => {
  const out = outDir(t)
  const cases: Array<[string[], RegExp]> = [
    [['--bulk', 'ten'], /--bulk/],
    [['--mix', 'ip=40,url=60'], /--mix/],
    [['--repeat', '1.5'], /--repeat/],
    [['--signal-details', 'some'], /--signal-details/],
    [['--format', 'xml'], /--format/],
    [['--concurrency', '4,2'], /--concurrency/],
    [['--url', 'http://127.0.0.1:1'], /--key/],
    [['--url', 'not a url', '--key', 'k'], /--url/],
    [['--url', 'http://127.0.0.1:1', '--url', 'http://127.0.0.1:1/', '--key', 'k'], /same instance twice/],
    [['--frobnicate'], /frobnicate/]
  ]
  const runs = await Promise.all(cases.map(async ([args]) => await runBench([...args, '--out', out])))
  for (const [i, [args, message]] of cases.entries()) {
    const run = runs[i] as Awaited<ReturnType<typeof runBench>>
    assert.equal(run.code, 2, args.join(' '))
    assert.match(run.stderr, /^error: /)
    assert.match(run.stderr, message)
  }
  assert.ok(!existsSync(join(out, 'capacity.json')))
})

test('a deployment that refuses the key or cannot be reached ends the bench with a one-line error, exit 1 and no report', async (t) => {
  const svc = await build(t)
  await svc.app.listen({ port: 0, host: '127.0.0.1' })
  const url = `http://127.0.0.1:${(svc.app.server.address() as AddressInfo).port}`
  const out = outDir(t)
  const common = ['--duration', '1', '--bulk', '50', '--concurrency', '1', '--warmup', '1', '--out', out]
  const refused = await runBench(['--url', url, '--key', 'iocv_notakey_x', ...common])
  assert.equal(refused.code, 1, refused.stderr)
  assert.match(refused.stderr, /^error: .*401 INVALID_API_KEY.*check --key/m)
  // A closed port: the service's own, once it has stopped listening.
  await svc.app.close()
  const gone = await runBench(['--url', url, '--key', svc.key, ...common])
  assert.equal(gone.code, 1, gone.stderr)
  assert.match(gone.stderr, new RegExp(`^error: cannot reach ${url}: ECONNREFUSED`, 'm'))
  for (const run of [refused, gone]) assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace')
  assert.ok(!existsSync(join(out, 'capacity.json')))
})

/** Listens on 127.0.0.1 and resolves with the server's base URL. */
async function listen (server: Server, scheme: 'http' | 'https'): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}`
}

test('a server that is not ioc-verdict, or whose certificate is not trusted, is refused before anything is measured', async (t) => {
  const out = outDir(t)
  const common = ['--key', 'iocv_any_key', '--duration', '1', '--bulk', '50', '--concurrency', '1', '--warmup', '1', '--out', out]
  // Answers 200 with an empty JSON object to everything, as a misrouted proxy might.
  const other = createHttpServer((_req, res) => { res.setHeader('content-type', 'application/json'); res.end('{}') })
  const tls = join(import.meta.dirname, '..', 'fixtures', 'tls')
  const selfSigned = createHttpsServer({ key: readFileSync(join(tls, 'key.pem')), cert: readFileSync(join(tls, 'cert.pem')) }, (_req, res) => { res.end('{}') })
  t.after(() => { other.close(); selfSigned.close() })
  const [otherUrl, tlsUrl] = await Promise.all([listen(other, 'http'), listen(selfSigned as unknown as Server, 'https')])
  const [notUs, untrusted] = await Promise.all([runBench(['--url', otherUrl, ...common]), runBench(['--url', tlsUrl, ...common])])
  assert.equal(notUs.code, 1, notUs.stderr)
  assert.match(notUs.stderr, /^error: service answered a bulk of 3 indicators without 3 results: is it ioc-verdict\?$/m)
  assert.equal(untrusted.code, 1, untrusted.stderr)
  assert.match(untrusted.stderr, new RegExp(`^error: cannot reach ${tlsUrl}: DEPTH_ZERO_SELF_SIGNED_CERT .*NODE_EXTRA_CA_CERTS`, 'm'))
  for (const run of [notUs, untrusted]) assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace')
  assert.ok(!existsSync(join(out, 'capacity.json')))
})

test('a deployment that sheds every level with 503 OVERLOADED gets no sizing, with the reason, and no rate from refusals', async (t) => {
  const out = outDir(t)
  // Answers like ioc-verdict to the bench's 3-indicator check and its single call, and refuses every larger bulk as
  // an instance whose history writer is behind does.
  const overloaded = createHttpServer((req, res) => {
    let body = ''
    req.on('data', (d: Buffer) => { body += d.toString() })
    req.on('end', () => {
      res.setHeader('content-type', 'application/json')
      const parsed = body === '' ? {} : JSON.parse(body) as { indicators?: unknown[] }
      const n = parsed.indicators?.length ?? 0
      if (req.url === '/api/v2/ioc/verdict') {
        res.end(JSON.stringify({ risk: { score: 10 } }))
      } else if (req.url === '/api/v2/ioc/verdict/bulk' && n <= 3) {
        res.end(JSON.stringify({ meta: {}, results: Array.from({ length: n }, () => ({ risk: { score: 10 } })) }))
      } else if (req.url === '/api/v2/ioc/verdict/bulk') {
        res.statusCode = 503
        res.setHeader('retry-after', '1')
        res.end(JSON.stringify({ error: { code: 'OVERLOADED', message: 'history writer is behind; retry shortly' } }))
      } else {
        res.end('{}')
      }
    })
  })
  t.after(() => overloaded.close())
  const url = await listen(overloaded, 'http')
  const run = await runBench(['--url', url, '--key', 'iocv_any_key', '--duration', '1', '--bulk', '50', '--concurrency', '1,2', '--warmup', '0', '--out', out])
  assert.equal(run.code, 1, run.stderr)
  assert.match(run.stdout, /^no sizing: no level of the sweep completed without errors \(c=1: 503 OVERLOADED x\d+.*\); 503 OVERLOADED is the deployment refusing load/m)
  const report = JSON.parse(readFileSync(join(out, 'capacity.json'), 'utf8')) as {
    rows: Array<{ requests: number, indicatorsPerSec: number, requestsPerSec: number, errors: number }>
    sizing: unknown
  }
  assert.equal(report.sizing, null)
  assert.ok(report.rows.length >= 1)
  for (const row of report.rows) {
    // Refusals are errors, not throughput.
    assert.ok(row.errors > 0)
    assert.equal(row.requests, 0)
    assert.equal(row.indicatorsPerSec, 0)
    assert.equal(row.requestsPerSec, 0)
  }
  // A level without answers has no latency: '-' in the table, left out of the charts.
  assert.doesNotMatch(readFileSync(join(out, 'capacity.html'), 'utf8'), /NaN/)
  assert.match(run.stdout, /^service bulk json r=0\.8 +service +1 +0 +0 +0 +- +- /m)
})
