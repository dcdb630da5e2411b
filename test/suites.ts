/**
 * Which test files are unit tests: pure code (engine, bytes, record and part codecs, bulk item format, config, the
 * lint rule), no service, server, thread pool or store. They run in one process (test/unit.suite.ts), so they share
 * its start-up and the sample snapshot. Every other *.test.ts file is end-to-end and runs in a process of its own;
 * a new file is end-to-end until it is listed here.
 */
import { readdirSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'

export const kTestRoot = import.meta.dirname

/** Unit test files, relative to test/. */
export const kUnitFiles: readonly string[] = [
  'bytes/byte-sink.test.ts',
  'config/config.test.ts',
  'engine/feeds.test.ts',
  'engine/lexical.test.ts',
  'engine/normalize.test.ts',
  'engine/score.test.ts',
  'history/codec.test.ts',
  'history/record.test.ts',
  'history/spool.test.ts',
  'http/public-errors.test.ts',
  'lint/import-rooms.test.ts',
  'pool/bulk-item.test.ts',
  'pool/verdict-cache.test.ts',
  'store/api-keys.test.ts',
  'store/history-rows.test.ts'
]

/** Every *.test.ts file under test/, relative to it, sorted. */
export function allTestFiles (dir = kTestRoot): string[] {
  const out: string[] = []
  for (const name of readdirSync(dir)) {
    const p = join(dir, name)
    if (statSync(p).isDirectory()) out.push(...allTestFiles(p))
    else if (name.endsWith('.test.ts')) out.push(relative(kTestRoot, p))
  }
  return out.sort()
}

/**
 * The slowest files (measured), started first so that the two lanes end together rather than one long file running
 * alone at the end. Only an order: a file missing here still runs.
 */
const kSlowFirst: readonly string[] = [
  'e2e/reload.test.ts',
  'e2e/crash.test.ts',
  'cli/cli.test.ts',
  'history/shutdown.test.ts',
  'history/store-failure.test.ts',
  'e2e/pool.test.ts',
  'engine/intel.test.ts',
  'e2e/scale-out.test.ts'
]

/** End-to-end test files: every test file that is not a unit test, the slowest first. */
export function e2eFiles (): string[] {
  const unit = new Set(kUnitFiles)
  const rank = (f: string): number => { const i = kSlowFirst.indexOf(f); return i < 0 ? kSlowFirst.length : i }
  return allTestFiles().filter((f) => !unit.has(f)).sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : 1))
}
