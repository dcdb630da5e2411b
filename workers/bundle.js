// Bundles of the TypeScript sources, so that a thread or a process loads one plain JavaScript module instead of
// registering tsx and transforming its module graph again: `workers/<name>.ts` for each worker thread
// (src/worker-entry.ts) and `src/main.ts` for the command line (bin/ioc-verdict.js, name `main`).
//
// bundleFile(name) returns the bundle of the current sources: it reads the bundle's manifest (the project directory it
// was built in, and the SHA-256 of every source file it was made of) and, when a source differs or the bundle is
// missing, runs this file as a program (`node workers/bundle.js <outDir> <name>`, in a child process: esbuild's
// plugins need its asynchronous API), which bundles with esbuild, the compiler tsx runs on, and prints the manifest.
//
// Packages stay imports, resolved from the project's node_modules as from the sources, except one whose bindings the
// bundle never uses (a module it imports for other exports imports it: the quota counter's Redis client in the
// history thread), which is left out (so a package imported only for its side effects, `import 'x'`, would be too:
// the sources have none). import.meta.url, .dirname and .filename are replaced in each file by that
// file's own location, so code that finds files next to itself (reference data, package.json, the sources the intel
// cache key covers) reads the same files as from src/. A bundle is named by a digest of its code, so a file once
// written never changes; bundles older than a day, other than the newest, are removed when one is written.
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises'
import { basename, dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const kSelfPath = fileURLToPath(import.meta.url)
const kRoot = resolve(dirname(kSelfPath), '..')
/** Where bundles and their manifests are kept (git-ignored). */
export const kBundleDir = join(kRoot, '.cache', 'bundles')
const kBuildTimeoutMs = 60_000
const kKeepMs = 86_400_000

const sha256 = (data) => createHash('sha256').update(data).digest('hex')

/** The source file a bundle name stands for. */
function entryOf (name) {
  return name === 'main' ? join(kRoot, 'src', 'main.ts') : join(kRoot, 'workers', `${name}.ts`)
}

function manifestPath (name) {
  return join(kBundleDir, `${name}.json`)
}

/**
 * The bundle of `name`'s current sources (an absolute path), built when needed; null when none can be had (the
 * cache cannot be written, or esbuild is missing), with the reason in `onFailure`.
 * @param {string} name
 * @param {(err: Error) => void} [onFailure]
 * @returns {string | null}
 */
export function bundleFile (name, onFailure) {
  return bundleFiles([name], onFailure).get(name) ?? null
}

/**
 * bundleFile for several names; those to make are made by one child process.
 * @param {readonly string[]} names
 * @param {(err: Error) => void} [onFailure]
 * @returns {Map<string, string | null>}
 */
export function bundleFiles (names, onFailure) {
  const files = new Map(names.map((name) => [name, freshBundle(name)]))
  const stale = names.filter((name) => files.get(name) === null)
  if (stale.length === 0) return files
  try {
    mkdirSync(kBundleDir, { recursive: true })
    const out = execFileSync(process.execPath, [kSelfPath, kBundleDir, ...stale], {
      encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: kBuildTimeoutMs
    })
    for (const line of out.trim().split('\n')) {
      const built = JSON.parse(line)
      const tmp = `${manifestPath(built.name)}.${process.pid}.tmp`
      writeFileSync(tmp, JSON.stringify({ root: kRoot, file: basename(built.file), inputs: built.inputs }))
      renameSync(tmp, manifestPath(built.name))
      files.set(built.name, built.file)
    }
  } catch (err) {
    onFailure?.(err)
  }
  return files
}

/** The bundle its manifest names, when it exists and every source it lists is unchanged. */
function freshBundle (name) {
  let manifest
  try {
    manifest = JSON.parse(readFileSync(manifestPath(name), 'utf8'))
  } catch {
    return null
  }
  if (manifest.root !== kRoot || typeof manifest.file !== 'string') return null
  const file = join(kBundleDir, basename(manifest.file))
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

/** Bundles `name` into `outDir`; resolves to the file and its inputs' digests (this file's own among them). */
async function build (name, outDir) {
  const { build: esbuild } = await import('esbuild')
  const inputs = { [relative(kRoot, kSelfPath)]: sha256(await readFile(kSelfPath)) }
  // Reads every project file itself: the digests are of exactly the text bundled, and import.meta is made concrete.
  const ownLocation = {
    name: 'own-location',
    setup (b) {
      b.onLoad({ filter: /\.[cm]?[jt]s$/ }, async (args) => {
        const text = await readFile(args.path, 'utf8')
        inputs[relative(kRoot, args.path)] = sha256(text)
        const contents = text
          .replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href))
          .replaceAll('import.meta.dirname', JSON.stringify(dirname(args.path)))
          .replaceAll('import.meta.filename', JSON.stringify(args.path))
        return { contents, loader: args.path.endsWith('ts') ? 'ts' : 'js' }
      })
    }
  }
  const packagesFree = {
    name: 'packages-without-side-effects',
    setup (b) {
      b.onResolve({ filter: /^[^./]/ }, (args) => args.path.startsWith('node:') ? undefined : { path: args.path, external: true, sideEffects: false })
    }
  }
  const result = await esbuild({
    absWorkingDir: kRoot,
    entryPoints: [entryOf(name)],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    write: false,
    // Only where the map's source paths are relative to: the file written is named by its digest, in the same folder.
    outfile: join(outDir, `${name}.mjs`),
    // Stack traces (node --enable-source-maps) and coverage (npm run test:coverage) name the TypeScript sources; the
    // map costs nothing unless source maps are enabled, and its sources are read from the files it names.
    sourcemap: 'inline',
    sourcesContent: false,
    logLevel: 'silent',
    plugins: [packagesFree, ownLocation]
  })
  const code = result.outputFiles[0].contents
  const file = join(outDir, `${name}-${sha256(code).slice(0, 16)}.mjs`)
  await mkdir(outDir, { recursive: true })
  const tmp = `${file}.${process.pid}.tmp`
  await writeFile(tmp, code)
  await rename(tmp, file)
  for (const f of await readdir(outDir)) {
    const p = join(outDir, f)
    if (p === file || !f.startsWith(`${name}-`) || !f.endsWith('.mjs')) continue
    if (Date.now() - (await stat(p)).mtimeMs > kKeepMs) await rm(p, { force: true })
  }
  return { file, inputs }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === kSelfPath) {
  const [outDir, ...names] = process.argv.slice(2)
  if (outDir === undefined || names.length === 0) {
    process.stderr.write('usage: node workers/bundle.js <outDir> <name>...\n')
    process.exit(2)
  }
  for (const name of names) process.stdout.write(JSON.stringify({ name, ...await build(name, outDir) }) + '\n')
}
