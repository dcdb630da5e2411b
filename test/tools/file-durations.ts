/**
 * A node:test reporter that prints, once the run ends, how long each test process ran (a file alone, or a suite of
 * suites.ts: from the runner starting it to its last event), the slowest first, and the run's wall time.
 * test/run.ts adds it with --durations:
 *
 *   node --import tsx test/run.ts all --durations
 */
import { join, relative } from 'node:path'
import { kSuites, kTestRoot } from '../suites.ts'

interface Event { type: string, data?: { file?: string } }

/** A file of a suite -> the suite's own file (its events carry the file that declared the test). */
const kProcessOf = new Map<string, string>()
for (const [suite, files] of Object.entries(kSuites)) {
  for (const f of files) kProcessOf.set(join(kTestRoot, f), join(kTestRoot, `${suite}.suite.ts`))
}

export default async function * fileDurations (source: AsyncIterable<Event>): AsyncGenerator<string> {
  const t0 = performance.now()
  const spans = new Map<string, { start: number, end: number }>()
  for await (const event of source) {
    const file = event.data?.file
    // Every file is queued at the start: a process starts when its file leaves the queue.
    if (file === undefined || event.type === 'test:enqueue') continue
    const proc = kProcessOf.get(file) ?? file
    const now = performance.now()
    const span = spans.get(proc)
    if (span === undefined) spans.set(proc, { start: now, end: now })
    else span.end = now
  }
  const rows = [...spans].map(([file, s]) => ({ file: relative(kTestRoot, file), s: (s.end - s.start) / 1000 })).sort((a, b) => b.s - a.s)
  yield '\nseconds per test process (wall, from its start to its last event):\n'
  for (const r of rows) yield `${r.s.toFixed(1).padStart(7)}  ${r.file}\n`
  yield `${((performance.now() - t0) / 1000).toFixed(1).padStart(7)}  whole run\n`
}
