/**
 * Paths of worker modules. Every worker starts through workers/entry.js with the module in workerData.entry, so the
 * same code runs from src (TypeScript) and from compiled JavaScript.
 *
 * From TypeScript, a worker module is bundled first: workers/bundle.js (esbuild, the compiler tsx runs on) writes
 * workers/<name>.ts and what it imports of src/ as one JavaScript file under .cache/workers/, with a manifest of the
 * source files it was made of and their digests. A thread then loads that one plain module instead of registering tsx
 * and transforming the module graph again (about 150 ms of CPU per thread: every scoring, history and intel thread).
 * The bundle is rebuilt, once, as soon as one of its sources differs from the manifest. When it cannot be built or
 * written (a read-only install), threads load the TypeScript under tsx as before, after one warning.
 */
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { basename, dirname, extname, join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const kExt = extname(fileURLToPath(import.meta.url))
const kRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..')
/** Where bundles and their manifests are kept (git-ignored). */
export const kWorkerCacheDir = join(kRoot, '.cache', 'workers')
const kBundler = join(kRoot, 'workers', 'bundle.js')
const kBundleTimeoutMs = 60_000

/** The shim every worker thread starts from. */
export const kWorkerShim = fileURLToPath(new URL('../workers/entry.js', import.meta.url))

/** Options that load tsx into a process (`node --import tsx ...`). */
const kLoaderFlags = new Set(['--import', '--require', '-r', '--loader', '--experimental-loader'])

/**
 * Node options for worker threads (Worker's and Piscina's `execArgv`): the process's own minus the tsx loader. A
 * thread inherits `--import tsx` otherwise and loads tsx for nothing (about 120 ms of CPU): a bundle needs no loader,
 * and workers/entry.js registers tsx itself in a thread that loads TypeScript.
 */
export const kWorkerExecArgv: readonly string[] = withoutTsx(process.execArgv)

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

/**
 * What a bundle was made of: the project directory it was built in (a bundle holds its sources' absolute locations),
 * its file name in the cache, and each source's SHA-256 (project-relative paths).
 */
interface Manifest { root: string, file: string, inputs: Record<string, string> }

/** What this process loads per worker name: a bundle found or built, or null for the TypeScript module. */
const bundles = new Map<string, string | null>()
let warned = false

/**
 * URL of the module a thread of workers/<name> loads, for workerData.entry: the bundle of its current sources, or the
 * TypeScript module itself when no bundle can be had (or when this is compiled JavaScript already).
 */
export function workerEntry (name: string): string {
  const source = pathToFileURL(fileURLToPath(new URL(`../workers/${name}${kExt}`, import.meta.url))).href
  if (kExt !== '.ts') return source
  let file = bundles.get(name)
  // A bundle removed meanwhile (a cleared cache) is looked for or built again.
  if (file === undefined || (file !== null && !existsSync(file))) {
    file = freshBundle(name) ?? buildBundle(name)
    bundles.set(name, file)
  }
  return file === null ? source : pathToFileURL(file).href
}

function manifestPath (name: string): string {
  return join(kWorkerCacheDir, `${name}.json`)
}

const sha256 = (data: Buffer): string => createHash('sha256').update(data).digest('hex')

/** The bundle of the manifest, when it exists and every source it lists is unchanged. */
function freshBundle (name: string): string | null {
  let manifest: Manifest
  try {
    manifest = JSON.parse(readFileSync(manifestPath(name), 'utf8')) as Manifest
  } catch {
    return null
  }
  if (manifest.root !== kRoot || typeof manifest.file !== 'string') return null
  const file = join(kWorkerCacheDir, basename(manifest.file))
  if (!existsSync(file)) return null
  for (const [path, digest] of Object.entries(manifest.inputs)) {
    try {
      if (sha256(readFileSync(join(kRoot, path))) !== digest) return null
    } catch {
      return null
    }
  }
  return file
}

/** Runs the bundler (in a child process: esbuild's plugins need its asynchronous API) and records its manifest. */
function buildBundle (name: string): string | null {
  try {
    mkdirSync(kWorkerCacheDir, { recursive: true })
    const out = execFileSync(process.execPath, [kBundler, kWorkerCacheDir, name], {
      encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: kBundleTimeoutMs
    })
    const built = JSON.parse(out.trim()) as Manifest & { name: string }
    const manifest: Manifest = { root: kRoot, file: basename(built.file), inputs: built.inputs }
    const tmp = `${manifestPath(name)}.${process.pid}.tmp`
    writeFileSync(tmp, JSON.stringify(manifest))
    renameSync(tmp, manifestPath(name))
    return built.file
  } catch (err) {
    if (!warned) {
      warned = true
      process.emitWarning(`worker threads load TypeScript under tsx: no bundle could be built in ${kWorkerCacheDir} (${(err as Error).message.split('\n')[0] ?? ''})`, { code: 'IOC_WORKER_BUNDLE' })
    }
    return null
  }
}
