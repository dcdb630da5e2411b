/**
 * The compiler's per-source cache: one part file per source (source-part.ts, registry-part.ts) in
 * `<intel cache dir>/parts`, named `<kind>.<name>.<key>.part`. The key digests what the part is made from: the
 * source's bytes (a feed file's SHA-256, the package versions and reference files of the built-in lists, the
 * registry folders), the part format, and the compiler's own code, so a changed reader or normalizer never reuses
 * an old part. A rebuild after one feed changed finds every other part here and re-parses that feed alone.
 *
 * A part that cannot be read (missing, deleted by a concurrent prune, damaged) is a miss: the source is parsed again
 * and its part rewritten. Writes go to a temp file and are renamed, so a reader never sees half a part.
 */
import { createHash } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { mkdir, readdir, readFile, rm, stat, utimes } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const kHere = dirname(fileURLToPath(import.meta.url))
/** Source folders whose code shapes the compiled snapshot (intel loaders and compiler, the snapshot layout, normalization). */
const kCompilerDirs = [kHere, join(kHere, '..', 'engine', 'normalize'), join(kHere, '..', 'engine', 'snapshot')]
/** A part no build used for this long is deleted (a part of a source still in use is kept however old). */
const kUnusedPartMs = 24 * 3600_000
/** A temp file this old is left over from a crash. */
const kStaleTempMs = 3600_000
const kPartName = /^(feed|builtin|registry)\.(.+)\.([0-9a-f]{32})\.part$/

let codeDigest: Promise<string> | null = null

/** Digest of the compiler's own source files (computed once per process). */
export async function compilerDigest (): Promise<string> {
  codeDigest ??= (async () => {
    const h = createHash('sha256')
    for (const dir of kCompilerDirs) {
      for (const f of (await readdir(dir, { recursive: true })).sort()) {
        if (/\.(ts|js)$/.test(f)) h.update(await readFile(join(dir, f)))
      }
    }
    return h.digest('hex')
  })()
  return await codeDigest
}

/** SHA-256 of a file's bytes, streamed (a feed of hundreds of MB is never held whole); 'absent' when there is none. */
export async function fileDigest (path: string, allowAbsent: boolean): Promise<string> {
  const h = createHash('sha256')
  try {
    for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) h.update(chunk as Buffer)
  } catch (err) {
    if (allowAbsent && (err as NodeJS.ErrnoException).code === 'ENOENT') return 'absent'
    throw err
  }
  return h.digest('hex')
}

/** Digest of a registry folder's listing (names, sizes, modification times), as the snapshot key takes it. */
export async function folderDigest (dir: string): Promise<string> {
  const h = createHash('sha256')
  for (const f of (await readdir(dir)).sort()) {
    const st = await stat(join(dir, f))
    h.update(`${f}:${st.size}:${st.mtimeMs}\n`)
  }
  return h.digest('hex')
}

/** The file name of a part: its kind, its source's name and a key digesting `parts`. */
export function partFile (kind: 'feed' | 'builtin' | 'registry', name: string, parts: readonly string[]): string {
  return `${kind}.${name}.${createHash('sha256').update(parts.join('\0')).digest('hex').slice(0, 32)}.part`
}

/** Part files on disk: looked up, written, and pruned after each build. */
export class PartCache {
  readonly dir: string
  private readonly used = new Set<string>()
  private ready: Promise<void> | null = null

  constructor (dir: string) {
    this.dir = dir
  }

  /** The part in `file`, read with `read`, or null when it is missing or cannot be read. */
  async get<T> (file: string, read: (path: string) => Promise<T>): Promise<T | null> {
    this.used.add(file)
    const path = join(this.dir, file)
    try {
      const part = await read(path)
      // Age counts from the last use, so a long-unchanged feed's part is never pruned as unused.
      const now = new Date()
      await utimes(path, now, now).catch(() => {})
      return part
    } catch {
      return null
    }
  }

  /** Writes a part with `write`; a cache that cannot be written costs only the next build a parse. */
  async put (file: string, write: (path: string) => Promise<void>): Promise<void> {
    this.used.add(file)
    try {
      this.ready ??= mkdir(this.dir, { recursive: true }).then(() => {})
      await this.ready
      await write(join(this.dir, file))
    } catch {
      // Read-only or full disk: the build goes on from memory.
    }
  }

  /**
   * Deletes parts this build superseded (another key for a source it used) and parts no build used for a day
   * (sources gone from the manifest), plus temp files left by a crash. Best effort.
   */
  async prune (): Promise<void> {
    let names: string[]
    try {
      names = await readdir(this.dir)
    } catch {
      return
    }
    const usedSources = new Set<string>()
    for (const f of this.used) {
      const m = kPartName.exec(f)
      if (m !== null) usedSources.add(`${m[1] as string}.${m[2] as string}`)
    }
    const now = Date.now()
    for (const f of names) {
      if (this.used.has(f)) continue
      const path = join(this.dir, f)
      try {
        const m = kPartName.exec(f)
        if (m !== null && usedSources.has(`${m[1] as string}.${m[2] as string}`)) {
          await rm(path, { force: true })
          continue
        }
        const age = now - (await stat(path)).mtimeMs
        if ((m !== null && age > kUnusedPartMs) || (f.endsWith('.tmp') && age > kStaleTempMs)) await rm(path, { force: true })
      } catch {
        // Gone already (a concurrent prune) or unreadable: nothing to do.
      }
    }
  }
}
