/**
 * One-shot worker that parses a downloaded feed body, so validating a million-line download never blocks the
 * thread answering requests. Posts counts only (not the entries).
 */
import { readFile } from 'node:fs/promises'
import { parentPort, workerData } from 'node:worker_threads'
import { normalize } from '../src/engine/index.ts'
import type { FeedFormat, IndicatorType } from '../src/engine/types.ts'
import { parseFeed } from '../src/intel/feeds/index.ts'

const req = workerData as { format: FeedFormat, path: string }
try {
  // Entries are only counted: a sink keeps a million-line download from becoming a million entry objects. An entry
  // counts when its value normalizes, as the snapshot's compile takes it (src/intel/source-part.ts): a body whose
  // lines the format reads but whose values are not indicators would otherwise pass as a good copy and empty the feed.
  let entries = 0
  let unusable = 0
  let firstUnusable: string | null = null
  const count = (type: IndicatorType | null, value: string): void => {
    const res = normalize(value, type ?? undefined)
    if (res.ok) {
      entries++
      return
    }
    unusable++
    firstUnusable ??= res.errors.join('; ')
  }
  const parsed = parseFeed(req.format, await readFile(req.path, 'utf8'), (type, value) => { count(type, value) })
  for (const e of parsed.entries) count(e.type, e.value)
  const rejected = parsed.rejected.length + unusable
  parentPort?.postMessage({ ok: true, lines: parsed.lines, entries, rejected, firstReason: parsed.rejected[0]?.reason ?? firstUnusable })
} catch (err) {
  parentPort?.postMessage({ ok: false, message: (err as Error).message })
}
