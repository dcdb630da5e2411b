/**
 * Single verdicts answered again on the main thread, without a trip to a scoring thread.
 *
 * A single call of an indicator the pool has just scored is answered from here: the verdict's members as JSON text,
 * the history record's verdict members and the risk category, kept per (scoring version, type, normalized form,
 * signal and evidence detail levels). What is per request (the value as sent, its normalization warnings, the log-only
 * fields, meta) is made for each call. A scoring thread's hop costs a single call more than scoring a cached verdict
 * does (two messages, a structured clone of the verdict, a thread woken up), and the main thread serializes the answer
 * anyway. The pool owning this table is the pool of one snapshot, so a reload starts an empty one.
 *
 * Entries hold strings only (no object graphs for the collector to trace). A tenant's allowlist can change a verdict:
 * calls of a tenant with an allowlist never use the table.
 */
import { LRUCache } from 'lru-cache'

/** What is kept of one answer. */
export interface KeptVerdict {
  /** The verdict's members after `indicator`, as JSON members text (`"risk":...,"recommended_actions":[...]`). */
  members: string
  /** The history record's verdict members (record.ts verdictMembers). */
  history: string
  /** risk.category, for metrics. */
  category: string
  /**
   * The history part of the last call answered from this entry without log-only fields, and the value it was sent
   * as: a call sending the same value again records the same bytes (the part holds the value, its normalized form
   * and the tail, nothing of the request), so they are journalled again rather than encoded again. Never changed once
   * made: the journal may still be writing it.
   */
  part: { value: string, bytes: Uint8Array } | null
  /**
   * The indicator's JSON text (`{"type":...,"value":...,"normalized":...}`) once a call has sent the key's normalized
   * form with the key's type and normalizing it gave both back with no warning, else null. Normalizing is a pure
   * function of value and type, so a later call sending them so is answered without normalizing (SingleCalls).
   */
  canonicalJson: string | null
}

/** Answers by key; bounded, least recently used evicted. */
export class SingleAnswers {
  private readonly lru: LRUCache<string, KeptVerdict>

  constructor (max: number) {
    this.lru = new LRUCache<string, KeptVerdict>({ max })
  }

  /** The key of a call: what the verdict and its rendering depend on beyond the snapshot. */
  static key (scoringVersion: string | null, type: string, normalized: string, signalDetails: string, evidenceDetails: string): string {
    return `${scoringVersion ?? ''}|${signalDetails}|${evidenceDetails}|${type}|${normalized}`
  }

  get (key: string): KeptVerdict | undefined {
    return this.lru.get(key)
  }

  set (key: string, answer: KeptVerdict): void {
    this.lru.set(key, answer)
  }

  /** Answers kept. */
  get size (): number {
    return this.lru.size
  }
}

/** `{"indicator":`: how a verdict's JSON text begins (its first member is the indicator). */
const kIndicatorMember = '{"indicator":'

/**
 * The members after `indicator` of a verdict's JSON text, given the JSON text of its indicator; null when the text does
 * not begin with that indicator (then nothing is kept).
 */
export function membersAfterIndicator (verdictJson: string, indicatorJson: string): string | null {
  const head = kIndicatorMember.length + indicatorJson.length
  if (!verdictJson.startsWith(kIndicatorMember) || verdictJson.slice(kIndicatorMember.length, head) !== indicatorJson || verdictJson[head] !== ',') return null
  return verdictJson.slice(head + 1, -1)
}

/** A verdict's JSON text without its closing brace, from its indicator's JSON text and the members after it. */
export function verdictJsonOpen (indicatorJson: string, members: string): string {
  return `${kIndicatorMember}${indicatorJson},${members}`
}
