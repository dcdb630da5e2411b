/**
 * X-API-Key authentication and permission checks. Keys are verified by the store (hash + constant-time compare);
 * a verified key is remembered for a few seconds under a digest of the presented key, so a busy SIEM feed does not
 * cost a store round trip per request. Revocation therefore takes effect within kVerifiedTtlMs.
 */
import { createHash } from 'node:crypto'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { LRUCache } from 'lru-cache'
import { InvalidApiKeyError, MissingApiKeyError, PermissionDeniedError } from '../errors.ts'
import type { ApiKeyRecord, Store } from '../store/index.ts'

const kVerifiedTtlMs = 5_000
const kVerifiedMax = 10_000

declare module 'fastify' {
  interface FastifyRequest {
    /** The verified key of this request (never the key string itself). */
    apiKey: ApiKeyRecord | null
  }
}

/** Verifies presented keys against the store, with a short-lived cache of successes. */
export class KeyVerifier {
  private readonly store: Pick<Store, 'verifyKey'>
  private readonly cache = new LRUCache<string, ApiKeyRecord>({ max: kVerifiedMax, ttl: kVerifiedTtlMs })

  constructor (store: Pick<Store, 'verifyKey'>) {
    this.store = store
  }

  /** The active key record, or null. */
  async verify (presented: string): Promise<ApiKeyRecord | null> {
    const digest = createHash('sha256').update(presented).digest('base64')
    const hit = this.cache.get(digest)
    if (hit !== undefined) return hit
    const rec = await this.store.verifyKey(presented)
    if (rec !== null) this.cache.set(digest, rec)
    return rec
  }

  /** Forgets cached verifications (after a revoke in this process). */
  clear (): void {
    this.cache.clear()
  }
}

/** `admin` holds every permission. */
export function hasPermission (key: ApiKeyRecord, permission: string): boolean {
  return key.permissions.includes(permission) || key.permissions.includes('admin')
}

/** onRequest hook that admits only keys holding `permission` (null: any valid key). */
export function requireKey (verifier: KeyVerifier, permission: string | null) {
  return async function authenticate (req: FastifyRequest, _reply: FastifyReply): Promise<void> {
    const presented = req.headers['x-api-key']
    if (typeof presented !== 'string' || presented.trim() === '') throw new MissingApiKeyError()
    const key = await verifier.verify(presented.trim())
    if (key === null) throw new InvalidApiKeyError()
    if (permission !== null && !hasPermission(key, permission)) throw new PermissionDeniedError(permission)
    req.apiKey = key
  }
}
