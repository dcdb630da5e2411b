/**
 * One-shot worker that parses a downloaded feed body, so validating a million-line download never blocks the
 * thread answering requests. Posts counts only (not the entries).
 */
import { readFile } from 'node:fs/promises'
import { parentPort, workerData } from 'node:worker_threads'
import type { FeedFormat } from '../src/engine/types.ts'
import { parseFeed } from '../src/intel/feeds/index.ts'

const req = workerData as { format: FeedFormat, path: string }
try {
  const parsed = parseFeed(req.format, await readFile(req.path, 'utf8'))
  parentPort?.postMessage({ ok: true, lines: parsed.lines, entries: parsed.entries.length, rejected: parsed.rejected.length, firstReason: parsed.rejected[0]?.reason ?? null })
} catch (err) {
  parentPort?.postMessage({ ok: false, message: (err as Error).message })
}
