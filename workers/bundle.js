// Bundles worker modules (workers/<name>.ts and what they import from src/) into one JavaScript file each, with
// esbuild, the compiler tsx itself runs on: `node workers/bundle.js <outDir> <name>...`. src/worker-entry.ts runs
// it when a bundle is missing or older than its sources; a thread then loads one plain module instead of registering
// tsx and transforming its module graph again.
//
// Packages stay imports (resolved from the project's node_modules, as from the sources), except one whose bindings
// the bundle never uses (see packagesFree). import.meta.url, .dirname
// and .filename are replaced in each file by that file's own location, so code that finds files next to itself (the
// reference data, package.json, the sources the intel cache key covers) reads the same files as from src/.
// A bundle is named by a digest of its code, so a file once written never changes. Prints one JSON line per worker:
// { name, file, inputs }, inputs mapping each project file it was made of to the SHA-256 of the text bundled.
import { createHash } from 'node:crypto'
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { build } from 'esbuild'

const kRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const [outDir, ...names] = process.argv.slice(2)
if (outDir === undefined || names.length === 0) {
  process.stderr.write('usage: node workers/bundle.js <outDir> <name>...\n')
  process.exit(2)
}

/** Bundles of a worker older than this, other than the newest, are removed when a new one is written. */
const kKeepMs = 86_400_000

const sha256 = (data) => createHash('sha256').update(data).digest('hex')

/** This file's own digest: a bundle made differently is made again. */
const kSelf = sha256(await readFile(fileURLToPath(import.meta.url), 'utf8'))

for (const name of names) {
  const inputs = { [relative(kRoot, fileURLToPath(import.meta.url))]: kSelf }
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
  // Packages stay imports; one whose bindings the bundle never uses is left out (it is code of a module the worker
  // imports for other exports: the quota counter's Redis client in the history thread, the feed fetcher's HTTP
  // client in the intel thread).
  const packagesFree = {
    name: 'packages-without-side-effects',
    setup (b) {
      b.onResolve({ filter: /^[^./]/ }, (args) => args.path.startsWith('node:') ? undefined : { path: args.path, external: true, sideEffects: false })
    }
  }
  const result = await build({
    absWorkingDir: kRoot,
    entryPoints: [join(kRoot, 'workers', `${name}.ts`)],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    write: false,
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
  process.stdout.write(JSON.stringify({ name, file, inputs }) + '\n')
}
