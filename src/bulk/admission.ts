/**
 * Admission: a request is scored only if the service has room for its indicators (bounded in-flight count,
 * history not over its journal limit) and the key's daily quota fits the whole request. Either refusal counts nothing.
 */
import { OverloadedError, QuotaExceededError } from '../errors.ts'
import { utcDayOf, type ApiKeyRecord, type QuotaCounter } from '../store/index.ts'

/** What admit() hands back: call release() if the request then fails as a whole. */
export interface Ticket {
  n: number
  /** Indicators the key may still send today after this request, or null for a key without a quota. */
  quotaRemaining: number | null
  /** Ends the in-flight reservation (always, when the response is ready). */
  done: () => void
  /** Gives back the quota reservation (only when nothing was answered or recorded). */
  refund: () => Promise<void>
}

/** Shared admission state of one service instance. */
export class Admission {
  private inflight = 0
  private readonly max: number
  private readonly quota: QuotaCounter
  private readonly accepting: () => string | null

  /** `accepting` returns null when history can take more, or the reason it cannot. */
  constructor (max: number, quota: QuotaCounter, accepting: () => string | null) {
    this.max = max
    this.quota = quota
    this.accepting = accepting
  }

  /** Indicators being scored right now. */
  get inFlight (): number {
    return this.inflight
  }

  /** Admits n indicators for a key, or throws OVERLOADED / QUOTA_EXCEEDED. */
  async admit (key: ApiKeyRecord, n: number): Promise<Ticket> {
    const refusal = this.accepting()
    if (refusal !== null) throw new OverloadedError(refusal)
    // A request larger than the whole bound is still admitted when nothing else is in flight, or it could never run.
    if (this.inflight > 0 && this.inflight + n > this.max) throw new OverloadedError('too many indicators in flight; retry shortly')
    this.inflight += n
    let released = false
    const done = (): void => {
      if (!released) {
        released = true
        this.inflight -= n
      }
    }
    const day = utcDayOf(Date.now())
    let quotaRemaining: number | null = null
    if (key.quota !== null && n > 0) {
      let res
      try {
        res = await this.quota.reserve(key.id, day, n, key.quota)
      } catch (err) {
        done()
        throw new OverloadedError('quota counter unavailable', { cause: err })
      }
      if (!res.ok) {
        done()
        const err = new QuotaExceededError(`daily quota of ${key.quota} indicators exceeded (${res.used} used, ${n} requested)`)
        Object.assign(err, { retryAfter: res.retryAfterSeconds })
        throw err
      }
      quotaRemaining = Math.max(0, key.quota - res.used)
    } else if (key.quota !== null) {
      // An empty request reserves nothing, but its answer still carries the quota headers (docs/API.md). A counter
      // that cannot answer leaves them out: such a request counts nothing, so it is not refused for that.
      try {
        quotaRemaining = Math.max(0, key.quota - await this.quota.used(key.id, day))
      } catch {
        quotaRemaining = null
      }
    }
    return {
      n,
      quotaRemaining,
      done,
      refund: async () => {
        if (key.quota !== null && n > 0) await this.quota.release(key.id, day, n)
      }
    }
  }
}
