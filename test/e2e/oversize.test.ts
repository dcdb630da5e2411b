/**
 * Early refusals reach clients that are still writing: a 25 MB body over the limit gets its 413 (and a wrong content
 * type its 415, a missing key its 401) in undici, curl and Python, not a broken pipe or a reset, because the server
 * reads and drops the rest of the body before closing (lingering close).
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { Readable } from 'node:stream'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { request } from 'undici'
import { buildForFile } from '../helper.ts'

const svc = buildForFile()
const kBytes = 25 * 1024 * 1024
const kTries = 4

/** Runs a command to its end (asynchronously: the server under test runs in this process). */
async function run (cmd: string, args: string[]): Promise<{ code: number | null, stdout: string, stderr: string }> {
  return await new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    p.stdout.on('data', (d: Buffer) => { stdout += d.toString() })
    p.stderr.on('data', (d: Buffer) => { stderr += d.toString() })
    p.once('error', reject)
    p.once('close', (code) => resolve({ code, stdout, stderr }))
  })
}

async function available (cmd: string): Promise<boolean> {
  try {
    return (await run(cmd, ['--version'])).code === 0
  } catch {
    return false
  }
}

let base = ''
let file = ''
test('setup: a listening service and a 25 MB body', async () => {
  base = await svc.app.listen({ host: '127.0.0.1', port: 0 })
  const dir = mkdtempSync(join(tmpdir(), 'iocv-oversize-'))
  file = join(dir, 'body.json')
  writeFileSync(file, Buffer.alloc(kBytes, 0x20))
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }))
})

test('undici sees 413, 415 and 401 for a 25 MB body every time, with a length or chunked', async () => {
  const body = Buffer.alloc(kBytes, 0x20)
  // No content-length: the limit is found while reading.
  const chunked = (): Readable => Readable.from((function * () {
    for (let i = 0; i < 25; i++) yield body.subarray(i * 1024 * 1024, (i + 1) * 1024 * 1024)
  })())
  const cases: Array<[string, Record<string, string>, () => Buffer | Readable, number, string]> = [
    ['json with length', { 'content-type': 'application/json', 'x-api-key': svc.key }, () => body, 413, 'PAYLOAD_TOO_LARGE'],
    ['json chunked', { 'content-type': 'application/json', 'x-api-key': svc.key }, chunked, 413, 'PAYLOAD_TOO_LARGE'],
    ['text/plain', { 'content-type': 'text/plain', 'x-api-key': svc.key }, () => body, 415, 'UNSUPPORTED_MEDIA_TYPE'],
    ['no key', { 'content-type': 'application/json' }, chunked, 401, 'MISSING_API_KEY']
  ]
  for (const [name, headers, make, status, code] of cases) {
    for (let i = 0; i < kTries; i++) {
      const res = await request(`${base}/api/v2/ioc/verdict/bulk`, { method: 'POST', headers, body: make() })
      assert.equal(res.statusCode, status, name)
      assert.equal((await res.body.json() as { code: string }).code, code, name)
    }
  }
  // The service still answers afterwards.
  const ok = await request(`${base}/api/v2/ioc/health`)
  assert.equal(ok.statusCode, 200)
  await ok.body.dump()
})

test('curl sees the 413 for a 25 MB body', { skip: !(await available('curl')) && 'curl not installed' }, async () => {
  for (let i = 0; i < kTries; i++) {
    const r = await run('curl', ['-sS', '-o', '-', '-w', '\n%{http_code}', '-H', 'content-type: application/json', '-H', `x-api-key: ${svc.key}`,
      '--data-binary', `@${file}`, `${base}/api/v2/ioc/verdict/bulk`])
    assert.equal(r.code, 0, r.stderr)
    const lines = r.stdout.trim().split('\n')
    assert.equal(lines.at(-1), '413')
    assert.equal((JSON.parse(lines[0] as string) as { code: string }).code, 'PAYLOAD_TOO_LARGE')
  }
})

test('Python (http.client) sees the 413 for a 25 MB body', { skip: !(await available('python3')) && 'python3 not installed' }, async () => {
  const script = `
import http.client, sys, json
u = sys.argv[1].split('//')[1]
host, port = u.split(':')
body = open(sys.argv[2], 'rb').read()
c = http.client.HTTPConnection(host, int(port), timeout=60)
try:
    c.request('POST', '/api/v2/ioc/verdict/bulk', body=body, headers={'content-type': 'application/json', 'x-api-key': sys.argv[3]})
    r = c.getresponse()
    print(r.status, json.loads(r.read())['code'])
except Exception as e:
    print('error', type(e).__name__)
`
  for (let i = 0; i < kTries; i++) {
    const r = await run('python3', ['-c', script, base, file, svc.key])
    assert.equal(r.stdout.trim(), '413 PAYLOAD_TOO_LARGE', r.stderr)
  }
})
