/**
 * Disk cache of compiled snapshots, keyed by a digest of every input, so a restart maps the
 * compiled arrays instead of re-parsing half a million CSV rows. Beside it, `parts/` keeps each source's compiled
 * part (part-cache.ts), so a rebuild after one feed changed re-parses only that feed.
 *
 * File layout: 8-byte magic, uint32 header length (LE), header JSON, zero padding to 8 bytes, buffer bytes.
 */
import { createHash } from 'node:crypto'
import { mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises'
import { join } from 'node:path'
import type { FeedSpec } from '../engine/types.ts'
import { builtinVersions, referenceDigest } from './builtin.ts'
import { compile, kSnapshotFormat, type BuildReport, type CompileOptions, type SnapshotData, type SnapshotHeader } from './compile.ts'
import { compilerDigest, fileDigest } from './part-cache.ts'

const kMagic = Buffer.from('IOCVSNP1')
/** Older snapshot files kept beside the newest (a reload in progress may still be reading one). */
const kKeepFiles = 2

/** SHA-256 of each feed file by name ('absent' for a fetched feed not downloaded yet), read as a stream. */
export async function feedDigests (feeds: readonly FeedSpec[]): Promise<Map<string, string>> {
  const out = new Map<string, string>()
  for (const spec of feeds) out.set(spec.name, await fileDigest(spec.path, spec.remote !== undefined))
  return out
}

/** Digest of everything a compile reads: package versions, reference files, feed specs and contents, registry overrides. */
export async function inputKey (options: Pick<CompileOptions, 'feeds' | 'asnDir' | 'countryDir' | 'digests'>): Promise<string> {
  const h = createHash('sha256')
  h.update(JSON.stringify({ format: kSnapshotFormat, versions: builtinVersions(), asnDir: options.asnDir ?? null, countryDir: options.countryDir ?? null }))
  h.update(await referenceDigest())
  // The compiler's own code decides what a snapshot holds: a changed loader or normalizer must not reuse old caches.
  h.update(await compilerDigest())
  for (const dir of [options.asnDir, options.countryDir]) {
    if (dir === undefined) continue
    for (const f of (await readdir(dir)).sort()) {
      const st = await stat(join(dir, f))
      h.update(`${f}:${st.size}:${st.mtimeMs}`)
    }
  }
  const digests = options.digests ?? await feedDigests(options.feeds)
  for (const spec of options.feeds) {
    h.update(JSON.stringify(spec))
    h.update(digests.get(spec.name) ?? await fileDigest(spec.path, spec.remote !== undefined))
  }
  return h.digest('hex')
}

/** The bytes before a snapshot's buffer in its cache file: magic, header length, header JSON, padding. */
function fileHead (header: SnapshotHeader): Buffer {
  const json = Buffer.from(JSON.stringify(header), 'utf8')
  const len = Buffer.alloc(4)
  len.writeUInt32LE(json.length)
  const used = kMagic.length + 4 + json.length
  return Buffer.concat([kMagic, len, json, Buffer.alloc((8 - (used % 8)) % 8)])
}

/** Serializes a snapshot to the cache file format (in memory: tests and small snapshots). */
export function encodeSnapshotFile (data: SnapshotData): Buffer {
  return Buffer.concat([fileHead(data.header), new Uint8Array(data.buffer)])
}

/** Writes a snapshot's cache file: the head, then the shared buffer itself (no copy of the whole file in memory). */
async function writeSnapshotFile (path: string, data: SnapshotData): Promise<void> {
  const head = fileHead(data.header)
  const fh = await open(path, 'w')
  try {
    await fh.write(head, 0, head.length, 0)
    await fh.write(new Uint8Array(data.buffer), 0, data.buffer.byteLength, head.length)
  } finally {
    await fh.close()
  }
}

/** Parses a cache file; throws when it is truncated or not a snapshot. */
export function decodeSnapshotFile (file: Buffer): SnapshotData {
  const { header, dataStart } = decodeHead(file)
  const buffer = new SharedArrayBuffer(file.length - dataStart)
  new Uint8Array(buffer).set(file.subarray(dataStart))
  if (header.counts.bytes !== buffer.byteLength) throw new Error('snapshot file is truncated')
  return { header, buffer }
}

/** The header of a cache file and where its buffer starts; `file` need only hold the head. */
function decodeHead (file: Buffer): { header: SnapshotHeader, dataStart: number } {
  if (file.length < kMagic.length + 4 || !file.subarray(0, kMagic.length).equals(kMagic)) throw new Error('not a snapshot file')
  const len = file.readUInt32LE(kMagic.length)
  const start = kMagic.length + 4
  if (start + len > file.length) throw new Error('snapshot file is truncated')
  const header = JSON.parse(file.subarray(start, start + len).toString('utf8')) as SnapshotHeader
  if (header.format !== kSnapshotFormat) throw new Error('snapshot file of another format')
  return { header, dataStart: start + len + ((8 - ((start + len) % 8)) % 8) }
}

/** Reads a cache file straight into a shared buffer (the file's bytes are never held twice). */
async function readSnapshotFile (path: string): Promise<SnapshotData> {
  const fh = await open(path, 'r')
  try {
    const size = (await fh.stat()).size
    const first = Buffer.alloc(Math.min(size, 64 * 1024))
    await fh.read(first, 0, first.length, 0)
    let head = first
    const len = first.length >= 12 ? first.readUInt32LE(kMagic.length) : 0
    if (kMagic.length + 4 + len > first.length && kMagic.length + 4 + len <= size) {
      head = Buffer.alloc(kMagic.length + 4 + len)
      await fh.read(head, 0, head.length, 0)
    }
    const { header, dataStart } = decodeHead(head)
    if (header.counts.bytes !== size - dataStart) throw new Error('snapshot file is truncated')
    const buffer = new SharedArrayBuffer(size - dataStart)
    const bytes = new Uint8Array(buffer)
    for (let at = 0; at < bytes.length;) {
      const { bytesRead } = await fh.read(bytes, at, Math.min(bytes.length - at, 16 << 20), dataStart + at)
      if (bytesRead === 0) throw new Error('snapshot file is truncated')
      at += bytesRead
    }
    return { header, buffer }
  } finally {
    await fh.close()
  }
}

/** The cache file of the snapshot compiled from inputs `inputKey`. */
function cacheFile (cacheDir: string, inputKey: string): string {
  return join(cacheDir, `snapshot-${inputKey.slice(0, 32)}.bin`)
}

/**
 * The snapshot of `version` compiled from inputs `inputKey`, if the cache in `cacheDir` still holds it (it keeps the
 * newest kKeepFiles), else null: the retro-hunt's previous snapshot at a start (src/pool/retro-hunt.ts).
 */
export async function cachedSnapshot (cacheDir: string, inputKey: string, version: string): Promise<SnapshotData | null> {
  try {
    const data = await readSnapshotFile(cacheFile(cacheDir, inputKey))
    return data.header.inputKey === inputKey && data.header.version === version ? data : null
  } catch {
    return null
  }
}

/** How a snapshot was obtained. */
export interface LoadResult {
  data: SnapshotData
  /** true: read from the disk cache; false: compiled from sources. */
  warm: boolean
  ms: number
  path: string | null
  /** How each source was obtained (parsed or reused part); null when the snapshot came whole from the cache. */
  build: BuildReport | null
}

/**
 * Loads the snapshot for these inputs from `cacheDir`, or compiles it and writes it there. Parts of every source are
 * kept in `<cacheDir>/parts`, so a compile after one feed changed parses that feed alone (`force` parses all).
 * A corrupt cache file is ignored and replaced; a cache directory that cannot be written only costs the next start a compile.
 */
export async function loadSnapshot (options: CompileOptions & { cacheDir: string | null, force?: boolean }): Promise<LoadResult> {
  const t0 = performance.now()
  const digests = options.digests ?? await feedDigests(options.feeds)
  const key = await inputKey({ ...options, digests })
  const path = options.cacheDir === null ? null : cacheFile(options.cacheDir, key)
  if (path !== null && options.force !== true) {
    try {
      const data = await readSnapshotFile(path)
      if (data.header.inputKey === key) return { data, warm: true, ms: performance.now() - t0, path, build: null }
    } catch {
      // Missing or unreadable cache: fall through to a compile.
    }
  }
  const { data, report } = await compile({
    ...options,
    digests,
    inputKey: key,
    partsDir: options.partsDir ?? (options.cacheDir === null ? null : join(options.cacheDir, 'parts'))
  })
  // A feed replaced while it was read: the snapshot is right for what was read, but not for `key`.
  if (path !== null && options.cacheDir !== null && report.consistent) {
    try {
      await mkdir(options.cacheDir, { recursive: true })
      const tmp = `${path}.${process.pid}.tmp`
      await writeSnapshotFile(tmp, data)
      await rename(tmp, path)
      await pruneCache(options.cacheDir, path)
    } catch {
      // A read-only data dir is not fatal: the service runs from the compiled snapshot in memory.
    }
  }
  return { data, warm: false, ms: performance.now() - t0, path, build: report }
}

async function pruneCache (dir: string, keep: string): Promise<void> {
  const files = (await readdir(dir)).filter((f) => f.startsWith('snapshot-') && f.endsWith('.bin')).map((f) => join(dir, f))
  const withTimes = await Promise.all(files.map(async (f) => ({ f, t: (await stat(f)).mtimeMs })))
  withTimes.sort((a, b) => b.t - a.t)
  for (const { f } of withTimes.slice(kKeepFiles)) if (f !== keep) await rm(f, { force: true })
}
