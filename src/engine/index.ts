/**
 * The engine's public surface: pure functions over an immutable intel snapshot.
 * Workers, the CLI, benches and tests import from here.
 */
export { normalize, inferType } from './normalize/index.ts'
export { assess, Assessor, render, score, kTopSignals, type Assessment, type ScoredSignal, type ScoreParams, type ScoreResult, type RenderParams, type SharedParts } from './score.ts'
export { ContextFacts, contextKey, kContextKeys, kNoListing, writeContext, type Listing, type MemberWriter } from './context.ts'
export { unlistedParts, type UnlistedParts } from './summary.ts'
export { AllowMatcher, ALLOW_KINDS, allowlistedAssessment, kAllowlistedScore, normalizeAllowValue, type AllowKind, type AllowRule } from './allowlist.ts'
export { PROFILES, DEFAULT_PROFILE, selectProfile, type ScoringProfile } from './profiles.ts'
export { Snapshot } from './snapshot/snapshot.ts'
export type { SnapshotData, SnapshotHeader } from './snapshot/format.ts'
export * from './types.ts'
