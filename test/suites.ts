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

/** End-to-end test files: every test file that is not a unit test. */
export function e2eFiles (): string[] {
  const unit = new Set(kUnitFiles)
  return allTestFiles().filter((f) => !unit.has(f))
}
