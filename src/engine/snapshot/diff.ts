/**
 * What a new snapshot raises compared with the one it replaces, for the retro-hunt: the listing keys (hash lanes,
 * format.ts) whose verdict may now be higher. A key is raised when the new snapshot lists it in a malicious source
 * the old one did not list it in (a new listing), lists it in the same malicious source with a higher confidence or
 * another category (a stronger listing), or no longer lists it in a safe source (a removed allowlist or known-good
 * entry). Without an old snapshot (a pass run by hand), every malicious listing counts as new.
 *
 * Keys are hashes, never strings: a history item is matched by computing the keys the scorer would look up for it
 * (retro-scan.ts) and looking them up here. Pure and bounded: at most `limit` keys are kept (12 bytes each plus a
 * table of 8 bytes per slot), the rest counted as dropped.
 */
import type { Snapshot } from './snapshot.ts'
import type { SourceMeta } from './source.ts'

/** Why a key is raised. */
export type RaiseKind = 'listed' | 'stronger' | 'unlisted_safe'
const kKinds: readonly RaiseKind[] = ['listed', 'stronger', 'unlisted_safe']

/** One raised key's cause: the source (and its traits) that raises it. */
export interface RaiseCause {
  kind: RaiseKind
  source: string
  category: string
  confidence: number
}

/** A source's listing of one key as the diff compares them. */
interface Listing { name: string, direction: string, category: string, confidence: number }

/** Default bound on raised keys kept by one diff. */
export const kMaxRaisedKeys = 2_000_000

/** The raised keys of a diff, with a lookup by key. */
export class RaisedKeys {
  /** Keys kept. */
  size = 0
  /** Keys raised beyond the bound, not kept. */
  dropped = 0
  #h1: Uint32Array
  #h2: Uint32Array
  /** Per key: index of its cause in #causes. */
  #cause: Uint32Array
  readonly #causes: RaiseCause[] = []
  readonly #causeIds = new Map<string, number>()
  /** Open addressing over key indexes + 1. */
  #slots: Uint32Array
  readonly #limit: number

  constructor (limit = kMaxRaisedKeys) {
    this.#limit = limit
    this.#h1 = new Uint32Array(1024)
    this.#h2 = new Uint32Array(1024)
    this.#cause = new Uint32Array(1024)
    this.#slots = new Uint32Array(2048)
  }

  /** Adds a key with its cause (a key added twice keeps its first cause). */
  add (h1: number, h2: number, cause: RaiseCause): void {
    if (this.find(h1, h2) >= 0) return
    if (this.size >= this.#limit) {
      this.dropped++
      return
    }
    if (this.size === this.#h1.length) {
      this.#h1 = grow(this.#h1)
      this.#h2 = grow(this.#h2)
      this.#cause = grow(this.#cause)
    }
    const tag = `${cause.kind}|${cause.source}|${cause.category}|${cause.confidence}`
    let c = this.#causeIds.get(tag)
    if (c === undefined) {
      c = this.#causes.length
      this.#causes.push(cause)
      this.#causeIds.set(tag, c)
    }
    const i = this.size++
    this.#h1[i] = h1
    this.#h2[i] = h2
    this.#cause[i] = c
    if (this.size * 2 > this.#slots.length) this.#rehash()
    else this.#place(i)
  }

  /** Index of a key, or -1. */
  find (h1: number, h2: number): number {
    const slots = this.#slots
    const mask = slots.length - 1
    for (let s = (h1 ^ Math.imul(h2, 0x9e3779b1)) & mask; ; s = (s + 1) & mask) {
      const v = slots[s] as number
      if (v === 0) return -1
      if (this.#h1[v - 1] === h1 && this.#h2[v - 1] === h2) return v - 1
    }
  }

  /** The cause of key `i`. */
  cause (i: number): RaiseCause {
    return this.#causes[this.#cause[i] as number] as RaiseCause
  }

  #place (i: number): void {
    const slots = this.#slots
    const mask = slots.length - 1
    let s = ((this.#h1[i] as number) ^ Math.imul(this.#h2[i] as number, 0x9e3779b1)) & mask
    while (slots[s] !== 0) s = (s + 1) & mask
    slots[s] = i + 1
  }

  #rehash (): void {
    this.#slots = new Uint32Array(this.#slots.length * 2)
    for (let i = 0; i < this.size; i++) this.#place(i)
  }
}

function grow (a: Uint32Array): Uint32Array {
  const b = new Uint32Array(a.length * 2)
  b.set(a)
  return b
}

/** The listings of a key in a snapshot (empty when it lists none); entries are checked, never trusted blindly. */
function listingsOf (snap: Snapshot, head: number, out: Listing[]): Listing[] {
  out.length = 0
  const n = snap.entryCount
  for (let e = head, guard = 0; e !== 0 && e <= n && guard < 4096; e = snap.entryNext(e), guard++) {
    const src = snap.sources[snap.entrySource(e)] as SourceMeta | undefined
    if (src === undefined) break
    out.push({ name: src.name, direction: src.direction, category: src.category, confidence: src.confidence })
  }
  return out
}

/** The cause raising a key from `before` to `after`, or null (the strongest of several wins). */
function raiseOf (before: readonly Listing[], after: readonly Listing[]): RaiseCause | null {
  let best: RaiseCause | null = null
  for (const a of after) {
    if (a.direction !== 'malicious') continue
    const was = before.find((b) => b.name === a.name && b.direction === 'malicious')
    let kind: RaiseKind | null = null
    if (was === undefined) kind = 'listed'
    else if (a.confidence > was.confidence || a.category !== was.category) kind = 'stronger'
    if (kind !== null && (best === null || a.confidence > best.confidence)) best = { kind, source: a.name, category: a.category, confidence: a.confidence }
  }
  if (best !== null) return best
  for (const b of before) {
    if (b.direction !== 'safe') continue
    if (!after.some((a) => a.name === b.name && a.direction === 'safe')) return { kind: 'unlisted_safe', source: b.name, category: b.category, confidence: b.confidence }
  }
  return null
}

/**
 * The keys `next` raises over `prev` (null: every malicious listing of `next`). Walks each table once: about a
 * second per few million keys.
 */
export function raisedKeys (prev: Snapshot | null, next: Snapshot, limit = kMaxRaisedKeys): RaisedKeys {
  const out = new RaisedKeys(limit)
  const before: Listing[] = []
  const after: Listing[] = []
  const pair = { h1: 0, h2: 0 }
  next.forEachKey((h1, h2, head) => {
    if (!next.isListingKey(h1, h2)) return
    listingsOf(next, head, after)
    pair.h1 = h1
    pair.h2 = h2
    const old = prev === null ? 0 : prev.find(pair)
    if (old === 0) before.length = 0
    else listingsOf(prev as Snapshot, old, before)
    const cause = raiseOf(before, after)
    if (cause !== null) out.add(h1, h2, cause)
  })
  if (prev === null) return out
  // Keys the old snapshot listed as safe and the new one no longer lists at all.
  prev.forEachKey((h1, h2, head) => {
    if (!prev.isListingKey(h1, h2)) return
    pair.h1 = h1
    pair.h2 = h2
    if (next.find(pair) !== 0) return // compared above
    const cause = raiseOf(listingsOf(prev, head, before), [])
    if (cause !== null) out.add(h1, h2, cause)
  })
  return out
}

/** Every raise kind, for docs and metrics labels. */
export const RAISE_KINDS = kKinds
