/**
 * Failed dashboard sign-ins, counted in the store so that every instance sharing it sees the same counts
 * (docs/OPERATIONS.md "Dashboard sign-in limits"). Each attempt is counted as a failure before its password is checked,
 * by one atomic conditional upsert per slot, so parallel guesses cannot all pass a count read before any of them was
 * written; a success gives its count back.
 *
 * Three slots per attempt, each with its own policy (kPolicies):
 *   address   every username from one address (IPv6: its /64): stops a spray of usernames from one place
 *   pair      one username from one address: a few free tries, then a wait that doubles with each failure
 *   username  one username from anywhere: a ceiling on distributed guessing, with a longer window
 * A slot allows an attempt while its failures are under the policy's free count, or once the backoff since its last
 * failure has passed; failures are forgotten after `resetMs` without one. An attacker's own address and pairs slow
 * him without touching the user's: only the username ceiling is shared, and one address alone cannot reach it.
 *
 * Rows are keyed by a digest of the slot, never evicted by volume (an attacker cannot flush anyone's count by
 * filling a table), and purged once their window has passed.
 */
import { createHash } from 'node:crypto'
import ipaddr from 'ipaddr.js'
import type { SqlPort } from './sql-port.ts'

/** How one kind of slot limits failures. */
interface Policy {
  /** Failures allowed before any wait. */
  free: number
  /** Wait after the first failure past `free`, doubled with each further one, up to capMs. */
  baseMs: number
  capMs: number
  /** Failures are forgotten this long after the last one. */
  resetMs: number
}

const kMinute = 60_000
const kHour = 60 * kMinute

/** The policies, by slot kind. */
export const kPolicies = {
  address: { free: 30, baseMs: kMinute, capMs: kHour, resetMs: kHour },
  pair: { free: 5, baseMs: kMinute, capMs: kHour, resetMs: 24 * kHour },
  username: { free: 100, baseMs: kHour, capMs: 24 * kHour, resetMs: 24 * kHour }
} as const satisfies Record<string, Policy>

type Kind = keyof typeof kPolicies
const kKinds: readonly Kind[] = ['address', 'pair', 'username']
/** Rows older than the longest window are purged, at most once per kPurgeEveryMs per process. */
const kLongestResetMs = Math.max(...kKinds.map((k) => kPolicies[k].resetMs))
const kPurgeEveryMs = kMinute

/** Doublings of baseMs before the wait reaches capMs. */
function steps (p: Policy): number {
  return Math.ceil(Math.log2(p.capMs / p.baseMs))
}

/** The wait after `failures` failures. */
export function backoffMs (p: Policy, failures: number): number {
  if (failures < p.free) return 0
  return failures - p.free >= steps(p) ? p.capMs : p.baseMs * 2 ** (failures - p.free)
}

/**
 * Counts the attempt when the slot allows it, in one statement: a row comes back only then. Parameters: slot, now,
 * now - reset, now, now - reset, free, now, free, steps, cap, base, free.
 */
const kTakeSql = 'INSERT INTO {sign_in_failures} AS f (slot, failures, last_at, prev_at) VALUES (?, 1, CAST(? AS BIGINT), 0) ' +
  'ON CONFLICT (slot) DO UPDATE SET failures = CASE WHEN f.last_at <= CAST(? AS BIGINT) THEN 1 ELSE f.failures + 1 END, ' +
  'prev_at = f.last_at, last_at = CAST(? AS BIGINT) ' +
  'WHERE f.last_at <= CAST(? AS BIGINT) OR f.failures < ? OR f.last_at <= CAST(? AS BIGINT) - ' +
  '(CASE WHEN f.failures - ? >= ? THEN ? ELSE ? * (1 << (f.failures - ?)) END) RETURNING failures'

/** The schema both stores create. */
export function signInFailuresSchema (table: string, index = 'sign_in_failures_last'): string {
  return `
  CREATE TABLE ${table} (
    slot TEXT PRIMARY KEY,                   -- sha256 of the slot's kind, username and address
    failures INTEGER NOT NULL,
    last_at BIGINT NOT NULL,                 -- epoch ms of the newest failure counted
    prev_at BIGINT NOT NULL                  -- last_at before it, restored when that attempt is given back
  );
  CREATE INDEX ${index} ON ${table} (last_at);
  `
}

/** The address a slot counts: an IPv6 address by its /64 (one host holds a whole /64), anything else as it is. */
export function addressSlot (address: string): string {
  try {
    const a = ipaddr.process(address)
    if (a.kind() === 'ipv6') return `${ipaddr.IPv6.networkAddressFromCIDR(`${a.toString()}/64`).toString()}/64`
    return a.toString()
  } catch {
    return address
  }
}

function digest (kind: Kind, username: string, address: string): string {
  const parts = kind === 'address' ? [kind, address] : kind === 'pair' ? [kind, username, address] : [kind, username]
  return createHash('sha256').update(parts.join('\u0000')).digest('base64url')
}

/**
 * What take() decided: the attempt is counted, or refused until `retryAfterSeconds` from now. `busy` when the slot
 * refused it only for attempts of this process still being checked (counted as failures until they end): the
 * attempt may be tried again in a moment, and nothing says it failed.
 */
export type Taken = {
  ok: true
  /** The check ended: `true` a success (the attempt given back, the pair cleared), `false` not checked after all. */
  release: (succeeded: boolean) => Promise<void>
  /** The check ended with a wrong password: the attempt stays counted. Every taken attempt ends in one of the two. */
  failed: () => void
} | { ok: false, retryAfterSeconds: number, busy: boolean }

/** Failed sign-in counts over one store's SQL port. */
export class SignInLimits {
  readonly #db: SqlPort
  #purgedAt = 0
  /** Attempts of this process counted and not yet released, per slot (entries removed at zero). */
  readonly #pending = new Map<string, number>()

  constructor (db: SqlPort) {
    this.#db = db
  }

  /**
   * Counts an attempt as a failure in every slot, before the password is checked, or refuses it (counting nothing)
   * when a slot is at its limit. `release(true)` after a successful sign-in gives the attempt back (and clears the
   * pair's failures); `release(false)` gives it back when the password was not checked after all; `failed()` ends it
   * as the failure it was counted as. Until then it is pending: a slot refusing only for pending attempts answers
   * `busy` (retry in a second), since they may yet succeed, rather than a wait for failures that may not happen.
   */
  async take (username: string, address: string, now = Date.now()): Promise<Taken> {
    await this.#purge(now)
    const where = addressSlot(address)
    const taken: Array<{ slot: string, kind: Kind }> = []
    for (const kind of kKinds) {
      const p = kPolicies[kind]
      const slot = digest(kind, username, where)
      const rows = await this.#db.all<{ failures: number }>(kTakeSql,
        [slot, now, now - p.resetMs, now, now - p.resetMs, p.free, now, p.free, steps(p), p.capMs, p.baseMs, p.free])
      if (rows.length === 0) {
        for (const t of taken) await this.#giveBack(t.slot)
        this.#settle(taken)
        const { seconds, failures } = await this.#retryAfter(slot, p, now)
        // Past the free count only with attempts still being checked here: those may yet succeed and give theirs back.
        const busy = failures - (this.#pending.get(slot) ?? 0) < p.free
        return { ok: false, retryAfterSeconds: busy ? 1 : seconds, busy }
      }
      taken.push({ slot, kind })
      this.#pending.set(slot, (this.#pending.get(slot) ?? 0) + 1)
    }
    let released = false
    return {
      ok: true,
      failed: () => {
        if (released) return
        released = true
        this.#settle(taken)
      },
      release: async (succeeded) => {
        if (released) return
        released = true
        try {
          for (const t of taken) {
            if (succeeded && t.kind === 'pair') await this.#db.run('DELETE FROM {sign_in_failures} WHERE slot = ?', [t.slot])
            else await this.#giveBack(t.slot)
          }
        } finally {
          this.#settle(taken)
        }
      }
    }
  }

  /** Ends the pending count of an attempt's slots (released, or refused part way). */
  #settle (taken: ReadonlyArray<{ slot: string }>): void {
    for (const t of taken) {
      const n = (this.#pending.get(t.slot) ?? 0) - 1
      if (n > 0) this.#pending.set(t.slot, n)
      else this.#pending.delete(t.slot)
    }
  }

  /** Undoes one counted attempt: the count and the time of the failure before it. */
  async #giveBack (slot: string): Promise<void> {
    if (await this.#db.run('DELETE FROM {sign_in_failures} WHERE slot = ? AND failures <= 1', [slot]) > 0) return
    await this.#db.run('UPDATE {sign_in_failures} SET failures = failures - 1, last_at = prev_at WHERE slot = ?', [slot])
  }

  /** Seconds until a refusing slot allows an attempt again (at least 1), and the failures it counts. */
  async #retryAfter (slot: string, p: Policy, now: number): Promise<{ seconds: number, failures: number }> {
    const row = (await this.#db.all<{ failures: number | string, last_at: number | string }>('SELECT failures, last_at FROM {sign_in_failures} WHERE slot = ?', [slot]))[0]
    if (row === undefined) return { seconds: 1, failures: 0 }
    const at = Number(row.last_at)
    const failures = Number(row.failures)
    const until = Math.min(at + backoffMs(p, failures), at + p.resetMs)
    return { seconds: Math.max(1, Math.ceil((until - now) / 1000)), failures }
  }

  async #purge (now: number): Promise<void> {
    if (now - this.#purgedAt < kPurgeEveryMs) return
    this.#purgedAt = now
    await this.#db.run('DELETE FROM {sign_in_failures} WHERE last_at < CAST(? AS BIGINT)', [now - kLongestResetMs])
  }
}
