/**
 * X-API-Key authentication and permission checks. Keys are verified by the store (hash + constant-time compare);
 * a verified key is remembered for a few seconds under a digest of the presented key, so a busy SIEM feed does not
 * cost a store round trip per request. A revocation or change through this instance forgets the key at once; on
 * PostgreSQL, one made anywhere else reaches forget() through the fleet's change notifications (src/fleet/changes.ts),
 * and kVerifiedTtlMs stays as the backstop for a notification that never arrives.
 */
import { hash, timingSafeEqual } from 'node:crypto'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { LRUCache } from 'lru-cache'
import { AddressNotAllowedError, CsrfError, InvalidApiKeyError, MissingApiKeyError, PermissionDeniedError, SessionExpiredError } from '../errors.ts'
import { sessionCookie, sessionPrincipal, type SessionAuth } from './session.ts'
import { addressAllowed, expired, type ApiKeyRecord, type Store } from '../store/index.ts'

const kVerifiedTtlMs = 5_000
const kVerifiedMax = 10_000
/** last_used_at is written at most this often per key, so a busy feed does not cost a store write per request. */
const kTouchIntervalMs = 60_000

declare module 'fastify' {
  interface FastifyRequest {
    /** The verified key of this request (never the key string itself). */
    apiKey: ApiKeyRecord | null
  }
}

/** Verifies presented keys against the store, with a short-lived cache of successes. */
export class KeyVerifier {
  private readonly store: Pick<Store, 'verifyKey' | 'touchKey'>
  private readonly cache = new LRUCache<string, ApiKeyRecord>({ max: kVerifiedMax, ttl: kVerifiedTtlMs })
  private readonly touched = new LRUCache<string, true>({ max: kVerifiedMax, ttl: kTouchIntervalMs })
  private readonly onTouchError: (err: unknown) => void
  /** Bumped by every forget: a verification that began before one must not cache what it read. */
  private epoch = 0

  constructor (store: Pick<Store, 'verifyKey' | 'touchKey'>, onTouchError: (err: unknown) => void = () => {}) {
    this.store = store
    this.onTouchError = onTouchError
  }

  /** The active, unexpired key record, or null. */
  async verify (presented: string): Promise<ApiKeyRecord | null> {
    // One-shot hash: half the CPU of createHash().update().digest(), paid on every authenticated call.
    const digest = hash('sha256', presented, 'base64')
    let rec = this.cache.get(digest) ?? null
    if (rec === null) {
      const epoch = this.epoch
      rec = await this.store.verifyKey(presented)
      if (rec !== null && epoch === this.epoch) this.cache.set(digest, rec)
    }
    // A cached record may have expired since it was verified.
    if (rec === null || expired(rec.expiresAt)) return null
    if (!this.touched.has(rec.id)) {
      this.touched.set(rec.id, true)
      this.store.touchKey(rec.id, new Date().toISOString()).catch(this.onTouchError)
    }
    return rec
  }

  /** Forgets cached verifications (after a revoke in this process, or missed notifications). */
  clear (): void {
    this.epoch++
    this.cache.clear()
  }

  /** Forgets the cached verifications of one key (it was revoked or changed, here or on another instance). */
  forget (id: string): void {
    this.epoch++
    for (const [digest, rec] of this.cache.entries()) if (rec.id === id) this.cache.delete(digest)
  }
}

const kSafeMethods = new Set(['GET', 'HEAD', 'OPTIONS'])

/** Constant-time comparison of two tokens. */
function tokensEqual (a: string, b: string): boolean {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

/** `admin` holds every permission. */
export function hasPermission (key: ApiKeyRecord, permission: string): boolean {
  return key.permissions.includes(permission) || key.permissions.includes('admin')
}

/**
 * onRequest hook that admits only keys holding `permission` (null: any valid key). With `sessions`, a request without
 * a key may instead carry a dashboard session (management routes): its role must hold the permission, and a
 * state-changing method must carry the session's CSRF token.
 */
export function requireKey (verifier: KeyVerifier, permission: string | null, sessions?: SessionAuth) {
  return async function authenticate (req: FastifyRequest, _reply: FastifyReply): Promise<void> {
    const presented = req.headers['x-api-key']
    if ((presented === undefined || presented === '') && sessions !== undefined && req.cookies?.[sessionCookie(req)] !== undefined) {
      await admitSession(req, sessions, permission)
      return
    }
    // (A key in the query string was refused before this, by http/edges.ts guardUrl.)
    if (typeof presented !== 'string' || presented.trim() === '') throw new MissingApiKeyError()
    const key = await verifier.verify(presented.trim())
    if (key === null) throw new InvalidApiKeyError()
    if (key.allowedCidrs !== null && !addressAllowed(req.ip, key.allowedCidrs)) throw new AddressNotAllowedError()
    if (permission !== null && !hasPermission(key, permission)) throw new PermissionDeniedError(permission)
    req.apiKey = key
  }
}

/**
 * onRequest hook of the dashboard's own calls (sign-out, lookup, bulk, the capacity report): a session only, whose
 * role holds `permission`; no API key stands in for it (a key asks for verdicts on the verdict routes, with their
 * permissions). Without the session's cookie the answer is SESSION_EXPIRED, the code the page signs out on.
 */
export function requireSession (sessions: SessionAuth, permission: string) {
  return async function authenticateSession (req: FastifyRequest, _reply: FastifyReply): Promise<void> {
    if (req.cookies?.[sessionCookie(req)] === undefined) throw new SessionExpiredError()
    await admitSession(req, sessions, permission)
  }
}

/** Admits a request by its session cookie: a live session, its CSRF token on a state-changing method, the permission. */
async function admitSession (req: FastifyRequest, sessions: SessionAuth, permission: string | null): Promise<void> {
  const session = await sessions.of(req)
  if (session === null) throw new SessionExpiredError()
  if (!kSafeMethods.has(req.method)) {
    const token = req.headers['x-csrf-token']
    if (typeof token !== 'string' || !tokensEqual(token, session.csrf)) throw new CsrfError()
  }
  const principal = sessionPrincipal(session)
  if (permission !== null && !hasPermission(principal, permission)) throw new PermissionDeniedError(permission)
  req.session = session
  req.apiKey = principal
}
