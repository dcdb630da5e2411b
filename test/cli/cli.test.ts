/**
 * The command line (src/main.ts), run as child processes the way an operator runs it: results on stdout, messages on
 * stderr, exit 0 on success, 1 when the command ran and failed, 2 for a usage or configuration error.
 */
import assert from 'node:assert/strict'
import { execFile, spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { request } from 'undici'
import { loadConfig } from '../../src/config.ts'
import { startService } from '../../src/service.ts'
import { kTestIntelCache, smallRegistries } from '../helper.ts'

const kRoot = join(import.meta.dirname, '..', '..')
const kMain = join(kRoot, 'bin', 'ioc-verdict.js')
const kDataDir = mkdtempSync(join(tmpdir(), 'iocv-cli-'))
after(() => rmSync(kDataDir, { recursive: true, force: true }))

interface Run { code: number | null, stdout: string, stderr: string }

/** Runs `ioc-verdict ...args` with a temporary data dir and the shared test intel cache. */
async function cli (args: string[], env: Record<string, string> = {}): Promise<Run> {
  return await new Promise((resolve) => {
    execFile(process.execPath, [kMain, ...args], {
      cwd: kRoot,
      env: { PATH: process.env.PATH, IOC_DATA_DIR: kDataDir, IOC_LOG_LEVEL: 'warn', IOC_INTEL_CACHE_DIR: kTestIntelCache, ...env }
    }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : null, stdout, stderr })
    })
  })
}

test('help prints the usage on stdout; an unknown command or flag and an unknown setting exit 2 with nothing on stdout', async () => {
  const [help, unknown, flag, typo] = await Promise.all([
    cli(['--help']),
    cli(['frobnicate']),
    cli(['score', '--colour', '1.1.1.1']),
    cli(['keys', 'list'], { IOC_POOL_SIZ: '2' })
  ])
  assert.equal(help.code, 0)
  assert.match(help.stdout, /^usage: ioc-verdict <command>/)
  for (const command of ['serve', 'keys create', 'keys list', 'keys revoke', 'intel check', 'intel build', 'score']) assert.ok(help.stdout.includes(command), command)
  for (const r of [unknown, flag, typo]) {
    assert.equal(r.code, 2, r.stderr)
    assert.equal(r.stdout, '')
  }
  assert.match(unknown.stderr, /usage: ioc-verdict/)
  assert.match(flag.stderr, /ERR_PARSE_ARGS_UNKNOWN_OPTION/)
  assert.match(typo.stderr, /configuration error: environment: unknown setting IOC_POOL_SIZ/)
})

test('keys commands with missing or bad arguments exit 2 (1 for an unknown permission) and create nothing', async () => {
  const dir = mkdtempSync(join(kDataDir, 'bad-'))
  const env = { IOC_DATA_DIR: dir }
  const cases: Array<[string[], number, RegExp]> = [
    [['keys', 'create', '--tenant', 'acme'], 2, /needs --tenant and --permissions/],
    [['keys', 'create', '--tenant', 'acme', '--permissions', 'verdict', '--quota=-1'], 2, /--quota must be a non-negative integer/],
    [['keys', 'create', '--tenant', 'acme', '--permissions', 'verdict', '--quota'], 2, /ERR_PARSE_ARGS/],
    [['keys', 'revoke'], 2, /keys revoke needs a key id/],
    [['keys', 'rotate'], 2, /unknown keys command; permissions are verdict, verdict_bulk, mgmt, admin/],
    [['keys', 'create', '--tenant', 'acme', '--permissions', 'verdict,root'], 1, /INVALID_KEY_OPTIONS/]
  ]
  const runs = await Promise.all(cases.map(([args]) => cli(args, env)))
  for (const [i, [args, code, pattern]] of cases.entries()) {
    const r = runs[i] as Run
    assert.equal(r.code, code, `${args.join(' ')}: ${r.stderr}`)
    assert.equal(r.stdout, '')
    assert.match(r.stderr, pattern)
  }
  assert.equal((await cli(['keys', 'list'], env)).stdout, '', 'no key was created')
})

test('keys create prints the key alone on stdout; list shows it without its secret; revoke revokes it once', async () => {
  const created = await cli(['keys', 'create', '--tenant', 'acme', '--permissions', 'verdict, verdict_bulk', '--quota', '500'])
  assert.equal(created.code, 0, created.stderr)
  const key = created.stdout.trim()
  assert.match(key, /^iocv_[A-Za-z0-9]+_\S+$/)
  assert.equal(created.stdout, `${key}\n`, 'stdout holds the key and nothing else')
  const id = key.split('_')[1] as string
  assert.match(created.stderr, new RegExp(`created key ${id} for tenant acme \\(verdict,verdict_bulk\\)`))

  const listed = await cli(['keys', 'list'])
  assert.equal(listed.code, 0)
  assert.ok(!listed.stdout.includes(key.split('_').slice(2).join('_')), 'no secret in the listing')
  const records = listed.stdout.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>)
  assert.deepEqual(records.map((r) => ({ ...r, createdAt: 'x' })), [{ id, tenant: 'acme', permissions: ['verdict', 'verdict_bulk'], quota: 500, createdAt: 'x', revokedAt: null, rateLimit: null, expiresAt: null, allowedCidrs: null, lastUsedAt: null }])

  const revoked = await cli(['keys', 'revoke', id])
  assert.equal(revoked.code, 0)
  assert.match(revoked.stderr, new RegExp(`revoked ${id}`))
  const [again, after] = await Promise.all([cli(['keys', 'revoke', id]), cli(['keys', 'list'])])
  assert.equal(again.code, 1, 'a key already revoked is not revoked again')
  assert.match(again.stderr, new RegExp(`no active key ${id}`))
  const record = JSON.parse(after.stdout) as Record<string, unknown>
  assert.equal(typeof record.revokedAt, 'string')
})

test('intel check compiles every source and reports counts; intel build --force writes the cache, which the next build loads warm', async () => {
  const cacheDir = join(kDataDir, 'intel-build')
  // Both compile afresh: with the registries cut down (their rows are counted, not checked), in a third of the time.
  const [checked, built, unknown] = await Promise.all([
    cli(['intel', 'check'], smallRegistries()),
    cli(['intel', 'build', '--force'], { IOC_INTEL_CACHE_DIR: cacheDir, ...smallRegistries() }),
    cli(['intel', 'fetch'])
  ])
  assert.equal(checked.code, 0, checked.stderr)
  const report = JSON.parse(checked.stdout) as { warm: boolean, cachePath: string | null, counts: Record<string, number>, sources: Array<{ name: string, indexed: number, rejected: number }> }
  assert.equal(report.warm, false)
  assert.equal(report.cachePath, null, 'check never touches the disk cache')
  assert.ok(report.sources.some((s) => s.name === 'sample_feodo' && s.indexed > 0))
  assert.ok(Object.values(report.counts).some((n) => n > 0))

  assert.equal(built.code, 0, built.stderr)
  const first = JSON.parse(built.stdout) as { warm: boolean, cachePath: string, version: string }
  assert.equal(first.warm, false)
  assert.ok(first.cachePath.startsWith(cacheDir))
  const second = JSON.parse((await cli(['intel', 'build'], { IOC_INTEL_CACHE_DIR: cacheDir, ...smallRegistries() })).stdout) as { warm: boolean, version: string, cachePath: string }
  assert.equal(second.warm, true)
  assert.equal(second.version, first.version)
  assert.equal(second.cachePath, first.cachePath)

  assert.equal(unknown.code, 2)
  assert.match(unknown.stderr, /unknown intel command/)
})

test('score prints one verdict per value as JSON lines, and exits 1 when a value is not an indicator', async () => {
  const [ok, mixed, unknownVersion] = await Promise.all([
    cli(['score', '--type', 'domain', 'example[.]com', 'EXAMPLE.org.']),
    cli(['score', '198.51.100.7', 'not an indicator!']),
    cli(['score', '--scoring-version', 'v0-nope', '198.51.100.7'])
  ])
  assert.equal(ok.code, 0, ok.stderr)
  const lines = ok.stdout.trim().split('\n').map((line) => JSON.parse(line) as { indicator: { type: string, value: string, normalized: string }, risk: { score: number } })
  assert.deepEqual(lines.map((v) => v.indicator), [
    { type: 'domain', value: 'example[.]com', normalized: 'example.com' },
    { type: 'domain', value: 'EXAMPLE.org.', normalized: 'example.org' }
  ])
  for (const v of lines) assert.equal(typeof v.risk.score, 'number')

  assert.equal(mixed.code, 1)
  const [good, bad] = mixed.stdout.trim().split('\n').map((line) => JSON.parse(line) as Record<string, any>)
  assert.equal(good?.indicator.type, 'ip')
  assert.deepEqual(bad?.indicator, { type: null, value: 'not an indicator!' })
  assert.ok(Array.isArray(bad?.errors) && bad.errors.length > 0)

  assert.equal(unknownVersion.code, 0)
  assert.match(unknownVersion.stderr, /unknown scoring version; using /)
})

test('serve prints its address and a first-start key, answers with that key, and exits 0 on SIGTERM; a second start prints no key', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-cli-serve-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const start = async (): Promise<{ base: string, key: string | null, stop: () => Promise<number | null> }> => {
    const proc = spawn(process.execPath, [kMain, 'serve'], {
      cwd: kRoot,
      env: { PATH: process.env.PATH, IOC_DATA_DIR: dir, IOC_PORT: '0', IOC_POOL_SIZE: '0', IOC_LOG_LEVEL: 'warn', IOC_INTEL_CACHE_DIR: kTestIntelCache },
      stdio: ['ignore', 'ignore', 'pipe']
    })
    t.after(() => { if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL') })
    const exited = once(proc, 'exit') as Promise<[number | null]>
    let stderr = ''
    proc.stderr.setEncoding('utf8')
    const base = await new Promise<string>((resolve, reject) => {
      proc.stderr.on('data', (d: string) => {
        stderr += d
        // The banner ends with the line on new keys; by then the address and any key are printed.
        const found = /ioc-verdict listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(stderr)?.[1]
        if (found !== undefined && stderr.includes('New keys:')) resolve(found)
      })
      void exited.then(([code]) => reject(new Error(`serve exited with ${code}:\n${stderr}`)))
    })
    const key = /^\s+(iocv_\S+)$/m.exec(stderr)?.[1] ?? null
    return {
      base,
      key,
      stop: async () => {
        proc.kill('SIGTERM')
        return (await exited)[0]
      }
    }
  }
  const first = await start()
  assert.ok(first.key !== null, 'a first start prints a bootstrap key')
  const res = await request(`${first.base}/api/v2/ioc/verdict`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': first.key },
    body: JSON.stringify({ indicator: { value: '198.51.100.23' } })
  })
  assert.equal(res.statusCode, 200)
  assert.equal(((await res.body.json()) as { indicator: { type: string } }).indicator.type, 'ip')
  assert.equal(await first.stop(), 0)
  const second = await start()
  assert.equal(second.key, null, 'keys exist, so no bootstrap key')
  assert.equal(await second.stop(), 0)
})

test('serve refuses a data directory another running instance holds, and takes over one whose owner is gone', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-cli-lock-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const config = loadConfig({ IOC_DATA_DIR: dir, IOC_LOG_LEVEL: 'silent', IOC_POOL_SIZE: '0', IOC_BOOTSTRAP_KEY: '0', IOC_INTEL_CACHE_DIR: kTestIntelCache, ...smallRegistries() })
  const first = await startService(config)
  // A second service in this process, and a second process, are both refused; nothing of theirs starts.
  await assert.rejects(startService(config), /data directory .* is in use/)
  const second = await cli(['serve'], { IOC_DATA_DIR: dir, IOC_PORT: '0', IOC_BOOTSTRAP_KEY: '0', ...smallRegistries() })
  assert.equal(second.code, 1, second.stderr)
  assert.match(second.stderr, new RegExp(`data directory .* is in use by process ${process.pid}; give each instance its own IOC_DATA_DIR`))
  await first.app.close()
  // Closed, the directory is free again; a lock left by a process that is gone (kill -9) does not hold it either.
  const again = await startService(config)
  await again.destroy()
  writeFileSync(join(dir, 'instance.lock'), `999999999\n${hostname()}\n`)
  const afterCrash = await startService(config)
  await afterCrash.app.close()
  // Nor does a process that has exited but is not reaped yet (a zombie, as a kill -9'd service is until its parent
  // reaps it): a shell starts a short `sleep` in the background and then becomes a `sleep` that never reaps it. The
  // background one ends after the exec, so that the shell cannot reap it first.
  if (process.platform === 'linux') {
    const holder = spawn('sh', ['-c', 'sleep 1 & echo $!; exec sleep 30'], { stdio: ['ignore', 'pipe', 'ignore'] })
    t.after(() => { holder.kill('SIGKILL') })
    const [line] = await once(holder.stdout, 'data') as [Buffer]
    const zombie = Number(line.toString().trim())
    const state = (): string => readFileSync(`/proc/${zombie}/stat`, 'utf8')
    for (let i = 0; i < 250 && !state().includes(') Z '); i++) await new Promise((resolve) => setTimeout(resolve, 20))
    assert.match(state(), /\) Z /, 'the background sleep is a zombie')
    writeFileSync(join(dir, 'instance.lock'), `${zombie}\n${hostname()}\n`)
    const afterZombie = await startService(config)
    await afterZombie.app.close()
  }
})
