/**
 * The engine's public surface: pure functions over an immutable intel snapshot.
 * Workers, the CLI, benches and tests import from here.
 */
export { normalize, inferType } from './normalize/index.ts'
export { assess, render, score, kTopSignals, type Assessment, type ScoredSignal, type ScoreParams, type ScoreResult, type RenderParams } from './score.ts'
export { PROFILES, DEFAULT_PROFILE, selectProfile, type ScoringProfile } from './profiles.ts'
export { Snapshot } from './intel/snapshot.ts'
export { compileSnapshot, type SnapshotData, type SnapshotHeader, type CompileOptions } from './intel/compile.ts'
export { loadSnapshot, inputKey } from './intel/cache.ts'
export { intelCheck, intelBuild, type IntelReport } from './intel/check.ts'
export { loadManifest } from './intel/manifest.ts'
export * from './types.ts'
