/**
 * A source of listed indicators: an operator feed or a built-in list, in one shape.
 */
import type { FeedEntry, FeedSpec, RejectedLine } from '../types.ts'

/** What every source says about its listings: the manifest's fields of a feed, without its file. */
export type SourceTraits = Omit<FeedSpec, 'format' | 'path'> & { kind: 'builtin' | 'feed' }

/** A source as the compiler takes it. */
export interface SourceInput extends SourceTraits {
  entries: FeedEntry[]
  rejected: RejectedLine[]
  lines: number
}

/** A source as the snapshot describes it (no entries; counts instead). */
export interface SourceMeta extends SourceTraits {
  id: number
  /** Lines (or items) examined. */
  lines: number
  /** Distinct indicators indexed. */
  indexed: number
  /** Lines the loader rejected plus values that did not normalize. */
  rejected: number
  /** The first rejected lines, for `intel check`. */
  rejectedSamples: RejectedLine[]
}
