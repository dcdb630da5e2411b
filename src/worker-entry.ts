/**
 * Paths of worker modules. Every worker starts through workers/entry.js with the module in workerData.entry, so the
 * same code runs from src (TypeScript) and from compiled JavaScript.
 *
 * From TypeScript, a thread loads a bundle of workers/<name>.ts and what it imports of src/ (workers/bundle.js:
 * esbuild, into .cache/bundles, made again once one of its sources changes) instead of registering tsx and
 * transforming the module graph again: about 150 ms of CPU less per thread, and every scoring, history and intel
 * thread starts so. When no bundle can be had (a read-only install), threads load the TypeScript under tsx as before,
 * after one warning.
 */
import { existsSync, readdirSync } from 'node:fs'
import { extname } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { Worker } from 'node:worker_threads'
import { bundleFiles } from '../workers/bundle.js'

const kExt = extname(fileURLToPath(import.meta.url))

/** The shim every worker thread starts from. */
export const kWorkerShim = fileURLToPath(new URL('../workers/entry.js', import.meta.url))

/** Options that load tsx into a process (`node --import tsx ...`). */
const kLoaderFlags = new Set(['--import', '--require', '-r', '--loader', '--experimental-loader'])

/**
 * Node options for worker threads (Worker's and Piscina's `execArgv`): the process's own minus the tsx loader and
 * minus what a thread refuses. A thread inherits `--import tsx` otherwise and loads tsx for nothing (about 120 ms of
 * CPU): a bundle needs no loader, and workers/entry.js registers tsx itself in a thread that loads TypeScript.
 *
 * A Worker refuses its whole `execArgv` over one V8 or process-wide option (`--max-old-space-size`, `--title`,
 * `--stack-trace-limit` ...), and which options those are differs between Node lines; Node 24's test runner also
 * hands every child process the defaults of such options. So the list is tried once on a thread that does nothing,
 * and the options that thread names are left out.
 */
export const kWorkerExecArgv: readonly string[] = workerSafe(withoutTsx(process.execArgv))

function workerSafe (argv: string[]): string[] {
  if (argv.length === 0) return argv
  const refused = refusedBy(argv)
  if (refused === null) return argv
  const out: string[] = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string
    if (!refused.has(arg)) {
      out.push(arg)
      continue
    }
    // `--flag value` as two entries: the value goes with its flag.
    const next = argv[i + 1]
    if (!arg.includes('=') && next !== undefined && !next.startsWith('-')) i++
  }
  return refusedBy(out) === null ? out : []
}

/** The options a thread refuses in `argv`, or null when it takes them all. */
function refusedBy (argv: string[]): Set<string> | null {
  try {
    const probe = new Worker('', { eval: true, execArgv: argv, stdout: true, stderr: true })
    probe.unref()
    void probe.terminate()
    return null
  } catch (err) {
    const message = (err as Error & { code?: string }).code === 'ERR_WORKER_INVALID_EXEC_ARGV' ? (err as Error).message : ''
    const at = message.indexOf('flags: ')
    return new Set(at < 0 ? argv : message.slice(at + 'flags: '.length).split(', '))
  }
}

function withoutTsx (argv: readonly string[]): string[] {
  const isTsx = (spec: string | undefined): boolean => spec === 'tsx' || (spec?.startsWith('tsx/') ?? false)
  const out: string[] = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string
    const eq = arg.indexOf('=')
    if (eq > 0 && kLoaderFlags.has(arg.slice(0, eq)) && isTsx(arg.slice(eq + 1))) continue
    if (kLoaderFlags.has(arg) && isTsx(argv[i + 1])) {
      i++
      continue
    }
    out.push(arg)
  }
  return out
}

/** What this process loads per worker name: a bundle found or built, or null for the TypeScript module. */
let bundles: Map<string, string | null> | null = null
let warned = false

function warn (err: Error): void {
  if (warned) return
  warned = true
  process.emitWarning(`worker threads load TypeScript under tsx: no bundle could be built (${err.message.split('\n')[0] ?? ''})`, { code: 'IOC_WORKER_BUNDLE' })
}

/**
 * Every worker's bundle, found or made at the first need, together: a worker first started later (a feed download
 * validated an hour after start) does not wait for its bundle then.
 */
function workerBundles (): Map<string, string | null> {
  const names = readdirSync(fileURLToPath(new URL('../workers/', import.meta.url)))
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts')).map((f) => f.slice(0, -'.ts'.length))
  return bundleFiles(names, warn)
}

/**
 * URL of the module a thread of workers/<name> loads, for workerData.entry: the bundle of its current sources, or the
 * TypeScript module itself when no bundle can be had (or when this is compiled JavaScript already).
 */
export function workerEntry (name: string): string {
  const source = pathToFileURL(fileURLToPath(new URL(`../workers/${name}${kExt}`, import.meta.url))).href
  if (kExt !== '.ts') return source
  bundles ??= workerBundles()
  let file = bundles.get(name) ?? null
  // A bundle removed meanwhile (a cleared cache) is looked for or made again.
  if (file !== null && !existsSync(file)) {
    bundles = workerBundles()
    file = bundles.get(name) ?? null
  }
  return file === null ? source : pathToFileURL(file).href
}
