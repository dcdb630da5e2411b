/**
 * A source of listed indicators: an operator feed or a built-in list, in one shape.
 */
import type { Direction, FeedEntry, RejectedLine } from '../types.ts'

/** A source as the compiler takes it. */
export interface SourceInput {
  name: string
  kind: 'builtin' | 'feed'
  direction: Direction
  group: string
  subgroup: string
  category: string
  confidence: number
  halfLifeDays: number
  entries: FeedEntry[]
  rejected: RejectedLine[]
  lines: number
}

/** A source as the snapshot describes it (no entries; counts instead). */
export interface SourceMeta {
  id: number
  name: string
  kind: 'builtin' | 'feed'
  direction: Direction
  group: string
  subgroup: string
  category: string
  confidence: number
  halfLifeDays: number
  /** Lines (or items) examined. */
  lines: number
  /** Distinct indicators indexed. */
  indexed: number
  /** Lines the loader rejected plus values that did not normalize. */
  rejected: number
  /** The first rejected lines, for `intel check`. */
  rejectedSamples: RejectedLine[]
}
