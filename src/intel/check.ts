/**
 * `intel check` and `intel build`: what a compile read, kept and rejected, and what the snapshot weighs.
 * The CLI prints these reports; the functions return plain data.
 */
import type { CompileOptions } from './compile.ts'
import { buildSummary } from './build.ts'
import { loadSnapshot, type LoadResult } from './cache.ts'

/** One source's line of the report. */
export interface SourceReport {
  name: string
  kind: 'builtin' | 'feed'
  lines: number
  indexed: number
  rejected: number
  rejectedSamples: Array<{ line: number, reason: string }>
  /** Read and parsed by this compile (false: its part was reused from the parts cache, or the snapshot was warm). */
  parsed: boolean
  parseMs: number
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
  /** Every source and registry this compile read and parsed, and how many it reused (null when warm). */
  build: { parsed: string[], reused: number } | null
}

function report (r: LoadResult): IntelReport {
  const { header } = r.data
  const build = buildSummary({ warm: r.warm, ms: r.ms, report: r.build })
  return {
    version: header.version,
    dataTimestamp: header.dataTimestamp,
    warm: r.warm,
    ms: Math.round(r.ms),
    snapshotBytes: r.data.buffer.byteLength,
    cachePath: r.path,
    counts: header.counts,
    sources: header.sources.map((s) => {
      const b = build.sources.get(s.name)
      return { name: s.name, kind: s.kind, lines: s.lines, indexed: s.indexed, rejected: s.rejected, rejectedSamples: s.rejectedSamples, parsed: b?.parsed ?? false, parseMs: b?.parsed === true ? b.ms : 0 }
    }),
    build: r.build === null ? null : { parsed: build.parsed, reused: build.reused }
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
