/**
 * Intel: the I/O side of threat data. Reads built-in reference data and operator feeds, compiles them into the
 * snapshot format the pure engine maps (src/engine/snapshot/format.ts), and caches compiled snapshots on disk.
 */
export { compile, compileSnapshot, type BuildReport, type CompileOptions, type SourceBuild } from './compile.ts'
export { cachedSnapshot, loadSnapshot, inputKey, encodeSnapshotFile, decodeSnapshotFile, type LoadResult } from './cache.ts'
export { intelCheck, intelBuild, type IntelReport } from './check.ts'
export { loadManifest } from './manifest.ts'
export { buildSnapshot, buildSummary, compileInputs, type BuildInfo, type IntelSourceOptions } from './build.ts'
export { FeedRefresher, readStatusFile, kDefaultValidation, type FeedMeta, type SourceRow, type SourceState, type ValidationPolicy } from './refresher.ts'
export { redactUrl } from './fetcher.ts'
