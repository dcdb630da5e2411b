/**
 * Builds (or loads from the disk cache) a snapshot on a worker thread, so the main thread keeps answering.
 */
import { Worker } from 'node:worker_threads'
import type { SnapshotData } from '../engine/index.ts'
import { kWorkerExecArgv, kWorkerShim, workerEntry } from '../worker-entry.ts'
import type { CompileOptions } from './compile.ts'
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

/** Loads or compiles a snapshot on a worker thread. */
export async function buildSnapshot (options: IntelSourceOptions, force = false): Promise<{ data: SnapshotData, warm: boolean, ms: number }> {
  return await new Promise((resolve, reject) => {
    const worker = new Worker(kWorkerShim, { execArgv: [...kWorkerExecArgv], workerData: { entry: workerEntry('intel-build'), ...options, force } })
    let settled = false
    worker.once('message', (msg: { ok: true, data: SnapshotData, warm: boolean, ms: number } | { ok: false, message: string }) => {
      settled = true
      if (msg.ok) resolve({ data: msg.data, warm: msg.warm, ms: msg.ms })
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
