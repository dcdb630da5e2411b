/**
 * Hits: the listings and lexical findings collected about one indicator, before anything is weighed. A hit is never
 * changed once collected; the steps after collection (weigh.ts, trust.ts, evidence.ts) read hits and make new values.
 */
import type { Snapshot } from './snapshot/snapshot.ts'
import type { SourceMeta } from './snapshot/source.ts'

/** How a listing reached the indicator. */
export type MatchKind = 'exact' | 'parent_domain' | 'supernet' | 'asn' | 'range' | 'lexical'

/** Values a hit adds to its evidence after the standard members (evidence.ts): numbers, strings, booleans, null. */
export type HitExtra = Readonly<Record<string, number | string | boolean | null>>

/** One listing (or lexical finding) of the indicator. */
export interface Hit {
  readonly src: SourceMeta
  readonly match: MatchKind
  readonly matched: string
  readonly attenuation: number
  readonly firstDay: number
  readonly lastDay: number
  readonly label: string | null
  readonly extra?: HitExtra
}

/** Pseudo-sources for signals computed from the value itself. */
function lexicalSource (subgroup: string, category: string): SourceMeta {
  return { id: -1, name: 'lexical', kind: 'builtin', direction: 'malicious', group: 'lexical', subgroup, category, confidence: 1, halfLifeDays: 0, lines: 0, indexed: 0, rejected: 0, rejectedSamples: [] }
}

/** The lexical pseudo-sources. */
export const kLexical = {
  dga: lexicalSource('dga', 'suspicious'),
  homograph: lexicalSource('homograph', 'lookalike'),
  lookalike: lexicalSource('lookalike', 'lookalike'),
  privateSuffix: lexicalSource('private_suffix_hosting', 'suspicious')
}

/**
 * Collects hits: per source only its strongest (most specific, then most recent) listing counts. Reused from
 * indicator to indicator by a thread's collector (clear()); most indicators add nothing, so its containers are made
 * on the first listing only.
 */
export class HitSet {
  /**
   * Listings, one per source, in the order their sources were first seen; then lexical findings. A source's listing is
   * found by a scan (an indicator has a few): a map by source id, cleared per indicator, made V8 allocate a new table
   * in the old generation for each listed indicator once the map was there.
   */
  private readonly listings: Hit[] = []
  private readonly lexical: Hit[] = []

  /** True when nothing was added. */
  get empty (): boolean {
    return this.listings.length === 0 && this.lexical.length === 0
  }

  /** Forgets every hit (the containers stay for the next indicator). */
  clear (): void {
    if (this.listings.length > 0) this.listings.length = 0
    if (this.lexical.length > 0) this.lexical.length = 0
  }

  add (hit: Hit): void {
    if (hit.src.id < 0) {
      this.lexical.push(hit)
      return
    }
    const listings = this.listings
    const id = hit.src.id
    let at = 0
    while (at < listings.length && (listings[at] as Hit).src.id !== id) at++
    if (at === listings.length) {
      listings.push(hit)
      return
    }
    const prev = listings[at] as Hit
    if (hit.attenuation > prev.attenuation || (hit.attenuation === prev.attenuation && hit.lastDay > prev.lastDay)) listings[at] = hit
  }

  /**
   * Adds every listing of one key. With `rangeFact`, safe listings are not attenuated: an address inside an
   * allowlisted or special-purpose range is in it by definition, while a malicious block only suggests its members.
   */
  addEntries (snap: Snapshot, head: number, match: MatchKind, matched: string, attenuation: number, rangeFact = false): void {
    for (let e = head; e !== 0; e = snap.entryNext(e)) {
      const src = snap.sources[snap.entrySource(e)] as SourceMeta
      const att = rangeFact && src.direction === 'safe' ? 1 : attenuation
      if (src.subgroup === 'popularity') {
        // A rank list's label is the rank: read as a number, never decoded into the string cache.
        this.add({ src, match, matched, attenuation: att, firstDay: 0, lastDay: 0, label: null, extra: { rank: snap.entryLabelNumber(e) } })
      } else {
        this.add({ src, match, matched, attenuation: att, firstDay: snap.entryFirstDay(e), lastDay: snap.entryLastDay(e), label: snap.entryLabel(e) })
      }
    }
  }

  /**
   * The hits, listings by source first, then lexical ones. Valid until the next clear() or add(): the steps after
   * collection read it and make arrays of their own.
   */
  all (): readonly Hit[] {
    return this.lexical.length === 0 ? this.listings : this.listings.length === 0 ? this.lexical : [...this.listings, ...this.lexical]
  }
}
