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
  // Entries are only counted: a sink keeps a million-line download from becoming a million entry objects.
  let entries = 0
  const parsed = parseFeed(req.format, await readFile(req.path, 'utf8'), () => { entries++ })
  entries += parsed.entries.length
  parentPort?.postMessage({ ok: true, lines: parsed.lines, entries, rejected: parsed.rejected.length, firstReason: parsed.rejected[0]?.reason ?? null })
} catch (err) {
  parentPort?.postMessage({ ok: false, message: (err as Error).message })
}
