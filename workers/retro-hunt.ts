/**
 * One-shot worker running one retro-hunt pass (src/pool/retro-pass.ts) off the main thread, on a store connection of
 * its own, at the lowest CPU priority where the system allows it per thread (src/pool/thread-priority.ts) unless
 * `lowPriority` is false (IOC_RETRO_HUNT_LOW_PRIORITY=0); its lowered thread's id is posted first ({ tid }). The
 * parent posts 'stop' to end it early: the pass stops between parts, the store is closed by this thread (never left to
 * teardown: native handles), and the result so far is posted.
 */
import { parentPort, workerData } from 'node:worker_threads'
import type { StoreOptions } from '../src/config.ts'
import { runRetroPass, type RetroPassInput } from '../src/pool/retro-pass.ts'
import { openStore } from '../src/store/index.ts'
import { lowerThisThreadPriority } from '../src/pool/thread-priority.ts'

/** Input of a pass. */
export interface RetroHuntRequest { store: StoreOptions, input: RetroPassInput, lowPriority: boolean }

const req = workerData as RetroHuntRequest
// Before anything else: the store's own work in this thread runs at this priority too.
const tid = req.lowPriority ? lowerThisThreadPriority() : null
const lowPriority = tid !== null
// The parent gives this thread its priority back when it asks it to stop (src/pool/retro-hunt.ts passOnThread).
if (tid !== null) parentPort?.postMessage({ tid })
let stop = false
parentPort?.on('message', (m: unknown) => { if (m === 'stop') stop = true })
try {
  const store = await openStore(req.store)
  try {
    const result = await runRetroPass(store, req.input, () => stop)
    parentPort?.postMessage({ ok: true, result: { ...result, lowPriority } })
  } finally {
    await store.close()
  }
} catch (err) {
  parentPort?.postMessage({ ok: false, message: (err as Error).message })
}
parentPort?.close()
