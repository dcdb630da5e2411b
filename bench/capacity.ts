/**
 * Capacity bench: drives a listening service (a child process per mode, on 127.0.0.1) with 10,000-indicator
 * bulks at rising concurrency and with single calls, for the scoring pool and for inline mode in the same run,
 * and prints indicators/s and p50/p95/p99 latency. Cold cache: every bulk carries indicators never sent before.
 *
 *   node --import tsx bench/capacity.ts [--bulks 24] [--concurrency 1,2,4] [--singles 2000] [--pool 2]
 *
 * Results are printed and written to bench/results/capacity.json.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { Agent, request } from 'undici'
import { mixedCorpus } from './corpus.ts'

const kRoot = join(import.meta.dirname, '..')
const kIntelCache = join(tmpdir(), 'ioc-verdict-bench-intel')

const { values } = parseArgs({
  options: {
    bulks: { type: 'string', default: '24' },
    concurrency: { type: 'string', default: '1,2,4' },
    singles: { type: 'string', default: '2000' },
    pool: { type: 'string', default: String(availableParallelism()) },
    size: { type: 'string', default: '10000' }
  }
})
const kBulks = Number(values.bulks)
const kLevels = values.concurrency.split(',').map(Number)
const kSingles = Number(values.singles)
const kSize = Number(values.size)

interface Server { proc: ChildProcess, base: string, key: string, dir: string }

/** Starts `ioc-verdict serve` in a child process and waits for its banner (URL and bootstrap key on stderr). */
async function startServer (poolSize: number): Promise<Server> {
  const dir = mkdtempSync(join(tmpdir(), 'ioc-verdict-bench-'))
  const proc = spawn(process.execPath, ['--import', 'tsx', join(kRoot, 'src', 'main.ts'), 'serve'], {
    env: {
      PATH: process.env.PATH,
      IOC_DATA_DIR: dir,
      IOC_PORT: '0',
      IOC_POOL_SIZE: String(poolSize),
      IOC_LOG_LEVEL: 'warn',
      IOC_INTEL_CACHE_DIR: kIntelCache,
      IOC_MAX_INFLIGHT: '1000000'
    },
    stdio: ['ignore', 'ignore', 'pipe']
  })
  let err = ''
  return await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${err}`)), 120_000)
    proc.stderr?.on('data', (d: Buffer) => {
      err += d.toString()
      const url = /listening on (http:\/\/\S+)/.exec(err)?.[1]
      const key = /^\s+(iocv_\S+)$/m.exec(err)?.[1]
      if (url !== undefined && key !== undefined) {
        clearTimeout(timer)
        resolve({ proc, base: url, key, dir })
      }
    })
    proc.once('exit', (code) => reject(new Error(`server exited with ${code}:\n${err}`)))
  })
}

async function stopServer (s: Server): Promise<void> {
  const exited = new Promise((resolve) => s.proc.once('exit', resolve))
  s.proc.kill('SIGTERM')
  await exited
  rmSync(s.dir, { recursive: true, force: true })
}

function pct (sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] as number
}

interface Row { mode: string, kind: string, concurrency: number, requests: number, indicators: number, seconds: number, indicatorsPerSec: number, p50: number, p95: number, p99: number, errors: number }

async function drive (s: Server, dispatcher: Agent, bodies: Buffer[], concurrency: number, path: string, perRequest: number, mode: string, kind: string): Promise<Row> {
  const lat: number[] = []
  let next = 0
  let errors = 0
  const t0 = performance.now()
  await Promise.all(Array.from({ length: concurrency }, async () => {
    for (;;) {
      const i = next++
      if (i >= bodies.length) return
      const start = performance.now()
      const res = await request(`${s.base}${path}`, {
        method: 'POST',
        dispatcher,
        headers: { 'content-type': 'application/json', 'x-api-key': s.key },
        body: bodies[i] as Buffer
      })
      await res.body.arrayBuffer()
      if (res.statusCode !== 200) errors++
      lat.push(performance.now() - start)
    }
  }))
  const seconds = (performance.now() - t0) / 1000
  lat.sort((a, b) => a - b)
  const round = (x: number): number => Math.round(x * 10) / 10
  return {
    mode,
    kind,
    concurrency,
    requests: bodies.length,
    indicators: bodies.length * perRequest,
    seconds: round(seconds),
    indicatorsPerSec: Math.round(bodies.length * perRequest / seconds),
    p50: round(pct(lat, 0.5)),
    p95: round(pct(lat, 0.95)),
    p99: round(pct(lat, 0.99)),
    errors
  }
}

let seed = 1
function bulkBodies (n: number): Buffer[] {
  return Array.from({ length: n }, () => Buffer.from(JSON.stringify({ indicators: mixedCorpus(kSize, seed++), signal_details: 'none' })))
}
function singleBodies (n: number): Buffer[] {
  return mixedCorpus(n, seed++).map((ind) => Buffer.from(JSON.stringify({ indicator: ind })))
}

const rows: Row[] = []
const modes: Array<[string, number]> = [['pool', Number(values.pool)], ['inline', 0]]
for (const [mode, size] of modes) {
  process.stderr.write(`starting ${mode} server (pool size ${size})...\n`)
  const s = await startServer(size)
  const dispatcher = new Agent({ connections: 64, pipelining: 1 })
  try {
    // Warm-up: JIT and thread start, with its own indicators (not reused later).
    await drive(s, dispatcher, bulkBodies(3), 1, '/api/v2/ioc/verdict/bulk', kSize, mode, 'warmup')
    for (const c of kLevels) {
      const row = await drive(s, dispatcher, bulkBodies(kBulks), c, '/api/v2/ioc/verdict/bulk', kSize, mode, 'bulk')
      rows.push(row)
      process.stderr.write(`${JSON.stringify(row)}\n`)
    }
    const single = await drive(s, dispatcher, singleBodies(kSingles), 16, '/api/v2/ioc/verdict', 1, mode, 'single')
    rows.push(single)
    process.stderr.write(`${JSON.stringify(single)}\n`)
  } finally {
    await dispatcher.close()
    await stopServer(s)
  }
}

console.table(rows)
const best = (mode: string): number => Math.max(...rows.filter((r) => r.mode === mode && r.kind === 'bulk').map((r) => r.indicatorsPerSec))
const p50c1 = (mode: string): number => rows.find((r) => r.mode === mode && r.kind === 'bulk' && r.concurrency === kLevels[0])?.p50 ?? NaN
const summary = {
  date: new Date().toISOString(),
  cpus: availableParallelism(),
  bulkSize: kSize,
  poolBestIndicatorsPerSec: best('pool'),
  inlineBestIndicatorsPerSec: best('inline'),
  poolOverInline: Math.round(best('pool') / best('inline') * 100) / 100,
  poolBulkP50msAtConcurrency1: p50c1('pool'),
  inlineBulkP50msAtConcurrency1: p50c1('inline')
}
console.log(summary)
mkdirSync(join(kRoot, 'bench', 'results'), { recursive: true })
writeFileSync(join(kRoot, 'bench', 'results', 'capacity.json'), JSON.stringify({ summary, rows }, null, 2) + '\n')
