/**
 * How the test files are run (test/run.ts). Files listed in a suite share one process (test/<suite>.suite.ts), so they
 * pay the start-up (tsx, module graph, sample snapshot) once; each file keeps its own services and still runs alone
 * too (`node --import tsx --test test/engine/score.test.ts`). Every other *.test.ts file runs in a process of its own;
 * a new file does so until it is listed here, so none is ever left out.
 *
 * unit: pure code (engine, bytes, record and part codecs, bulk item format, config, the lint rule); no service, server,
 * thread pool or store. http and services: end-to-end files that start services in-process (app.inject, stores,
 * pools) and touch no process-wide state. Child processes, real servers under load and crash fixtures stay alone.
 */
import { readdirSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'

export const kTestRoot = import.meta.dirname

/** Files of each suite, relative to test/. */
export const kSuites = {
  unit: [
    'bench/flame.test.ts',
    'bytes/byte-sink.test.ts',
    'bytes/kept-bytes.test.ts',
    'config/config.test.ts',
    'engine/dga.test.ts',
    'engine/feeds.test.ts',
    'engine/known-good-sets.test.ts',
    'engine/known-good.test.ts',
    'engine/lexical.test.ts',
    'engine/normalize.test.ts',
    'engine/score.test.ts',
    'engine/summary-key.test.ts',
    'history/codec.test.ts',
    'history/journal-reader.test.ts',
    'history/legacy-spool.test.ts',
    'history/record.test.ts',
    'history/retro-scan.test.ts',
    'history/utc-day.test.ts',
    'http/public-errors.test.ts',
    'http/request-logger.test.ts',
    'intel/public-manifest.test.ts',
    'lifecycle/lifecycle.test.ts',
    'lint/import-rooms.test.ts',
    'lint/route-errors.test.ts',
    'pool/answer-writers.test.ts',
    'pool/bulk-item.test.ts',
    'pool/chunk-codec.test.ts',
    'pool/golden-answers.test.ts',
    'pool/verdict-cache.test.ts',
    'store/api-keys.test.ts',
    'store/history-rows.test.ts',
    'store/sortable-id.test.ts'
  ],
  http: [
    'dashboard/session.test.ts',
    'dashboard/sign-in-limits.test.ts',
    'docs/permissions.test.ts',
    'http/allowlist.test.ts',
    'http/auth.test.ts',
    'http/body-fuzz.test.ts',
    'http/bulk-formats.test.ts',
    'http/bulk.test.ts',
    'http/connection-drain.test.ts',
    'http/content.test.ts',
    'http/errors.test.ts',
    'http/hardening.test.ts',
    'http/feedback.test.ts',
    'http/health-history.test.ts',
    'http/keys.test.ts',
    'http/limits.test.ts',
    'http/metrics-probes.test.ts',
    'http/openapi.test.ts',
    'http/single.test.ts'
  ],
  services: [
    'fleet/rebuild.test.ts',
    'fleet/unanswered.test.ts',
    'history/accounting.test.ts',
    'history/destroy.test.ts',
    'history/oversized-records.test.ts',
    'history/quota.test.ts',
    'history/retention.test.ts',
    'history/search-history.test.ts',
    'history/writer-parts.test.ts',
    'pool/intel-service.test.ts',
    'pool/recycle.test.ts',
    'pool/retro-thread.test.ts',
    'store/index.test.ts',
    'store/migrations.test.ts',
    'store/postgres.test.ts',
    'store/quota.test.ts',
    'store/sign-in.test.ts',
    'store/sql-port.test.ts',
    'store/sqlite.test.ts',
    'store/store.test.ts'
  ]
} as const satisfies Record<string, readonly string[]>

export type SuiteName = keyof typeof kSuites

/** Imports a suite's files into this process (what test/<suite>.suite.ts does). */
export async function loadSuite (name: SuiteName): Promise<void> {
  const { pathToFileURL } = await import('node:url')
  for (const file of kSuites[name]) await import(pathToFileURL(join(kTestRoot, file)).href)
}

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
 * Files and suites by measured time, the slowest first (one process each, alone on a quiet machine:
 * `node --import tsx test/run.ts --durations`). The run starts them in this order, so the long ones do not end up
 * running alone at the end. Only an order: a file missing here still runs, after these.
 */
const kSlowFirst: readonly string[] = [
  'intel/feeds-fetch.test.ts',
  'http.suite.ts',
  'unit.suite.ts',
  'cli/cli.test.ts',
  'e2e/durability.test.ts',
  'http/edges.test.ts',
  'services.suite.ts',
  'history/store-failure.test.ts',
  'engine/intel.test.ts',
  'history/shutdown.test.ts',
  'e2e/reload.test.ts',
  'e2e/retro-hunt.test.ts',
  'e2e/retro-hunt-webhooks.test.ts',
  'cli/score-file.test.ts',
  'e2e/pool.test.ts',
  'e2e/process-fault.test.ts',
  'bench/capacity.test.ts',
  'e2e/crash.test.ts',
  'dashboard/browser.test.ts',
  'e2e/oversize.test.ts',
  'e2e/scale-out.test.ts',
  'history/writer-restart.test.ts',
  'e2e/integrations.test.ts',
  'e2e/close.test.ts'
]

/** Files that run in a process of their own: in no suite. */
export function aloneFiles (): string[] {
  const grouped = new Set<string>(Object.values(kSuites).flat())
  return allTestFiles().filter((f) => !grouped.has(f))
}

/** What `mode` runs (suites as their test/<suite>.suite.ts), the slowest first. */
export function runOrder (mode: 'unit' | 'e2e' | 'all'): string[] {
  const files = [
    ...(mode === 'unit' ? [] : aloneFiles()),
    ...(mode === 'e2e' ? [] : ['unit.suite.ts']),
    ...(mode === 'unit' ? [] : ['services.suite.ts', 'http.suite.ts'])
  ]
  const rank = (f: string): number => { const i = kSlowFirst.indexOf(f); return i < 0 ? kSlowFirst.length : i }
  return files.sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : 1))
}
