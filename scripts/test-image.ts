/**
 * Builds the container image from Containerfile with podman and checks it as an operator would run it: it starts
 * warm (the snapshot compiled at build time), turns ready on /readyz (and its HEALTHCHECK passes), scores a bulk,
 * stops on SIGTERM with exit code 0 after a clean drain, and a new container on the same volume (with a read-only root
 * file system) keeps the history and reloads its intel.
 *
 *   npm run test:image -- [--base IMAGE] [--mirror URL] [--keep]
 *
 * The base image: --base names one (e.g. docker.io/library/debian:bookworm-slim where a registry is reachable);
 * without it, one is built from Debian's packages with mmdebstrap (bookworm, minbase) and imported into podman as
 * localhost/ioc-verdict-base:bookworm. Its tarball is cached in ${XDG_CACHE_HOME:-~/.cache}/ioc-verdict/ and made
 * again after a week (security updates). Node.js and npm come from the npm registry (Containerfile's first stage);
 * when NODE_EXTRA_CA_CERTS names a CA bundle (a TLS-intercepting proxy), it is given to the build as the npm_ca secret.
 *
 * Podman's defaults raise the open-files and process limits, which a process without CAP_SYS_RESOURCE may not do,
 * so each container gets lower ones (ulimits below). When the default OCI runtime cannot start a container (crun
 * refuses cgroups in hybrid mode: a cgroup v2 hierarchy with controllers beside cgroup v1), runc is used if present.
 * Containers, the volume and (without --keep) the image are removed at the end; the base image is kept.
 */
import assert from 'node:assert/strict'
import { execFile, spawn } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, renameSync, statSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { request } from 'undici'
import { freePort } from '../test/fixtures/serve-process.ts'

const { values } = parseArgs({
  options: { base: { type: 'string' }, mirror: { type: 'string', default: 'http://deb.debian.org/debian' }, keep: { type: 'boolean' } },
  strict: true
})
const kRoot = join(import.meta.dirname, '..')
const kImage = 'localhost/ioc-verdict:test'
const kBaseImage = 'localhost/ioc-verdict-base:bookworm'
const kBaseMaxAgeMs = 7 * 86_400_000
const kCache = join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'ioc-verdict')
const kTag = `iocv-image-test-${process.pid}`

interface Run { code: number | null, stdout: string, stderr: string }

/** Runs a command to its end; `input` goes to its stdin. Never throws for a non-zero exit. */
async function run (cmd: string, args: string[], options: { timeoutMs?: number } = {}): Promise<Run> {
  return await new Promise((resolve) => {
    const child = execFile(cmd, args, { maxBuffer: 256 * 1024 * 1024, timeout: options.timeoutMs ?? 600_000 }, (_err, stdout, stderr) => {
      resolve({ code: child.exitCode, stdout, stderr })
    })
  })
}

/** Runs a command with its output shown (long steps: mmdebstrap, the build); throws when it fails. */
async function step (cmd: string, args: string[]): Promise<void> {
  const child = spawn(cmd, args, { stdio: ['ignore', 'inherit', 'inherit'] })
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
  if (code !== 0) throw new Error(`${cmd} ${args.join(' ')} exited with ${code}`)
}

async function must (cmd: string, args: string[]): Promise<string> {
  const r = await run(cmd, args)
  assert.equal(r.code, 0, `${cmd} ${args.join(' ')}:\n${r.stderr}${r.stdout}`)
  return r.stdout
}

function say (line: string): void {
  process.stdout.write(`test:image: ${line}\n`)
}

/**
 * --ulimit flags the container may take here: podman's defaults raise the open-files and process limits, which a
 * process without CAP_SYS_RESOURCE may not do, so each container gets at most this process's own hard limits, and
 * at most 65,536 files and 4,096 processes (threads count; the service runs a few dozen), below the limits podman's
 * own processes run with (which may be lower than this process's).
 */
function ulimits (): string[] {
  const text = readFileSync('/proc/self/limits', 'utf8')
  const out: string[] = []
  for (const [name, flag, most] of [['Max open files', 'nofile', 65_536], ['Max processes', 'nproc', 4096]] as const) {
    const hard = new RegExp(`^${name}\\s+\\S+\\s+(\\S+)`, 'm').exec(text)?.[1]
    const n = hard === undefined || hard === 'unlimited' ? most : Math.min(most, Number(hard))
    out.push('--ulimit', `${flag}=${n}:${n}`)
  }
  return out
}

/** The base image: --base, or one built from Debian's packages (tarball cached a week). */
async function baseImage (): Promise<string> {
  if (values.base !== undefined) return values.base
  const tar = join(kCache, 'debian-bookworm-minbase.tar')
  const fresh = existsSync(tar) && Date.now() - statSync(tar).mtimeMs < kBaseMaxAgeMs
  if (!fresh) {
    if ((await run('sh', ['-c', 'command -v mmdebstrap'])).code !== 0) throw new Error('mmdebstrap is not installed (apt-get install mmdebstrap)')
    mkdirSync(kCache, { recursive: true })
    say(`building the base image from Debian packages (mmdebstrap, ${values.mirror})`)
    const tmp = `${tar}.${process.pid}.tmp`
    await step('mmdebstrap', ['--variant=minbase', '--quiet', '--format=tar', 'bookworm', tmp, values.mirror as string])
    renameSync(tmp, tar)
  }
  if (!fresh || (await run('podman', ['image', 'exists', kBaseImage])).code !== 0) await must('podman', ['import', '--quiet', tar, kBaseImage])
  return kBaseImage
}

/** Podman's global flags: the default OCI runtime, or runc when the default cannot start a container here. */
async function runtimeFlags (base: string, limits: string[]): Promise<string[]> {
  const probe = await run('podman', ['run', '--rm', ...limits, base, 'true'])
  if (probe.code === 0) return []
  const why = probe.stderr.trim().split('\n').pop() ?? ''
  const runc = await run('podman', ['--runtime', 'runc', 'run', '--rm', ...limits, base, 'true'])
  if (runc.code === 0) {
    say(`the default OCI runtime cannot start a container here (${why}); using runc`)
    return ['--runtime', 'runc']
  }
  throw new Error(`podman cannot run a container here: default runtime: ${why}; runc: ${runc.stderr.trim().split('\n').pop() ?? ''}`)
}

/** Waits until GET /readyz answers 200; returns the milliseconds waited. */
async function ready (base: string, name: string, podman: string[]): Promise<number> {
  const t0 = performance.now()
  for (;;) {
    try {
      const res = await request(`${base}/readyz`, { headersTimeout: 5000, bodyTimeout: 5000 })
      await res.body.dump()
      if (res.statusCode === 200) return performance.now() - t0
    } catch {}
    const state = (await run('podman', [...podman, 'inspect', '--format', '{{.State.Status}}', name])).stdout.trim()
    if (state !== 'running') throw new Error(`container ${name} is ${state}:\n${(await run('podman', [...podman, 'logs', name])).stderr}`)
    if (performance.now() - t0 > 180_000) throw new Error(`${name} not ready after 180 s`)
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
}

/** Sends SIGTERM to the container's PID 1 and waits for it to exit; returns its exit code and both logs. */
async function sigterm (name: string, podman: string[]): Promise<{ code: number, stdout: string, stderr: string, ms: number }> {
  const t0 = performance.now()
  await must('podman', [...podman, 'kill', '--signal', 'TERM', name])
  const code = Number((await must('podman', [...podman, 'wait', name])).trim())
  const logs = await run('podman', [...podman, 'logs', name])
  return { code, stdout: logs.stdout, stderr: logs.stderr, ms: performance.now() - t0 }
}

const podman = async (flags: string[], args: string[]): Promise<string> => await must('podman', [...flags, ...args])

if ((await run('sh', ['-c', 'command -v podman'])).code !== 0) throw new Error('podman is not installed (apt-get install podman)')
const limits = ulimits()
const base = await baseImage()
const flags = await runtimeFlags(base, limits)
say(`base image ${base}; podman ${(await must('podman', ['--version'])).trim()}${flags.length > 0 ? ` (${flags.join(' ')})` : ''}`)

const secret = process.env.NODE_EXTRA_CA_CERTS
const t0 = performance.now()
await step('podman', [
  ...flags, 'build', '--layers=false', ...limits, '--format', 'docker', '--file', join(kRoot, 'Containerfile'), '--build-arg', `BASE_IMAGE=${base}`,
  ...(secret !== undefined && secret !== '' ? ['--secret', `id=npm_ca,src=${secret}`] : []), '--tag', kImage, kRoot
])
const buildSeconds = (performance.now() - t0) / 1000
const size = Number((await podman(flags, ['image', 'inspect', '--format', '{{.Size}}', kImage])).trim())
say(`built ${kImage} in ${buildSeconds.toFixed(0)} s, ${(size / 1e6).toFixed(0)} MB`)

const volume = `${kTag}-data`
const containers: string[] = []
const start = async (n: number, options: string[] = []): Promise<{ name: string, base: string, readyMs: number }> => {
  const name = `${kTag}-${n}`
  const port = await freePort()
  containers.push(name)
  await podman(flags, ['run', '--detach', '--name', name, ...limits, ...options, '--publish', `127.0.0.1:${port}:8080`, '--volume', `${volume}:/data`, kImage])
  const url = `http://127.0.0.1:${port}`
  return { name, base: url, readyMs: await ready(url, name, flags) }
}

try {
  await podman(flags, ['volume', 'create', volume])
  // First container: a first start on an empty volume.
  const first = await start(1)
  const firstLogs = await run('podman', [...flags, 'logs', first.name])
  const key = /^\s+(iocv_\S+)$/m.exec(firstLogs.stderr)?.[1]
  assert.ok(key !== undefined, `a first start prints its key:\n${firstLogs.stderr}`)
  const loaded = JSON.parse(firstLogs.stdout.split('\n').find((l) => l.includes('"intel snapshot loaded"')) ?? '{}') as { intel?: { warm: boolean, ms: number } }
  assert.equal(loaded.intel?.warm, true, 'the snapshot compiled at build time is loaded warm')
  assert.doesNotMatch(firstLogs.stderr, /IOC_WORKER_BUNDLE|TypeScript under tsx/, 'threads load the bundles built into the image')
  assert.equal((await run('podman', [...flags, 'healthcheck', 'run', first.name])).code, 0, 'the HEALTHCHECK passes')
  const [uid, pid1, leftovers] = (await podman(flags, ['exec', first.name, 'sh', '-c',
    'id -u; tr "\\0" " " < /proc/1/cmdline; echo; ls -d /app/data/run /app/.cache/intel /run/secrets/npm_ca /app/.npmrc /root/.npm 2>/dev/null | tr "\\n" " "'])).split('\n')
  assert.equal(uid, '10001', 'the service runs as the unprivileged user')
  assert.match(pid1 ?? '', /^node \/app\/bin\/ioc-verdict\.js serve/, 'node is PID 1')
  assert.equal(leftovers?.trim(), '', 'no local data, npm cache, npm settings or build secret in the image')
  say(`first start ready in ${(first.readyMs / 1000).toFixed(1)} s (snapshot warm, mapped in ${loaded.intel?.ms} ms), uid ${uid}, PID 1 ${pid1}`)

  const indicators = Array.from({ length: 300 }, (_, i) => ({ value: i % 3 === 0 ? `203.0.113.${i % 256}` : `image-test-${i}.example` }))
  const res = await request(`${first.base}/api/v2/ioc/verdict/bulk`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key, 'x-request-id': 'image-test-bulk' },
    body: JSON.stringify({ indicators })
  })
  const answer = await res.body.json() as { results: Array<{ indicator: { value: string }, risk: { score: number } }> }
  assert.equal(res.statusCode, 200, JSON.stringify(answer))
  assert.deepEqual(answer.results.map((r) => r.indicator.value), indicators.map((i) => i.value))
  assert.ok(answer.results.every((r) => Number.isFinite(r.risk.score)))
  say(`scored a bulk of ${indicators.length}`)

  const stopped = await sigterm(first.name, flags)
  assert.equal(stopped.code, 0, `exit code after SIGTERM:\n${stopped.stdout}`)
  assert.match(stopped.stdout, /"signal":"SIGTERM".*shutting down/)
  assert.match(stopped.stdout, /"exit_code":0.*"msg":"shutdown complete"/)
  assert.doesNotMatch(stopped.stdout, /shutdown timed out|"level":50|"level":60/, 'no error while draining')
  say(`SIGTERM: exit 0 after a clean drain, in ${(stopped.ms / 1000).toFixed(1)} s`)

  // Second container on the same volume, with a read-only root file system: the data survived, and an intel reload
  // works (a cache it cannot write costs nothing but a later compile).
  const second = await start(2, ['--read-only'])
  const secondLogs = await run('podman', [...flags, 'logs', second.name])
  assert.doesNotMatch(secondLogs.stderr, /First start/, 'keys are on the volume: no new bootstrap key')
  const search = await request(`${second.base}/api/v2/mgmt/enrich-logs/search-history?limit=1000`, { headers: { 'x-api-key': key } })
  const page = await search.body.json() as { results: Array<{ request_id: string, indicator: { value: string } }> }
  assert.equal(search.statusCode, 200, JSON.stringify(page))
  const kept = page.results.filter((r) => r.request_id === 'image-test-bulk').map((r) => r.indicator.value).sort()
  assert.deepEqual(kept, indicators.map((i) => i.value).sort(), 'every indicator of the bulk is in history after the restart')
  const reload = await request(`${second.base}/api/v2/mgmt/intel/reload`, { method: 'POST', headers: { 'x-api-key': key } })
  const reloaded = await reload.body.json() as { version?: string }
  assert.equal(reload.statusCode, 200, JSON.stringify(reloaded))
  const again = await sigterm(second.name, flags)
  assert.equal(again.code, 0)
  assert.doesNotMatch(again.stdout, /"level":(50|60)/)
  say(`restart on the same volume with a read-only root: ready in ${(second.readyMs / 1000).toFixed(1)} s, the bulk's ${kept.length} ` +
    `history records kept, intel reloaded (${reloaded.version ?? '?'}); exit 0 on SIGTERM`)
  say('ok')
} finally {
  for (const name of containers) await run('podman', [...flags, 'rm', '--force', name])
  await run('podman', [...flags, 'volume', 'rm', '--force', volume])
  if (values.keep !== true) await run('podman', [...flags, 'rmi', kImage])
}
