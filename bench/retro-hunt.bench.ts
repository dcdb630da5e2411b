/**
 * Retro-hunt bench: one pass (src/pool/retro-pass.ts, unpaced: IOC_RETRO_HUNT_DUTY_PERCENT=100) of a refresh that
 * brings --listings new listings, against --records history records in a SQLite store, on this thread.
 *
 *   npm run bench:retro-hunt -- [--records 50000000] [--listings 10000] [--tenants 20] [--days 30] [--keep DIR]
 *
 * History is generated directly as stored parts (history/block.ts, the scoring threads' encoding, written by the
 * history writer's own transaction, writeHistoryPartsSync), not through HTTP: 50 parts of 10,000 distinct indicators
 * (70% domains under 200,000 registrable names, 30% IPv4 addresses spread over about 100,000 /24s), each part stored again for other
 * tenants and days until --records are written. The new listings: 60% exact names that were queried, 20% registrable
 * (parent) domains of queried hosts, 15% /24 blocks holding queried addresses, 5% never queried. The old snapshot
 * holds the built-in lists and one unrelated feed; the new one adds a feed of the listings.
 *
 * The target (docs/PERFORMANCE.md "Retro-hunt"): 10,000 listings against 50 million records in under 60 s.
 *
 * With --capacity SECONDS, the bench then starts the service on that store (scoring threads at their default count,
 * the old snapshot) and drives it with 2,000-indicator bulks of fresh indicators over HTTP (127.0.0.1, two clients,
 * closed loop), in --rounds rounds of two phases of SECONDS each: without a pass, and while passes run back to back
 * on the retro-hunt thread paced at --duty percent (IOC_RETRO_HUNT_DUTY_PERCENT). The slowdown is 1 - (indicators
 * per second while hunting / without), median of the rounds.
 * Results are printed and written to bench/results/retro-hunt.json.
 */
import { randomUUID } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { availableParallelism, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { HistoryItems } from '../src/history/block.ts'
import { loadManifest, loadSnapshot } from '../src/intel/index.ts'
import { Agent, request } from 'undici'
import { loadConfig } from '../src/config.ts'
import { runRetroPass } from '../src/pool/retro-pass.ts'
import { startService } from '../src/service.ts'
import type { SnapshotData } from '../src/engine/index.ts'
import { SqliteStore, type HistoryPart } from '../src/store/index.ts'

const { values: args } = parseArgs({
  options: {
    records: { type: 'string', default: '50000000' },
    listings: { type: 'string', default: '10000' },
    tenants: { type: 'string', default: '20' },
    days: { type: 'string', default: '30' },
    keep: { type: 'string' },
    capacity: { type: 'string' },
    rounds: { type: 'string', default: '3' },
    duty: { type: 'string', default: '20' }
  }
})
const kRecords = Number(args.records)
const kListings = Number(args.listings)
const kTenants = Number(args.tenants)
const kDays = Number(args.days)
const kPartItems = 10_000
const kTemplates = 50
const kDayMs = 86_400_000
const kTail = '"risk":{"score":50,"strength":"weak","category":"unknown","evidence_saturation":"none"},"scores":null,"labels":[],"label_count":0,"action_taken":null,"action_source":null'

/** The values of template part `p`, item `i`. */
function valueOf (p: number, i: number): { type: string, value: string } {
  const n = p * kPartItems + i
  if (i % 10 < 7) return { type: 'domain', value: `h${n}.w${n % 7}.site${n % 200_000}.example` }
  return { type: 'ip', value: `${(n % 200) + 11}.${(n >> 8) % 256}.${(n >> 4) % 256}.${(n % 250) + 1}` }
}

function templates (): Uint8Array[] {
  const out: Uint8Array[] = []
  for (let p = 0; p < kTemplates; p++) {
    const items = new HistoryItems(kPartItems)
    for (let i = 0; i < kPartItems; i++) {
      const { type, value } = valueOf(p, i)
      items.addVerdict(type, value, value, kTail, 0)
    }
    out.push(items.encode())
  }
  return out
}

function part (tenant: string, ts: number, bytes: Uint8Array): HistoryPart {
  const date = new Date(ts).toISOString()
  const requestId = randomUUID()
  return {
    uid: requestId,
    ts,
    date,
    day: date.slice(0, 10),
    tenant,
    requestId,
    bulkRequestId: requestId,
    httpStatus: 200,
    authType: 'api_key',
    apikey: `k_${tenant}`,
    userId: null,
    envelope: JSON.stringify({ date, request_id: requestId, bulk_request_id: requestId, tenant, http_status: 200, auth_type: 'api_key', apikey: `k_${tenant}` }),
    count: kPartItems,
    part: bytes
  }
}

function listings (): string {
  const lines: string[] = []
  for (let k = 0; k < kListings; k++) {
    const kind = k % 20
    const p = (k * 7) % kTemplates
    const i = (k * 131) % kPartItems
    if (kind < 12) {
      // An exact name that was queried (a domain item of some template).
      const j = i - (i % 10) + (k % 7)
      lines.push(valueOf(p, j).value)
    } else if (kind < 16) {
      // The registrable domain of a queried host.
      const j = i - (i % 10) + (k % 7)
      lines.push(valueOf(p, j).value.split('.').slice(2).join('.'))
    } else if (kind < 19) {
      // The /24 of a queried address.
      const j = i - (i % 10) + 7 + (k % 3)
      lines.push(`${valueOf(p, j).value.split('.').slice(0, 3).join('.')}.0/24`)
    } else {
      lines.push(`never-queried-${k}.example`)
    }
  }
  return [...new Set(lines)].join('\n') + '\n'
}

async function main (): Promise<void> {
  const dir = args.keep ?? mkdtempSync(join(tmpdir(), 'ioc-bench-retro-'))
  mkdirSync(dir, { recursive: true })
  const feeds = join(dir, 'feeds')
  mkdirSync(feeds, { recursive: true })
  writeFileSync(join(feeds, 'old.txt'), Array.from({ length: 1000 }, (_, i) => `unrelated-${i}.example`).join('\n') + '\n')
  writeFileSync(join(feeds, 'new.txt'), listings())
  const feed = (name: string): object => ({ name, format: 'plain', path: `${name}.txt`, direction: 'malicious', group: 'threat_feed', subgroup: 'malware_distribution', category: 'malware', confidence: 0.9, half_life_days: 0 })
  writeFileSync(join(feeds, 'prev.json'), JSON.stringify({ feeds: [feed('old')] }))
  writeFileSync(join(feeds, 'next.json'), JSON.stringify({ feeds: [feed('old'), feed('new')] }))
  const cacheDir = join(tmpdir(), 'ioc-verdict-bench-retro-intel')
  const t0 = performance.now()
  const prev = (await loadSnapshot({ feeds: await loadManifest(join(feeds, 'prev.json')), cacheDir })).data
  const next = (await loadSnapshot({ feeds: await loadManifest(join(feeds, 'next.json')), cacheDir })).data
  const snapshotsMs = performance.now() - t0

  const path = join(dir, 'ioc-verdict.db')
  const store = new SqliteStore({ path })
  await store.migrate()
  const t1 = performance.now()
  const parts = templates()
  const now = Date.now()
  const total = Math.ceil(kRecords / kPartItems)
  const batch: HistoryPart[] = []
  for (let n = 0; n < total; n++) {
    const tenant = `tenant-${n % kTenants}`
    const ts = now - ((n * 7919) % (kDays * kDayMs - 3_600_000)) - 60_000
    batch.push(part(tenant, ts, parts[n % kTemplates] as Uint8Array))
    if (batch.length === 20 || n === total - 1) {
      store.writeHistoryPartsSync(batch.splice(0))
    }
  }
  const writeMs = performance.now() - t1
  const records = total * kPartItems
  console.error(`history: ${records} records in ${(writeMs / 1000).toFixed(1)} s; snapshots: ${(snapshotsMs / 1000).toFixed(1)} s`)

  const t2 = performance.now()
  const r = await runRetroPass(store, { prev, next, sinceMs: now - kDays * kDayMs - kDayMs, dutyPercent: 100 })
  const passMs = performance.now() - t2
  await store.close()
  const capacity = args.capacity === undefined ? null : await capacityAB(dir, join(feeds, 'prev.json'), cacheDir, prev, next, Number(args.capacity))
  const result = {
    date: new Date().toISOString().slice(0, 10),
    machine: { cpus: availableParallelism(), load: loadavg().map((l) => Math.round(l * 100) / 100) },
    records,
    listings: kListings,
    raised: r.raised,
    tenants: r.tenants,
    blocks: r.blocks,
    matched: r.matched,
    diff_s: Math.round(r.diffMs / 100) / 10,
    rescore_s: Math.round(r.rescoreMs / 100) / 10,
    hits: r.hits.length,
    pass_s: Math.round(passMs / 100) / 10,
    pass_cpu_s: Math.round(r.cpuMs / 100) / 10,
    records_per_s: Math.round(records / (passMs / 1000)),
    target_s: 60,
    history_write_s: Math.round(writeMs / 100) / 10,
    ...(capacity === null ? {} : { capacity })
  }
  console.log(JSON.stringify(result, null, 2))
  mkdirSync(join(import.meta.dirname, 'results'), { recursive: true })
  writeFileSync(join(import.meta.dirname, 'results', 'retro-hunt.json'), JSON.stringify(result, null, 2) + '\n')
  if (args.keep === undefined) rmSync(dir, { recursive: true, force: true })
}

/** Verdict throughput without and with retro-hunt passes running (see the header). */
async function capacityAB (dir: string, manifest: string, cacheDir: string, prev: SnapshotData, next: SnapshotData, seconds: number): Promise<object> {
  const config = loadConfig({
    IOC_DATA_DIR: dir,
    IOC_FEEDS: manifest,
    IOC_INTEL_CACHE_DIR: cacheDir,
    IOC_LOG_LEVEL: 'silent',
    IOC_BOOTSTRAP_KEY: '0',
    IOC_RETRO_HUNT_DUTY_PERCENT: String(args.duty),
    IOC_HISTORY_DURABILITY: 'async'
  })
  const svc = await startService(config)
  try {
    const key = (await svc.store.createKey({ tenant: 'bench', permissions: ['verdict', 'verdict_bulk'], quota: null })).key
    const base = await svc.app.listen({ port: 0, host: '127.0.0.1' })
    const agent = new Agent({ connections: 4 })
    let seq = 0
    const body = (): string => {
      const indicators = []
      for (let i = 0; i < 2000; i++, seq++) indicators.push({ value: seq % 3 === 0 ? `${(seq % 200) + 11}.${(seq >> 8) % 256}.${(seq >> 16) % 256}.${seq % 251}` : `fresh-${seq}.cap${seq % 997}.example` })
      return JSON.stringify({ indicators })
    }
    const phase = async (hunting: boolean): Promise<number> => {
      let hunts = 0
      const flag = { stop: false }
      const hunter = hunting
        ? (async () => {
            while (!flag.stop) {
              svc.retroHunt.onSwap(prev, next)
              hunts++
              await svc.retroHunt.idle()
            }
          })()
        : Promise.resolve()
      let answered = 0
      const end = performance.now() + seconds * 1000
      const client = async (): Promise<void> => {
        while (performance.now() < end) {
          const res = await request(`${base}/api/v2/ioc/verdict/bulk`, { method: 'POST', dispatcher: agent, headers: { 'content-type': 'application/json', 'x-api-key': key }, body: body() })
          await res.body.dump()
          if (res.statusCode === 200) answered += 2000
        }
      }
      const t = performance.now()
      await Promise.all([client(), client()])
      const rate = answered / ((performance.now() - t) / 1000)
      flag.stop = true
      await hunter
      console.error(`${hunting ? 'hunting' : 'idle   '}: ${Math.round(rate)} indicators/s${hunting ? ` (${hunts} passes started)` : ''}`)
      return rate
    }
    await phase(false) // warm-up
    const ratios: number[] = []
    const idle: number[] = []
    const hunting: number[] = []
    for (let i = 0; i < Number(args.rounds); i++) {
      const a = await phase(false)
      const b = await phase(true)
      idle.push(Math.round(a))
      hunting.push(Math.round(b))
      ratios.push(b / a)
    }
    await agent.close()
    const median = [...ratios].sort((x, y) => x - y)[Math.floor(ratios.length / 2)] as number
    return { seconds_per_phase: seconds, duty_percent: Number(args.duty), idle_per_s: idle, hunting_per_s: hunting, slowdown_median: Math.round((1 - median) * 1000) / 1000 }
  } finally {
    await svc.app.close()
  }
}

await main()
