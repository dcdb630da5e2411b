/**
 * The ready-to-paste commands work as printed: a first start's banner carries the bootstrap key in its curl lines,
 * `keys create` prints lines for the key it made (the key alone stays on stdout), and a later start's lines read the
 * key from $IOCV_KEY. Each command is run by /bin/sh exactly as printed (continuation lines joined as a shell joins
 * them) against the real server, and must get a real answer.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { kTestIntelCache } from '../helper.ts'
import { freePort, runCli, spawnServe } from '../fixtures/serve-process.ts'

/** Runs a shell command line, as a person pasting it would. */
async function sh (line: string, env: Record<string, string> = {}): Promise<{ code: number | null, stdout: string, stderr: string }> {
  return await new Promise((resolve) => {
    const child = execFile('/bin/sh', ['-c', line], { env: { PATH: process.env.PATH, ...env } }, (_err, stdout, stderr) => {
      resolve({ code: child.exitCode, stdout, stderr })
    })
  })
}

/** The commands of the block that starts after the line beginning with `heading`: each line, `\`-continued ones joined. */
function commands (text: string, heading: string): string[] {
  const lines = text.split('\n')
  const start = lines.findIndex((l) => l.startsWith(heading))
  assert.ok(start >= 0, `no "${heading}" in:\n${text}`)
  const out: string[] = []
  let current = ''
  for (const line of lines.slice(start + 1)) {
    if (!line.startsWith('  ')) break
    current += `${line}\n` // as pasted: the shell joins a line that ends with \ to the next
    if (line.endsWith('\\')) continue
    if (!line.trimStart().startsWith('#')) out.push(current.trim())
    current = ''
  }
  return out
}

/** Runs each command with /bin/sh; every answer is JSON without an error code. Returns the answers by path. */
async function paste (cmds: string[], env: Record<string, string> = {}): Promise<Map<string, Record<string, unknown>>> {
  const answers = new Map<string, Record<string, unknown>>()
  for (const cmd of cmds) {
    const r = await sh(cmd, env)
    assert.equal(r.code, 0, `${cmd}\n${r.stderr}`)
    const body = JSON.parse(r.stdout) as Record<string, unknown>
    assert.equal(body.code, undefined, `${cmd}\n${r.stdout}`)
    const path = /https?:\/\/[^/\s']+(\/[^?\s']*)/.exec(cmd)?.[1] as string
    answers.set(path, body)
  }
  return answers
}

test('the commands a first start, keys create and a later start print work when pasted into a shell', { timeout: 180_000 }, async (t) => {
  const curl = await sh('command -v curl')
  assert.equal(curl.code, 0, 'curl is installed (the commands are curl commands)')
  const dir = mkdtempSync(join(tmpdir(), 'iocv-try-it-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const port = await freePort()
  const env = { IOC_DATA_DIR: dir, IOC_PORT: String(port), IOC_POOL_SIZE: '1', IOC_LOG_LEVEL: 'warn', IOC_INTEL_CACHE_DIR: kTestIntelCache, IOC_HISTORY_FLUSH_MS: '20' }

  const first = await spawnServe({ env: { ...env, IOC_BOOTSTRAP_KEY: '1' } })
  t.after(async () => { await first.stop('SIGKILL') })
  assert.ok(first.key !== null)
  const banner = commands(first.stderr(), 'Try it')
  assert.ok(banner.filter((c) => c.includes(`x-api-key: ${first.key as string}`)).length >= 3, 'the key is in the commands')
  const answers = await paste(banner)
  assert.deepEqual([...answers.keys()], ['/api/v2/ioc/health', '/api/v2/ioc/verdict', '/api/v2/ioc/verdict/bulk', '/api/v2/mgmt/enrich-logs/search-history'])
  assert.equal(typeof (answers.get('/api/v2/ioc/verdict')?.risk as { score: number }).score, 'number')
  assert.equal((answers.get('/api/v2/ioc/verdict/bulk')?.results as unknown[]).length, 2)
  assert.ok(Array.isArray(answers.get('/api/v2/mgmt/enrich-logs/search-history')?.results))

  // A key made by the CLI while the service runs: its lines show only what it may call.
  const made = await runCli(['keys', 'create', '--tenant', 'acme', '--permissions', 'verdict'], { env })
  assert.equal(made.code, 0, made.stderr)
  const key = made.stdout.trim()
  assert.equal(made.stdout, `${key}\n`, 'stdout holds the key alone')
  const lines = commands(made.stderr, 'Try it')
  assert.ok(lines.every((c) => !c.includes('x-api-key') || c.includes(`x-api-key: ${key}`)))
  const mine = await paste(lines)
  assert.deepEqual([...mine.keys()], ['/api/v2/ioc/health', '/api/v2/ioc/verdict', '/api/v2/mgmt/enrich-logs/search-history'])
  assert.deepEqual(await first.stop(), { code: 0, signal: null })

  // A later start knows no key: its lines read it from IOCV_KEY.
  const later = await spawnServe({ env: { ...env, IOC_BOOTSTRAP_KEY: '1' } })
  t.after(async () => { await later.stop('SIGKILL') })
  assert.equal(later.key, null, 'no key is printed again')
  const again = commands(later.stderr(), 'Try it')
  assert.ok(again.every((c) => !c.includes('iocv_')))
  const history = (await paste(again, { IOCV_KEY: first.key })).get('/api/v2/mgmt/enrich-logs/search-history')
  assert.ok((history?.results as unknown[]).length > 0, 'the first start\'s verdicts are in history')
  assert.deepEqual(await later.stop(), { code: 0, signal: null })
})
