/**
 * The scoring pool: N single-thread Piscina pools, one per cache shard, so the same indicator always reaches
 * the same worker and N shards form one cache of N x capacity. Inline mode (size 0) runs the same chunk
 * scorer on the calling thread; it is the tests' and the benchmark's baseline. Single calls are scored on the
 * calling thread in both modes (runSingle says why).
 */
import { Piscina } from 'piscina'
import { fnv1aFolded } from '../bytes/fnv.ts'
import { PoolClosedError } from '../errors.ts'
import { normalize, Snapshot, type SnapshotData } from '../engine/index.ts'
import type { IndicatorType, NormalizedIndicator } from '../engine/types.ts'
import { ByteSink, SpareBuffers } from '../bytes/byte-sink.ts'
import { HistoryItems } from '../history/codec.ts'
import { itemTail } from '../history/record.ts'
import { kWorkerExecArgv, kWorkerShim, workerEntry } from '../worker-entry.ts'
import {
  createShardCache, scoreBulkChunk, scoreSingle, threadPackr,
  type BulkChunkOutput, type ChunkItem, type ChunkParams, type ScoringContext
} from './score-chunk.ts'
import { writePackedString } from './bulk-item.ts'
import { membersAfterIndicator, SingleAnswers, verdictJsonOf, type KeptVerdict } from './single-answers.ts'

/** Tasks queued per shard before the pool refuses more (the in-flight bound usually triggers first). */
const kMaxQueuePerShard = 1024
/** Merged body buffers kept per shard for its next chunks (recycle()). */
const kSparesPerShard = 2

/** Single verdicts kept on the main thread (single-answers.ts), at most. */
const kKeptSingles = 10_000
/** Verdicts the main thread's own cache shard holds at most, with a pool (single calls; 768 bytes of ring each). */
const kMainCacheSize = 20_000

/** A single verdict as the pool answers it. */
export interface SingleOutput {
  /** The verdict object; null for an invalid indicator, or when `json` has it. */
  verdict: Record<string, unknown> | null
  /** The verdict's JSON text, when the call asked for JSON and the verdict is kept (or now was); else null. */
  json: string | null
  /** The indicator's type, null for an invalid one. */
  type: IndicatorType | null
  /** risk.category, null for an invalid indicator. */
  category: string | null
  errors: string[]
  warnings: string[]
  cacheHit: boolean
  history: Uint8Array
}

/** Pool options. */
export interface ScoringPoolOptions {
  size: number
  cacheSize: number
  /** Worker module (a file URL); tests swap in fixtures that crash. */
  entry?: string
  /** History part buffers the history writer has stored and handed back: each bulk chunk takes one to write into. */
  historySpares?: SpareBuffers
}

/** Case-insensitive FNV-1a of the value as sent: cheap, allocation-free shard choice. */
export function shardOf (value: unknown, shards: number): number {
  if (shards <= 1) return 0
  if (typeof value !== 'string') return 0
  return fnv1aFolded(value) % shards
}

/** Scores chunks on worker threads or inline. */
export class ScoringPool {
  readonly snapshot: Snapshot
  readonly size: number
  private readonly pools: Piscina[]
  private readonly inline: ScoringContext | null
  /**
   * Where single calls are scored: on this thread, with its own cache shard (inline mode: the inline context). A
   * single call's hop to a scoring thread (a message each way, a structured clone of the verdict, a thread woken up)
   * cost this thread more than scoring the indicator here does, and the answer waited behind any bulk chunk queued on
   * that thread.
   */
  private readonly single: ScoringContext
  /** Per shard: body buffers already merged, handed to its next chunks to write into (see recycle()). */
  private readonly spares: SpareBuffers[]
  private readonly historySpares: SpareBuffers | null
  /** Single verdicts answered again without a scoring thread; null when verdicts are not cached (cacheSize 0). */
  private readonly kept: SingleAnswers | null
  private closed = false

  constructor (data: SnapshotData, options: ScoringPoolOptions) {
    this.snapshot = new Snapshot(data)
    this.size = options.size
    this.inline = options.size === 0 ? { snapshot: this.snapshot, cache: createShardCache(options.cacheSize) } : null
    this.single = this.inline ?? { snapshot: this.snapshot, cache: createShardCache(Math.min(options.cacheSize, kMainCacheSize)) }
    this.pools = []
    this.spares = Array.from({ length: this.shards }, () => new SpareBuffers(kSparesPerShard))
    this.historySpares = options.historySpares ?? null
    this.kept = options.cacheSize > 0 ? new SingleAnswers(Math.min(kKeptSingles, options.cacheSize)) : null
    for (let i = 0; i < options.size; i++) {
      this.pools.push(new Piscina({
        filename: kWorkerShim,
        execArgv: [...kWorkerExecArgv],
        minThreads: 1,
        maxThreads: 1,
        maxQueue: kMaxQueuePerShard,
        idleTimeout: Number.MAX_SAFE_INTEGER,
        // The SharedArrayBuffer inside is shared with the worker, not copied.
        workerData: { entry: options.entry ?? workerEntry('scoring'), snapshot: data, cacheSize: options.cacheSize }
      }))
    }
  }

  /** Number of shards (1 inline). */
  get shards (): number {
    return Math.max(1, this.size)
  }

  /** Resolves once every worker has started (so a benchmark does not time thread start-up). */
  async ready (): Promise<void> {
    await Promise.all(this.pools.map(async (p) => { await p.run(null, { name: 'ready' }) }))
  }

  /** Scores one bulk chunk on the shard's worker. */
  async runBulk (shard: number, items: ChunkItem[], params: ChunkParams): Promise<BulkChunkOutput> {
    if (this.closed) throw new PoolClosedError()
    const spare = this.spares[shard]?.pop()
    const historySpare = this.historySpares?.pop()
    if (this.inline !== null) return scoreBulkChunk(items, params, this.inline, spare, historySpare)
    const encoded = encodeItems(items)
    const transferList: ArrayBuffer[] = encoded instanceof Uint8Array ? [encoded.buffer] : []
    if (spare !== undefined) transferList.push(spare)
    if (historySpare !== undefined) transferList.push(historySpare)
    return await (this.pools[shard] as Piscina).run({ items: encoded, params, spare, historySpare }, { transferList }) as BulkChunkOutput
  }

  /**
   * Takes back the buffer of a shard's chunk body once the caller has copied what it needs out of it: the shard's
   * next chunk writes its body into it instead of a new buffer (why: SpareBuffers; about 6 MB per 10,000-item bulk).
   * The caller must not read `body` after this.
   */
  recycle (shard: number, body: Uint8Array): void {
    if (this.closed || body.byteLength === 0) return
    this.spares[shard]?.give(body.buffer)
  }

  /**
   * Answers the single endpoint's indicator on this thread: a JSON call of a verdict kept here from it
   * (single-answers.ts), anything else scored here (`single`), whose JSON answer is then kept.
   */
  async runSingle (item: ChunkItem, params: ChunkParams): Promise<SingleOutput> {
    if (this.closed) throw new PoolClosedError()
    let key: string | null = null
    let ind: NormalizedIndicator | null = null
    // Only JSON calls: the kept text is the answer's bytes; a MessagePack answer is packed from the verdict object.
    if (this.kept !== null && params.format === 'json' && params.allow === undefined && typeof item[1] === 'string') {
      const n = normalize(item[1], item[0])
      if (n.ok) {
        ind = n.indicator
        key = SingleAnswers.key(params.scoringVersion, ind.type, ind.normalized, params.signalDetails, params.evidenceDetails)
        const hit = this.kept.get(key)
        if (hit !== undefined) return keptOutput(hit, ind, item)
      }
    }
    const out = scoreSingle(item, params, this.single)
    const type = (out.verdict?.indicator as { type?: IndicatorType } | undefined)?.type ?? null
    const category = (out.verdict?.risk as { category?: unknown } | undefined)?.category
    const answer: SingleOutput = {
      verdict: out.verdict,
      json: null,
      type,
      category: typeof category === 'string' ? category : null,
      errors: out.errors,
      warnings: out.warnings,
      cacheHit: out.cacheHit,
      history: out.history
    }
    if (params.format === 'json' && out.verdict !== null) {
      answer.json = JSON.stringify(out.verdict)
      answer.verdict = null
      if (key !== null && ind !== null && out.members !== null && answer.category !== null) {
        const members = membersAfterIndicator(answer.json, JSON.stringify(out.verdict.indicator))
        if (members !== null) this.kept?.set(key, { members, history: out.members, category: answer.category })
      }
    }
    return answer
  }

  /** Tasks queued or running across shards. */
  get pending (): number {
    let n = 0
    for (const p of this.pools) n += p.queueSize + (p.utilization > 0 ? 1 : 0)
    return n
  }

  /** Mean share of time the scoring threads spent running tasks since they started (0-1; 0 inline). */
  get utilization (): number {
    if (this.pools.length === 0) return 0
    let u = 0
    for (const p of this.pools) u += p.utilization
    return u / this.pools.length
  }

  /** Waits for queued tasks to finish, then stops the workers. */
  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.spares.length = 0
    await Promise.all(this.pools.map(async (p) => await p.close()))
  }

  /** Stops the workers now, failing queued tasks. */
  async destroy (): Promise<void> {
    this.closed = true
    this.spares.length = 0
    await Promise.all(this.pools.map(async (p) => await p.destroy()))
  }
}

/** The answer to a single call from a kept verdict: what is per call (value as sent, warnings, history) made now. */
function keptOutput (kept: KeptVerdict, ind: NormalizedIndicator, item: ChunkItem): SingleOutput {
  const value = item[1] as string
  const history = new HistoryItems()
  history.addVerdict(ind.type, value, ind.normalized, itemTail(kept.history, item[2], item[3]))
  const indicatorJson = JSON.stringify({ type: ind.type, value, normalized: ind.normalized })
  return {
    verdict: null,
    json: verdictJsonOf(indicatorJson, kept.members),
    type: ind.type,
    category: kept.category,
    errors: [],
    warnings: ind.warnings,
    cacheHit: true,
    history: history.encode()
  }
}

/** Whether a string holds a lone UTF-16 surrogate (String.prototype.isWellFormed, Node 20). */
function illFormed (s: unknown): boolean {
  return typeof s === 'string' && !(s as unknown as { isWellFormed: () => boolean }).isWellFormed()
}

/**
 * Items as a scoring thread receives them: msgpack (compact, transferred), except a chunk holding a string with a lone
 * surrogate, which goes as it is (structured clone): msgpack writes a lone surrogate as three bytes that decode to three
 * U+FFFD, and the answer must echo the value as sent (JSON escapes it as \udXXX).
 */
export function encodeItems (items: readonly ChunkItem[]): Uint8Array<ArrayBuffer> | ChunkItem[] {
  const fast = packItems(items)
  if (fast !== null) return fast
  for (const it of items) {
    if (illFormed(it[0]) || illFormed(it[1]) || illFormed(it[2]) || illFormed(it[3])) return items as ChunkItem[]
  }
  return copy(threadPackr.pack(items))
}

/** The main thread's scratch sink for packing chunks (one at a time: packing is synchronous). */
const kPackSink = new ByteSink(256 * 1024)
const kPackKeepBytes = 4 << 20
const kNotFast = 1
const kIllFormed = 2

/**
 * threadPackr.pack(items), written directly for the items a bulk carries (a string or no type, a string value, log-only
 * fields that are strings or null): the same bytes in one pass, without msgpackr's generic walk, and checking
 * well-formedness only of strings outside ASCII. Null for any other chunk (packed the general way).
 */
function packItems (items: readonly ChunkItem[]): Uint8Array<ArrayBuffer> | null {
  const sink = kPackSink
  sink.clear()
  const n = items.length
  sink.reserve(5)
  const b = sink.buf
  if (n < 16) {
    b[0] = 0x90 | n
    sink.len = 1
  } else if (n < 0x10000) {
    b[0] = 0xdc
    b.writeUInt16BE(n, 1)
    sink.len = 3
  } else {
    b[0] = 0xdd
    b.writeUInt32BE(n, 1)
    sink.len = 5
  }
  let state = 0
  for (let i = 0; i < n && state === 0; i++) {
    const [type, value, taken, source] = items[i] as ChunkItem
    sink.byte(0x94)
    if (type === undefined) {
      sink.reserve(3)
      sink.buf[sink.len++] = 0xd4 // msgpackr's undefined: fixext 1, type 0, data 0
      sink.buf[sink.len++] = 0
      sink.buf[sink.len++] = 0
    } else if (type === null) {
      sink.byte(0xc0)
    } else if (typeof type === 'string') {
      state = packString(sink, type)
    } else {
      state = kNotFast
    }
    if (state === 0) state = typeof value === 'string' ? packString(sink, value) : kNotFast
    if (state === 0) state = packNullable(sink, taken)
    if (state === 0) state = packNullable(sink, source)
  }
  const out = state === 0 ? sink.take() : null
  sink.shrink(kPackKeepBytes)
  return out
}

function packNullable (sink: ByteSink, s: string | null): number {
  if (s !== null) return packString(sink, s)
  sink.byte(0xc0)
  return 0
}

/** Packs a string as threadPackr does (bulk-item.ts writePackedString); a lone surrogate makes the chunk go unpacked. */
function packString (sink: ByteSink, s: string): number {
  if (illFormed(s)) return kIllFormed
  writePackedString(sink, s, threadPackr)
  return 0
}

/** msgpackr's pack() returns a view into its scratch buffer: copy into an owned buffer before transferring. */
function copy (b: Uint8Array): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(b.length)
  out.set(b)
  return out
}
