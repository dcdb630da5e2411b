/**
 * A node:test reporter that prints, once the run ends, how long each test process ran (a file alone, or a suite of
 * suites.ts), the slowest first, and the run's wall time. test/run.ts adds it with --durations:
 *
 *   node --import tsx test/run.ts all --durations
 *
 * A process is timed by its file-level test (the one named by the file's path): from its dequeue (the runner starts
 * it) to its completion. Both are emitted as they happen; a file's other events reach reporters in file order, so
 * they can come long after the file ended.
 */
import { relative } from 'node:path'
import { kTestRoot } from '../suites.ts'

interface Event { type: string, data?: { file?: string, name?: string } }

export default async function * fileDurations (source: AsyncIterable<Event>): AsyncGenerator<string> {
  const t0 = performance.now()
  const started = new Map<string, number>()
  const took = new Map<string, number>()
  for await (const event of source) {
    const file = event.data?.file
    if (file === undefined || event.data?.name !== file) continue
    if (event.type === 'test:dequeue') started.set(file, performance.now())
    else if (event.type === 'test:complete') took.set(file, performance.now() - (started.get(file) ?? t0))
  }
  const rows = [...took].map(([file, ms]) => ({ file: relative(kTestRoot, file), s: ms / 1000 })).sort((a, b) => b.s - a.s)
  yield '\nseconds per test process (wall, from its start to its end):\n'
  for (const r of rows) yield `${r.s.toFixed(1).padStart(7)}  ${r.file}\n`
  yield `${((performance.now() - t0) / 1000).toFixed(1).padStart(7)}  whole run\n`
}
