/**
 * A bounded queue for password hashes (scrypt). Node runs crypto.scrypt on libuv's thread pool (4 threads unless
 * UV_THREADPOOL_SIZE says otherwise), which the history journal's writev and fdatasync also use: a flood of sign-ins
 * that filled the pool with hashes made every verdict wait behind them for its journal write, past its commit timeout.
 * At most `concurrency` hashes run at once, so the rest of the pool is always free for the journal; at most
 * `maxWaiting` wait for a turn, and an attempt beyond that is turned away at once (the sign-in route answers 429).
 *
 * Sign-ins wait under keys (the client's address and the username): when the queue is full, a newcomer takes the
 * place of the newest waiting attempt of the key that holds the most places, if that key is not one of its own and
 * holds two or more. So one client that keeps the queue full (a valid user signing in from many threads, or from many
 * addresses: a success gives its attempt back to the failure limits) turns its own attempts away, not everyone
 * else's.
 * docs/OPERATIONS.md "Dashboard sign-in limits" explains the choice.
 */

/** A waiting attempt turned away by a newcomer of another key (tryRun's promise rejects with it). */
export class HashQueueDisplaced extends Error {
  constructor () {
    super('turned away: the hash queue is full')
  }
}

interface Waiter { keys: readonly string[], go: () => void, drop: () => void }

/** Runs async work `concurrency` at a time, with a bounded number waiting. */
export class HashQueue {
  readonly #concurrency: number
  readonly #maxWaiting: number
  #running = 0
  readonly #waiting: Waiter[] = []

  constructor (concurrency: number, maxWaiting: number) {
    this.#concurrency = concurrency
    this.#maxWaiting = maxWaiting
  }

  /** True when a tryRun() now would be turned away (or would have to displace another key's attempt). */
  get full (): boolean {
    return this.#running >= this.#concurrency && this.#waiting.length >= this.#maxWaiting
  }

  /** True when a tryRun() under `keys` now would be turned away: the queue is full and no other key can give a place up. */
  refuses (keys: readonly string[]): boolean {
    return this.full && this.#displaceable(keys) === -1
  }

  /** Runs `fn` in its turn, however many wait (operators' commands: creating a user). */
  async run<T> (fn: () => Promise<T>, keys: readonly string[] = []): Promise<T> {
    if (this.#running >= this.#concurrency) {
      await new Promise<void>((resolve, reject) => { this.#waiting.push({ keys, go: resolve, drop: () => { reject(new HashQueueDisplaced()) } }) })
    } else {
      this.#running++
    }
    try {
      return await fn()
    } finally {
      // The turn passes straight to the next waiter, so #running counts it without a gap.
      const next = this.#waiting.shift()
      if (next !== undefined) next.go()
      else this.#running--
    }
  }

  /**
   * Runs `fn` in its turn, or returns null at once when the queue is full and no other key holds two or more places
   * to give one up; the promise rejects with HashQueueDisplaced if a newcomer of another key takes this one's place.
   */
  tryRun<T> (fn: () => Promise<T>, keys: readonly string[] = []): Promise<T> | null {
    if (this.full) {
      // What refuses(keys) checks, with the place found.
      const victim = this.#displaceable(keys)
      if (victim === -1) return null
      const [dropped] = this.#waiting.splice(victim, 1)
      dropped?.drop()
    }
    return this.run(fn, keys)
  }

  /**
   * Index of the newest waiter under the key holding the most places, if that key holds two or more and is none of
   * `keys`; else -1.
   */
  #displaceable (keys: readonly string[]): number {
    const counts = new Map<string, number>()
    let top = ''
    let most = 0
    for (const w of this.#waiting) {
      for (const k of w.keys) {
        if (keys.includes(k)) continue
        const n = (counts.get(k) ?? 0) + 1
        counts.set(k, n)
        if (n > most) {
          most = n
          top = k
        }
      }
    }
    if (most < 2) return -1
    for (let i = this.#waiting.length - 1; i >= 0; i--) if (this.#waiting[i]?.keys.includes(top) === true) return i
    return -1
  }
}
