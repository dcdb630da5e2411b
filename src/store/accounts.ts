/**
 * Dashboard users and their sessions, one implementation over both stores: SQLite and PostgreSQL each hand it their
 * SQL port (sql-port.ts).
 *
 * Passwords: scrypt (memory-hard; N=2^14, r=8, p=1, 16 MiB per hash), a 16-byte random salt, stored as
 * `scrypt$N$r$p$salt$hash` (base64url) so the parameters can be raised later; compared in constant time, and an unknown
 * username costs the same hash as a wrong password. Hashes run one at a time per process, behind a bounded queue
 * (hash-queue.ts), and a sign-in is counted against its limits before its hash runs (sign-in-limits.ts). Sessions: a
 * 32-byte random id handed to the browser once; the store keeps only its SHA-256, so a copy of the database opens no
 * session. Each session has an idle and an absolute expiry and a CSRF token for state-changing calls.
 */
import { createHash, randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto'
import { StoreError } from '../errors.ts'
import { HashQueue, HashQueueDisplaced } from './hash-queue.ts'
import { SignInLimits } from './sign-in-limits.ts'
import { isUniqueViolation, type SqlPort } from './sql-port.ts'

/** Dashboard roles: an analyst looks things up and manages allowlist and feedback; an admin also reloads intel. */
export const ROLES = ['analyst', 'admin'] as const
export type Role = typeof ROLES[number]

/** A dashboard user (never the password hash). */
export interface UserRecord {
  username: string
  tenant: string
  role: Role
  createdAt: string
  disabledAt: string | null
}

/** A live session. */
export interface SessionRecord {
  username: string
  tenant: string
  role: Role
  /** Sent back by the page in X-CSRF-Token on every state-changing call. */
  csrf: string
  createdAt: string
  expiresAt: string
}

/** Options of a new user. */
export interface CreateUserOptions { tenant: string, username: string, role?: Role, password: string }

/** Session lifetimes in ms. */
export interface SessionTimes { idleMs: number, absoluteMs: number }

const kScrypt: ScryptOptions = { N: 16384, r: 8, p: 1, maxmem: 64 * 1024 * 1024 }
const kKeyLength = 32
const kUsernamePattern = /^[a-z0-9][a-z0-9._@-]{1,63}$/
const kMinPassword = 12
const kMaxPassword = 1024
/**
 * last_seen_at is written at most this often per session, and at most a twentieth of the idle window: a request
 * between two writes is not recorded, so a session may end up to that much before its idle window has passed since
 * its last request (at most 60 s of the default 30 minutes; 5% of a short window).
 */
const kTouchMs = 60_000
/** Sessions a user keeps at most (the oldest end when a sign-in passes it). */
export const kMaxSessions = 100

function touchEvery (idleMs: number): number {
  return Math.min(kTouchMs, Math.max(1, Math.floor(idleMs / 20)))
}

/**
 * Password hashes of this process: one at a time, so at least three of libuv's four pool threads are always free for
 * the history journal's writes; at most 16 sign-ins wait for a turn, the next ones are answered 429 at once.
 */
const kHashes = new HashQueue(1, 16)

async function scrypt (password: string, salt: Buffer, opts: ScryptOptions): Promise<Buffer> {
  return await new Promise((resolve, reject) => {
    scryptCb(password.normalize('NFKC'), salt, kKeyLength, opts, (err, key) => { err === null ? resolve(key) : reject(err) })
  })
}

async function hashNow (password: string): Promise<string> {
  const salt = randomBytes(16)
  const key = await scrypt(password, salt, kScrypt)
  return `scrypt$${kScrypt.N as number}$${kScrypt.r as number}$${kScrypt.p as number}$${salt.toString('base64url')}$${key.toString('base64url')}`
}

/** The stored form of a password. */
export async function hashPassword (password: string): Promise<string> {
  return await kHashes.run(async () => await hashNow(password))
}

// Verified against when the username is unknown, so an unknown name costs what a wrong password does.
let kDummyHash: Promise<string> | null = null

async function matchesNow (stored: string | null, password: string): Promise<boolean> {
  const target = stored ?? await (kDummyHash ??= hashNow(randomBytes(18).toString('base64url')))
  const [kind, n, r, p, salt, key] = target.split('$')
  if (kind !== 'scrypt' || salt === undefined || key === undefined) return false
  const expected = Buffer.from(key, 'base64url')
  const got = await scrypt(password, Buffer.from(salt, 'base64url'), { N: Number(n), r: Number(r), p: Number(p), maxmem: kScrypt.maxmem as number })
  return timingSafeEqual(got, expected) && stored !== null
}

/** True when `password` matches a stored hash (constant-time compare); waits for its turn in the hash queue. */
export async function passwordMatches (stored: string | null, password: string): Promise<boolean> {
  return await kHashes.run(async () => await matchesNow(stored, password))
}

/**
 * What a sign-in got: the user, wrong credentials (one answer for an unknown, disabled or wrong one), refused by the
 * failure limits until `retryAfterSeconds`, or turned away because too many password checks wait already.
 */
export type SignInOutcome =
  | { ok: true, user: UserRecord }
  | { ok: false, reason: 'invalid' }
  | { ok: false, reason: 'limited' | 'busy', retryAfterSeconds: number }

function sessionHash (id: string): string {
  return createHash('sha256').update(id).digest('base64url')
}

interface UserRow { username: string, tenant: string, role: string, password_hash: string, created_at: string, disabled_at: string | null }
interface SessionRow { username: string, tenant: string, role: string, csrf: string, created_at: string, last_seen_at: string, expires_at: string, disabled_at: string | null }

function userRecord (row: UserRow): UserRecord {
  return { username: row.username, tenant: row.tenant, role: row.role as Role, createdAt: row.created_at, disabledAt: row.disabled_at }
}

/** The user of a row whose password matched, unless there is none or it is disabled. */
function activeUser (row: UserRow | undefined): UserRecord | null {
  return row === undefined || row.disabled_at !== null ? null : userRecord(row)
}

/** Users and sessions over one store's SQL port. */
export class Accounts {
  readonly #db: SqlPort
  readonly #limits: SignInLimits

  constructor (db: SqlPort) {
    this.#db = db
    this.#limits = new SignInLimits(db)
  }

  /** Creates a user; throws INVALID_USER_OPTIONS for a bad name, role, tenant or a password under 12 characters. */
  async createUser (options: CreateUserOptions): Promise<UserRecord> {
    const { tenant, username, role = 'analyst', password } = options
    if (typeof username !== 'string' || !kUsernamePattern.test(username)) {
      throw new StoreError('INVALID_USER_OPTIONS', 'username must be 2-64 characters: lowercase letters, digits and . _ @ -, starting with a letter or digit')
    }
    if (typeof tenant !== 'string' || tenant.length === 0 || tenant.length > 128 || tenant.trim() !== tenant) throw new StoreError('INVALID_USER_OPTIONS', 'tenant must be 1 to 128 characters without surrounding spaces')
    if (!(ROLES as readonly string[]).includes(role)) throw new StoreError('INVALID_USER_OPTIONS', `role must be one of ${ROLES.join(', ')}`)
    if (typeof password !== 'string' || [...password].length < kMinPassword || password.length > kMaxPassword) {
      throw new StoreError('INVALID_USER_OPTIONS', `password must be ${kMinPassword} to ${kMaxPassword} characters`)
    }
    const createdAt = new Date().toISOString()
    const hash = await hashPassword(password)
    try {
      await this.#db.run('INSERT INTO {users} (username, tenant, role, password_hash, created_at) VALUES (?, ?, ?, ?, ?)', [username, tenant, role, hash, createdAt])
    } catch (err) {
      if (isUniqueViolation(err)) throw new StoreError('INVALID_USER_OPTIONS', `user ${username} exists`)
      throw err
    }
    return { username, tenant, role, createdAt, disabledAt: null }
  }

  /** Every user, oldest first; never hashes. */
  async listUsers (): Promise<UserRecord[]> {
    return (await this.#db.all<UserRow>('SELECT * FROM {users} ORDER BY created_at COLLATE {bytes}, username COLLATE {bytes}', [])).map(userRecord)
  }

  /** Disables a user and ends their sessions; false for an unknown or already disabled user. */
  async disableUser (username: string): Promise<boolean> {
    const n = await this.#db.run('UPDATE {users} SET disabled_at = ? WHERE username = ? AND disabled_at IS NULL', [new Date().toISOString(), username])
    await this.#db.run('DELETE FROM {sessions} WHERE username = ?', [username])
    return n === 1
  }

  /** The active user whose password matches, or null (unknown, disabled or wrong password: one answer for all). */
  async verifyPassword (username: string, password: string): Promise<UserRecord | null> {
    const row = await this.#userRow(username)
    const ok = await passwordMatches(row?.password_hash ?? null, typeof password === 'string' ? password.slice(0, kMaxPassword) : '')
    return ok ? activeUser(row) : null
  }

  /**
   * A dashboard sign-in from `address`: counted against the failure limits before the password is checked (so
   * parallel guesses are counted too), checked only when the hash queue has room, and given back when it succeeds.
   */
  async signIn (username: string, password: string, address: string): Promise<SignInOutcome> {
    // Queued under the client's address and the username: a client that keeps the queue full gives up its own places
    // (hash-queue.ts), from one address or many.
    const keys = [`a:${address}`, `u:${username}`]
    if (kHashes.refuses(keys)) return { ok: false, reason: 'busy', retryAfterSeconds: 1 }
    const taken = await this.#limits.take(username, address)
    if (!taken.ok) return { ok: false, reason: taken.busy ? 'busy' : 'limited', retryAfterSeconds: taken.retryAfterSeconds }
    let user: UserRecord | null = null
    try {
      const row = await this.#userRow(username)
      const checked = kHashes.tryRun(async () => await matchesNow(row?.password_hash ?? null, password.slice(0, kMaxPassword)), keys)
      if (checked === null) {
        await taken.release(false)
        return { ok: false, reason: 'busy', retryAfterSeconds: 1 }
      }
      user = await checked ? activeUser(row) : null
    } catch (err) {
      await taken.release(false)
      if (err instanceof HashQueueDisplaced) return { ok: false, reason: 'busy', retryAfterSeconds: 1 }
      throw err
    }
    if (user === null) {
      taken.failed()
      return { ok: false, reason: 'invalid' }
    }
    await taken.release(true)
    return { ok: true, user }
  }

  async #userRow (username: string): Promise<UserRow | undefined> {
    if (typeof username !== 'string' || username.length > 64) return undefined
    return (await this.#db.all<UserRow>('SELECT * FROM {users} WHERE username = ?', [username]))[0]
  }

  /** Starts a session for a verified user; the id is returned only here. */
  async createSession (user: UserRecord, times: SessionTimes): Promise<{ id: string, session: SessionRecord }> {
    const id = randomBytes(32).toString('base64url')
    const csrf = randomBytes(24).toString('base64url')
    const now = Date.now()
    const createdAt = new Date(now).toISOString()
    const expiresAt = new Date(now + times.absoluteMs).toISOString()
    await this.#db.run('DELETE FROM {sessions} WHERE expires_at < ?', [createdAt])
    await this.#db.run('INSERT INTO {sessions} (id_hash, username, csrf, created_at, last_seen_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)',
      [sessionHash(id), user.username, csrf, createdAt, createdAt, expiresAt])
    // A user keeps their newest kMaxSessions sessions: signing in without end does not grow the store without end.
    await this.#db.run('DELETE FROM {sessions} WHERE username = ? AND id_hash NOT IN (SELECT id_hash FROM {sessions} WHERE username = ? ORDER BY created_at DESC, id_hash LIMIT ?)',
      [user.username, user.username, kMaxSessions])
    return { id, session: { username: user.username, tenant: user.tenant, role: user.role, csrf, createdAt, expiresAt } }
  }

  /** The live session of an id, or null (unknown, past its idle or absolute expiry, or its user disabled). */
  async getSession (id: string, times: SessionTimes): Promise<SessionRecord | null> {
    if (typeof id !== 'string' || id.length !== 43) return null
    const rows = await this.#db.all<SessionRow>(
      'SELECT s.username, u.tenant, u.role, s.csrf, s.created_at, s.last_seen_at, s.expires_at, u.disabled_at FROM {sessions} s JOIN {users} u ON u.username = s.username WHERE s.id_hash = ?',
      [sessionHash(id)])
    const row = rows[0]
    const now = Date.now()
    if (row === undefined || row.disabled_at !== null) return null
    if (Date.parse(row.expires_at) <= now || Date.parse(row.last_seen_at) + times.idleMs <= now) {
      await this.#db.run('DELETE FROM {sessions} WHERE id_hash = ?', [sessionHash(id)])
      return null
    }
    if (Date.parse(row.last_seen_at) + touchEvery(times.idleMs) <= now) {
      await this.#db.run('UPDATE {sessions} SET last_seen_at = ? WHERE id_hash = ?', [new Date(now).toISOString(), sessionHash(id)])
    }
    return { username: row.username, tenant: row.tenant, role: row.role as Role, csrf: row.csrf, createdAt: row.created_at, expiresAt: row.expires_at }
  }

  /** Ends a session (sign-out); unknown ids are ignored. */
  async deleteSession (id: string): Promise<void> {
    if (typeof id === 'string') await this.#db.run('DELETE FROM {sessions} WHERE id_hash = ?', [sessionHash(id)])
  }
}

/** The schema both stores create (TEXT timestamps, ISO 8601 UTC, which sort as they compare). */
export function accountsSchema (users: string, sessions: string, userIndex = 'sessions_user'): string {
  return `
  CREATE TABLE ${users} (
    username TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    role TEXT NOT NULL,
    password_hash TEXT NOT NULL,             -- scrypt$N$r$p$salt$hash
    created_at TEXT NOT NULL,
    disabled_at TEXT
  );
  CREATE TABLE ${sessions} (
    id_hash TEXT PRIMARY KEY,                -- sha256 of the session id; the id itself is never stored
    username TEXT NOT NULL REFERENCES ${users} (username),
    csrf TEXT NOT NULL,
    created_at TEXT NOT NULL,
    last_seen_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
  );
  CREATE INDEX ${userIndex} ON ${sessions} (username);
  `
}
