/**
 * Disk cache of compiled snapshots, keyed by a digest of every input, so a restart maps the
 * compiled arrays instead of re-parsing half a million CSV rows.
 *
 * File layout: 8-byte magic, uint32 header length (LE), header JSON, zero padding to 8 bytes, buffer bytes.
 */
import { createHash } from 'node:crypto'
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { FeedSpec } from '../engine/types.ts'
import { builtinVersions, kReferenceDir } from './builtin.ts'
import { compileSnapshot, kSnapshotFormat, type CompileOptions, type SnapshotData, type SnapshotHeader } from './compile.ts'

const kMagic = Buffer.from('IOCVSNP1')
/** Source folders whose code shapes the compiled snapshot (intel loaders and compiler, the snapshot layout, normalization). */
const kHere = dirname(fileURLToPath(import.meta.url))
const kCompilerDirs = [kHere, join(kHere, '..', 'engine', 'normalize'), join(kHere, '..', 'engine', 'snapshot')]
/** Older snapshot files kept beside the newest (a reload in progress may still be reading one). */
const kKeepFiles = 2

/** Digest of everything a compile reads: package versions, reference files, feed specs and contents, registry overrides. */
export async function inputKey (options: Pick<CompileOptions, 'feeds' | 'asnDir' | 'countryDir'>): Promise<string> {
  const h = createHash('sha256')
  h.update(JSON.stringify({ format: kSnapshotFormat, versions: builtinVersions(), asnDir: options.asnDir ?? null, countryDir: options.countryDir ?? null }))
  for (const name of ['infrastructure-asns.json', 'public-resolvers.txt']) h.update(await readFile(join(kReferenceDir, name)))
  // The compiler's own code decides what a snapshot holds: a changed loader or normalizer must not reuse old caches.
  for (const dir of kCompilerDirs) {
    for (const f of (await readdir(dir, { recursive: true })).sort()) {
      if (/\.(ts|js)$/.test(f)) h.update(await readFile(join(dir, f)))
    }
  }
  for (const dir of [options.asnDir, options.countryDir]) {
    if (dir === undefined) continue
    for (const f of (await readdir(dir)).sort()) {
      const st = await stat(join(dir, f))
      h.update(`${f}:${st.size}:${st.mtimeMs}`)
    }
  }
  for (const spec of options.feeds as FeedSpec[]) {
    h.update(JSON.stringify(spec))
    try {
      h.update(await readFile(spec.path))
    } catch (err) {
      if (spec.remote === undefined || (err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
      h.update('\0absent')
    }
  }
  return h.digest('hex')
}

/** Serializes a snapshot to the cache file format. */
export function encodeSnapshotFile (data: SnapshotData): Buffer {
  const header = Buffer.from(JSON.stringify(data.header), 'utf8')
  const len = Buffer.alloc(4)
  len.writeUInt32LE(header.length)
  const used = kMagic.length + 4 + header.length
  const pad = Buffer.alloc((8 - (used % 8)) % 8)
  return Buffer.concat([kMagic, len, header, pad, new Uint8Array(data.buffer)])
}

/** Parses a cache file; throws when it is truncated or not a snapshot. */
export function decodeSnapshotFile (file: Buffer): SnapshotData {
  if (file.length < kMagic.length + 4 || !file.subarray(0, kMagic.length).equals(kMagic)) throw new Error('not a snapshot file')
  const len = file.readUInt32LE(kMagic.length)
  const start = kMagic.length + 4
  const header = JSON.parse(file.subarray(start, start + len).toString('utf8')) as SnapshotHeader
  if (header.format !== kSnapshotFormat) throw new Error('snapshot file of another format')
  const dataStart = start + len + ((8 - ((start + len) % 8)) % 8)
  const buffer = new SharedArrayBuffer(file.length - dataStart)
  new Uint8Array(buffer).set(file.subarray(dataStart))
  if (header.counts.bytes !== buffer.byteLength) throw new Error('snapshot file is truncated')
  return { header, buffer }
}

/** How a snapshot was obtained. */
export interface LoadResult {
  data: SnapshotData
  /** true: read from the disk cache; false: compiled from sources. */
  warm: boolean
  ms: number
  path: string | null
}

/**
 * Loads the snapshot for these inputs from `cacheDir`, or compiles it and writes it there.
 * A corrupt cache file is ignored and replaced; a cache directory that cannot be written only costs the next start a compile.
 */
export async function loadSnapshot (options: CompileOptions & { cacheDir: string | null, force?: boolean }): Promise<LoadResult> {
  const t0 = performance.now()
  const key = await inputKey(options)
  const path = options.cacheDir === null ? null : join(options.cacheDir, `snapshot-${key.slice(0, 32)}.bin`)
  if (path !== null && options.force !== true) {
    try {
      const data = decodeSnapshotFile(await readFile(path))
      if (data.header.inputKey === key) return { data, warm: true, ms: performance.now() - t0, path }
    } catch {
      // Missing or unreadable cache: fall through to a compile.
    }
  }
  const data = await compileSnapshot({ ...options, inputKey: key })
  if (path !== null && options.cacheDir !== null) {
    try {
      await mkdir(options.cacheDir, { recursive: true })
      const tmp = `${path}.${process.pid}.tmp`
      await writeFile(tmp, encodeSnapshotFile(data))
      await rename(tmp, path)
      await pruneCache(options.cacheDir, path)
    } catch {
      // A read-only data dir is not fatal: the service runs from the compiled snapshot in memory.
    }
  }
  return { data, warm: false, ms: performance.now() - t0, path }
}

async function pruneCache (dir: string, keep: string): Promise<void> {
  const files = (await readdir(dir)).filter((f) => f.startsWith('snapshot-') && f.endsWith('.bin')).map((f) => join(dir, f))
  const withTimes = await Promise.all(files.map(async (f) => ({ f, t: (await stat(f)).mtimeMs })))
  withTimes.sort((a, b) => b.t - a.t)
  for (const { f } of withTimes.slice(kKeepFiles)) if (f !== keep) await rm(f, { force: true })
}
