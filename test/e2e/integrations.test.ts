/**
 * The integration examples of docs/INTEGRATIONS.md (examples/) run against a real listening server on 127.0.0.1:
 * curl, a Node client with undici, Python with requests, and the Splunk-style lookup (standard library).
 */
import assert from 'node:assert/strict'
import { execFile, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { promisify } from 'node:util'
import { buildForFile } from '../helper.ts'

type Json = Record<string, any>

const run = promisify(execFile)
const kExamples = join(import.meta.dirname, '..', '..', 'examples')
const svc = buildForFile()
const dir = mkdtempSync(join(tmpdir(), 'ioc-verdict-test-examples-'))
const input = join(dir, 'indicators.txt')
const kValues = ['8.8.8.8', 'example[.]com', 'not an indicator!', 'AS13335', '104.16.0.1']
let listening: Promise<NodeJS.ProcessEnv> | null = null
after(() => rmSync(dir, { recursive: true, force: true }))

/** The examples' environment: the service's URL (listening on first use) and a key. */
async function exampleEnv (): Promise<NodeJS.ProcessEnv> {
  listening ??= (async () => {
    writeFileSync(input, kValues.join('\n') + '\n')
    const base = await svc.app.listen({ port: 0, host: '127.0.0.1' })
    return { ...process.env, IOCV_URL: base, IOCV_KEY: svc.key }
  })()
  return await listening
}

/** Skips a test whose tool is not on this machine, saying which. */
function needs (cmd: string, args: string[]): string | false {
  return spawnSync(cmd, args).status === 0 ? false : `${cmd} ${args.join(' ')} is not available here`
}

function assertVerdictLines (stdout: string): void {
  const lines = stdout.trim().split('\n').map((l) => JSON.parse(l) as Json)
  assert.deepEqual(lines.map((l) => l.value), kValues)
  assert.equal(typeof lines[0]?.score, 'number')
  assert.equal(lines[2]?.score, null)
  assert.ok(lines[2]?.errors.length > 0)
  assert.equal(lines[4]?.category, 'shared_infrastructure')
}

test('the curl example writes a CSV of every indicator', { skip: needs('jq', ['--version']) }, async () => {
  const { stdout } = await run(join(kExamples, 'bulk-curl.sh'), [input], { env: await exampleEnv() })
  const rows = stdout.split('\r\n').filter((r) => r !== '')
  assert.equal(rows[0], 'value,type,normalized,score,strength,category,top_signals,error')
  assert.deepEqual(rows.slice(1).map((r) => r.split(',')[0]), kValues)
})

test('the Node example (undici) prints one verdict line per indicator', async () => {
  const { stdout } = await run(process.execPath, [join(kExamples, 'bulk-client.mjs'), input], { env: await exampleEnv(), cwd: join(import.meta.dirname, '..', '..') })
  assertVerdictLines(stdout)
})

test('the Python example (requests) prints one verdict line per indicator', { skip: needs('python3', ['-c', 'import requests']) }, async () => {
  const { stdout } = await run('python3', [join(kExamples, 'bulk_client.py'), input], { env: await exampleEnv() })
  assertVerdictLines(stdout)
})

test('the Splunk-style lookup fills the verdict columns of its CSV', { skip: needs('python3', ['--version']) }, async () => {
  const child = execFile('python3', [join(kExamples, 'splunk_lookup.py')], { env: await exampleEnv() })
  child.stdin?.end('host,value\nweb1,8.8.8.8\nweb2,\nweb3,104.16.0.1\n')
  let stdout = ''
  child.stdout?.on('data', (b: Buffer) => { stdout += b.toString() })
  const code = await new Promise((resolve) => child.once('close', resolve))
  assert.equal(code, 0)
  const rows = stdout.trim().split(/\r?\n/)
  assert.equal(rows[0], 'host,value,ioc_score,ioc_category,ioc_strength,ioc_action')
  assert.match(rows[1] as string, /^web1,8\.8\.8\.8,\d+,\w+,\w+,\w+$/)
  assert.equal(rows[2], 'web2,,,,,')
  assert.match(rows[3] as string, /^web3,104\.16\.0\.1,\d+,shared_infrastructure,/)
})
