/**
 * Collects what a loader read from one feed file: entries, rejected lines and the number of lines examined.
 */
import type { FeedEntry, FeedParseResult, IndicatorType, RejectedLine } from '../../engine/types.ts'

/** Optional facts a feed may state about an entry; undefined members are left off the entry. */
export interface EntryFacts {
  firstSeen?: number | undefined
  lastSeen?: number | undefined
  label?: string | undefined
}

/**
 * Receives entries as a loader finds them, instead of the loader collecting them: the snapshot compiler folds each
 * into its compact per-source form at once, so a million-line feed never exists as a million entry objects.
 */
export type EntrySink = (type: IndicatorType | null, value: string, line: number, facts: EntryFacts | undefined) => void

/**
 * Accumulates one loader's result; absent facts are omitted, never set to undefined (exactOptionalPropertyTypes).
 * With a sink, entries go to the sink and `entries` stays empty; rejected lines and the line count are kept either way.
 */
export class FeedResultBuilder {
  readonly entries: FeedEntry[] = []
  readonly rejected: RejectedLine[] = []
  lines = 0
  private readonly sink: EntrySink | undefined

  constructor (sink?: EntrySink) {
    this.sink = sink
  }

  /** Records one indicator found at `line`. */
  add (type: IndicatorType | null, value: string, line: number, facts?: EntryFacts): void {
    if (this.sink !== undefined) {
      this.sink(type, value, line, facts)
      return
    }
    const entry: FeedEntry = { type, value, line }
    if (facts !== undefined) {
      if (facts.firstSeen !== undefined) entry.firstSeen = facts.firstSeen
      if (facts.lastSeen !== undefined) entry.lastSeen = facts.lastSeen
      if (facts.label !== undefined) entry.label = facts.label
    }
    this.entries.push(entry)
  }

  /** Records a line (or item) the loader could not use. */
  reject (line: number, reason: string): void {
    this.rejected.push({ line, reason })
  }

  /** The finished result. */
  result (): FeedParseResult {
    return { entries: this.entries, rejected: this.rejected, lines: this.lines }
  }
}

/** The result for a JSON document that could not be used at all: one rejected item, line 1. */
export function wholeFileRejected (reason: string): FeedParseResult {
  return { entries: [], rejected: [{ line: 1, reason }], lines: 1 }
}
