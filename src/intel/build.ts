/**
 * Builds (or loads from the disk cache) a snapshot on a worker thread, so the main thread keeps answering.
 */
import { Worker } from 'node:worker_threads'
import type { SnapshotData } from '../engine/index.ts'
import { kWorkerExecArgv, kWorkerShim, workerEntry } from '../worker-entry.ts'
import type { BuildReport, CompileOptions } from './compile.ts'
import { loadManifest } from './manifest.ts'

/** Where snapshots come from. */
export interface IntelSourceOptions {
  manifest: string
  /** Last good copies of fetched feeds (<dataDir>/feeds). */
  feedsDir?: string
  cacheDir: string | null
  asnDir: string | null
  countryDir: string | null
}

/** What a compile of this source reads: its manifest's feeds, and the registry folders where they are set. */
export async function compileInputs (source: IntelSourceOptions): Promise<CompileOptions> {
  return {
    feeds: await loadManifest(source.manifest, { feedsDir: source.feedsDir ?? null }),
    ...(source.asnDir === null ? {} : { asnDir: source.asnDir }),
    ...(source.countryDir === null ? {} : { countryDir: source.countryDir })
  }
}

/** How a snapshot in use was obtained: whole from the disk cache (warm), or compiled, with what each source cost. */
export interface BuildInfo {
  warm: boolean
  ms: number
  /** Per source: parsed in this build or its part reused; null when warm. */
  report: BuildReport | null
}

/** Loads or compiles a snapshot on a worker thread. */
export async function buildSnapshot (options: IntelSourceOptions, force = false): Promise<{ data: SnapshotData } & BuildInfo> {
  return await new Promise((resolve, reject) => {
    const worker = new Worker(kWorkerShim, { execArgv: [...kWorkerExecArgv], workerData: { entry: workerEntry('intel-build'), ...options, force } })
    let settled = false
    worker.once('message', (msg: { ok: true, data: SnapshotData, warm: boolean, ms: number, build: BuildReport | null } | { ok: false, message: string }) => {
      settled = true
      if (msg.ok) resolve({ data: msg.data, warm: msg.warm, ms: msg.ms, report: msg.build })
      else reject(new Error(`intel build failed: ${msg.message}`))
    })
    worker.once('error', (err) => {
      settled = true
      reject(new Error('intel build worker failed', { cause: err }))
    })
    worker.once('exit', (code) => {
      if (!settled) reject(new Error(`intel build worker exited with code ${code}`))
    })
  })
}

/** The build facts the status route and status file show: per source, whether it was parsed, and the totals. */
export function buildSummary (info: BuildInfo): { warm: boolean, build_ms: number, parsed: string[], reused: number, sources: Map<string, { parsed: boolean, ms: number }> } {
  const sources = new Map<string, { parsed: boolean, ms: number }>()
  for (const s of info.report?.sources ?? []) sources.set(s.kind === 'registry' ? `registry:${s.name}` : s.name, { parsed: s.parsed, ms: s.ms })
  return {
    warm: info.warm,
    build_ms: Math.round(info.ms),
    parsed: [...sources].filter(([, s]) => s.parsed).map(([name]) => name),
    reused: info.report?.reused ?? 0,
    sources
  }
}
