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

/** What take() decided: the attempt is counted, or refused until `retryAfterSeconds` from now. */
export type Taken = { ok: true, release: (succeeded: boolean) => Promise<void> } | { ok: false, retryAfterSeconds: number }

/** Failed sign-in counts over one store's SQL port. */
export class SignInLimits {
  readonly #db: SqlPort
  #purgedAt = 0

  constructor (db: SqlPort) {
    this.#db = db
  }

  /**
   * Counts an attempt as a failure in every slot, before the password is checked, or refuses it (counting nothing)
   * when a slot is at its limit. `release(true)` after a successful sign-in gives the attempt back (and clears the
   * pair's failures); `release(false)` gives it back when the password was not checked after all.
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
        return { ok: false, retryAfterSeconds: await this.#retryAfter(slot, p, now) }
      }
      taken.push({ slot, kind })
    }
    return {
      ok: true,
      release: async (succeeded) => {
        for (const t of taken) {
          if (succeeded && t.kind === 'pair') await this.#db.run('DELETE FROM {sign_in_failures} WHERE slot = ?', [t.slot])
          else await this.#giveBack(t.slot)
        }
      }
    }
  }

  /** Undoes one counted attempt: the count and the time of the failure before it. */
  async #giveBack (slot: string): Promise<void> {
    if (await this.#db.run('DELETE FROM {sign_in_failures} WHERE slot = ? AND failures <= 1', [slot]) > 0) return
    await this.#db.run('UPDATE {sign_in_failures} SET failures = failures - 1, last_at = prev_at WHERE slot = ?', [slot])
  }

  /** Seconds until a refusing slot allows an attempt again (at least 1). */
  async #retryAfter (slot: string, p: Policy, now: number): Promise<number> {
    const row = (await this.#db.all<{ failures: number | string, last_at: number | string }>('SELECT failures, last_at FROM {sign_in_failures} WHERE slot = ?', [slot]))[0]
    if (row === undefined) return 1
    const at = Number(row.last_at)
    const until = Math.min(at + backoffMs(p, Number(row.failures)), at + p.resetMs)
    return Math.max(1, Math.ceil((until - now) / 1000))
  }

  async #purge (now: number): Promise<void> {
    if (now - this.#purgedAt < kPurgeEveryMs) return
    this.#purgedAt = now
    await this.#db.run('DELETE FROM {sign_in_failures} WHERE last_at < CAST(? AS BIGINT)', [now - kLongestResetMs])
  }
}
