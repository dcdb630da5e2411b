/**
 * Verdict facets: the distinct (risk, scores) pairs a scoring thread has written, each with the texts made of it.
 *
 * Most verdicts of a bulk share a handful of pairs ("unknown, no signals" above all: about four in five of the
 * bench's mixed corpus; 46 distinct pairs in 2,000 indicators). A verdict cache entry keeps its facet's number, so a
 * hit at signal_details none takes the history record's members, its tail and the risk category from here instead of
 * decoding risk and scores from the ring, joining them into new strings and hashing those again for each item.
 *
 * Numbers are given in order of first sight and never reused or forgotten, so a cache entry's number stays valid for
 * the table's life (a verdict cache owns the table its entries are numbered in; a scoring context without a cache has
 * its own). The table is bounded: past
 * kMaxFacets pairs a verdict has no facet and its texts are made as before.
 */
import type { Assessment } from '../engine/index.ts'
import { itemTail, verdictMembers } from '../history/record.ts'

/** Pairs a thread keeps at most (each holds a few hundred bytes of text). */
export const kMaxFacets = 4096
/** The facet number of a verdict without a facet (table full). */
export const kNoFacet = 0xffffffff

/** One (risk, scores) pair and what is written of it. */
export interface Facet {
  readonly id: number
  /** JSON texts of risk and scores. */
  readonly risk: string
  readonly scores: string
  /** risk.category (metrics count verdicts by it). */
  readonly category: string
  /** The history record's verdict members at signal_details none (record.ts verdictMembers, no labels). */
  readonly members: string
  /** The history tail of an item without log-only fields (record.ts itemTail). */
  readonly tail: string
}

const kNoLabels: Array<Record<string, unknown>> = []

/** The facet table of one thread. */
export class Facets {
  private readonly list: Facet[] = []
  /** By the JSON texts (`risk \n scores`: JSON text holds no raw line feed). */
  private readonly byText = new Map<string, Facet>()
  /** By identity of frozen risk and scores objects (the engine shares them between unlisted verdicts). */
  private readonly byObject = new WeakMap<object, WeakMap<object, Facet>>()
  private readonly max: number

  constructor (max = kMaxFacets) {
    this.max = max
  }

  /** Facets known. */
  get size (): number {
    return this.list.length
  }

  /** The facet numbered `id`, or undefined (kNoFacet, or a number this table never gave). */
  byId (id: number): Facet | undefined {
    return this.list[id]
  }

  /**
   * The facet of an assessment whose risk and scores have the JSON texts given; null when the table is full and the
   * pair is new. A frozen pair is found by identity (its texts never change: chunk-scratch.ts jsonOf), any other by text.
   */
  of (risk: Assessment['risk'], scores: Assessment['scores'], riskJson: string, scoresJson: string): Facet | null {
    const frozen = Object.isFrozen(risk) && Object.isFrozen(scores)
    let inner = frozen ? this.byObject.get(risk) : undefined
    let f = inner?.get(scores)
    if (f !== undefined) return f
    const text = `${riskJson}\n${scoresJson}`
    f = this.byText.get(text)
    if (f === undefined) {
      if (this.list.length >= this.max) return null
      const members = verdictMembers(riskJson, scoresJson, kNoLabels)
      f = { id: this.list.length, risk: riskJson, scores: scoresJson, category: risk.category, members, tail: itemTail(members, null, null) }
      this.list.push(f)
      this.byText.set(text, f)
    }
    if (frozen) {
      if (inner === undefined) this.byObject.set(risk, inner = new WeakMap())
      inner.set(scores, f)
    }
    return f
  }
}
