/**
 * One-shot worker that loads (or compiles) an intel snapshot off the main thread and posts it back.
 * The snapshot's SharedArrayBuffer is shared with the receiver, not copied.
 */
import { parentPort, workerData } from 'node:worker_threads'
import { compileInputs, loadSnapshot, type IntelSourceOptions } from '../src/intel/index.ts'

/** Input of a build. */
export type IntelBuildRequest = IntelSourceOptions & { force: boolean }

const req = workerData as IntelBuildRequest
try {
  const result = await loadSnapshot({ ...await compileInputs(req), cacheDir: req.cacheDir, force: req.force })
  parentPort?.postMessage({ ok: true, data: result.data, warm: result.warm, ms: result.ms, build: result.build })
} catch (err) {
  parentPort?.postMessage({ ok: false, message: (err as Error).message })
}
