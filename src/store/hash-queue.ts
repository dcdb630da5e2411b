/**
 * A bounded queue for password hashes (scrypt). Node runs crypto.scrypt on libuv's thread pool (4 threads unless
 * UV_THREADPOOL_SIZE says otherwise), which the history journal's writev and fdatasync also use: a flood of sign-ins
 * that filled the pool with hashes made every verdict wait behind them for its journal write, past its commit timeout.
 * At most `concurrency` hashes run at once, so the rest of the pool is always free for the journal; at most
 * `maxWaiting` wait for a turn, and an attempt beyond that is turned away at once (the sign-in route answers 429).
 * docs/OPERATIONS.md "Dashboard sign-in limits" explains the choice.
 */

/** Runs async work `concurrency` at a time, with a bounded number waiting. */
export class HashQueue {
  readonly #concurrency: number
  readonly #maxWaiting: number
  #running = 0
  readonly #waiting: Array<() => void> = []

  constructor (concurrency: number, maxWaiting: number) {
    this.#concurrency = concurrency
    this.#maxWaiting = maxWaiting
  }

  /** True when a tryRun() now would be turned away. */
  get full (): boolean {
    return this.#running >= this.#concurrency && this.#waiting.length >= this.#maxWaiting
  }

  /** Runs `fn` in its turn, however many wait (operators' commands: creating a user). */
  async run<T> (fn: () => Promise<T>): Promise<T> {
    if (this.#running >= this.#concurrency) await new Promise<void>((resolve) => { this.#waiting.push(resolve) })
    else this.#running++
    try {
      return await fn()
    } finally {
      // The turn passes straight to the next waiter, so #running counts it without a gap.
      const next = this.#waiting.shift()
      if (next !== undefined) next()
      else this.#running--
    }
  }

  /** Runs `fn` in its turn, or returns null at once when the queue is full. */
  tryRun<T> (fn: () => Promise<T>): Promise<T> | null {
    return this.full ? null : this.run(fn)
  }
}
