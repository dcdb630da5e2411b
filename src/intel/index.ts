/**
 * Intel: the I/O side of threat data. Reads built-in reference data and operator feeds, compiles them into the
 * snapshot format the pure engine maps (src/engine/snapshot/format.ts), and caches compiled snapshots on disk.
 */
export { compileSnapshot, type CompileOptions } from './compile.ts'
export { loadSnapshot, inputKey } from './cache.ts'
export { intelCheck, intelBuild, type IntelReport } from './check.ts'
export { loadManifest } from './manifest.ts'
export { buildSnapshot, compileInputs, type IntelSourceOptions } from './build.ts'
export { FeedRefresher, readStatusFile, kDefaultValidation, type SourceRow, type ValidationPolicy } from './refresher.ts'
export { redactUrl } from './fetcher.ts'
