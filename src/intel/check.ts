/**
 * `intel check` and `intel build`: what a compile read, kept and rejected, and what the snapshot weighs.
 * The CLI prints these reports; the functions return plain data.
 */
import type { CompileOptions } from './compile.ts'
import { loadSnapshot, type LoadResult } from './cache.ts'

/** One source's line of the report. */
export interface SourceReport {
  name: string
  kind: 'builtin' | 'feed'
  lines: number
  indexed: number
  rejected: number
  rejectedSamples: Array<{ line: number, reason: string }>
}

/** What `intel check` / `intel build` report. */
export interface IntelReport {
  version: string
  dataTimestamp: string
  warm: boolean
  ms: number
  snapshotBytes: number
  cachePath: string | null
  counts: Record<string, number>
  sources: SourceReport[]
}

function report (r: LoadResult): IntelReport {
  const { header } = r.data
  return {
    version: header.version,
    dataTimestamp: header.dataTimestamp,
    warm: r.warm,
    ms: Math.round(r.ms),
    snapshotBytes: r.data.buffer.byteLength,
    cachePath: r.path,
    counts: header.counts,
    sources: header.sources.map((s) => ({ name: s.name, kind: s.kind, lines: s.lines, indexed: s.indexed, rejected: s.rejected, rejectedSamples: s.rejectedSamples }))
  }
}

/** Compiles every source without touching the disk cache and reports counts and rejected lines. */
export async function intelCheck (options: CompileOptions): Promise<IntelReport> {
  return report(await loadSnapshot({ ...options, cacheDir: null }))
}

/** Compiles (or, unless forced, loads from the cache) and writes the disk cache. */
export async function intelBuild (options: CompileOptions & { cacheDir: string, force?: boolean }): Promise<IntelReport> {
  return report(await loadSnapshot(options))
}
