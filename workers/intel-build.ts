/**
 * One-shot worker that loads (or compiles) an intel snapshot off the main thread and posts it back.
 * The snapshot's SharedArrayBuffer is shared with the receiver, not copied.
 */
import { parentPort, workerData } from 'node:worker_threads'
import { loadManifest, loadSnapshot } from '../src/intel/index.ts'

/** Input of a build. */
export interface IntelBuildRequest {
  manifest: string
  feedsDir?: string
  cacheDir: string | null
  asnDir: string | null
  countryDir: string | null
  force: boolean
}

const req = workerData as IntelBuildRequest
try {
  const feeds = await loadManifest(req.manifest, { feedsDir: req.feedsDir ?? null })
  const result = await loadSnapshot({
    feeds,
    cacheDir: req.cacheDir,
    force: req.force,
    ...(req.asnDir === null ? {} : { asnDir: req.asnDir }),
    ...(req.countryDir === null ? {} : { countryDir: req.countryDir })
  })
  parentPort?.postMessage({ ok: true, data: result.data, warm: result.warm, ms: result.ms })
} catch (err) {
  parentPort?.postMessage({ ok: false, message: (err as Error).message })
}
