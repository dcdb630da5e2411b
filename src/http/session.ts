/**
 * Dashboard sessions as a second way to call the management routes: a session cookie (HttpOnly, SameSite=Strict; over
 * HTTPS Secure and `__Host-` prefixed) names a session in the store; a state-changing call with a session must also
 * carry the session's CSRF token in X-CSRF-Token. The session stands in for a key of its tenant with the role's
 * permissions: an analyst has `mgmt`, an admin `mgmt` and `admin`. Verdict routes never accept a session (they are
 * API-key only).
 */
import type {} from '@fastify/cookie'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { ApiKeyRecord, SessionRecord, SessionTimes, Store } from '../store/index.ts'

/** Name of the session cookie over plain HTTP. */
export const kSessionCookie = 'iocv_session'
/**
 * Its name over HTTPS: a `__Host-` cookie is accepted by browsers only when Secure, for path / and without a Domain,
 * so no other host (a sibling subdomain) and no plain-HTTP page can set or overwrite it (RFC 6265bis 4.1.3.2).
 */
const kSecureSessionCookie = `__Host-${kSessionCookie}`

/** The session cookie's name for a request: `__Host-` prefixed over HTTPS (directly or through a trusted proxy). */
export function sessionCookie (req: FastifyRequest): string {
  return req.protocol === 'https' ? kSecureSessionCookie : kSessionCookie
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The dashboard session of this request, when it was authenticated by one. */
    session: SessionRecord | null
  }
}

/** Sessions of the store with the configured lifetimes. */
export class SessionAuth {
  readonly accounts: Store['accounts']
  readonly times: SessionTimes

  constructor (accounts: Store['accounts'], times: SessionTimes) {
    this.accounts = accounts
    this.times = times
  }

  /** The live session named by the request's cookie, or null. */
  async of (req: FastifyRequest): Promise<SessionRecord | null> {
    const id = req.cookies?.[sessionCookie(req)]
    return id === undefined ? null : await this.accounts.getSession(id, this.times)
  }

  /** Sets the session cookie (the id is shown to nobody else: HttpOnly, never logged). */
  setCookie (req: FastifyRequest, reply: FastifyReply, id: string): void {
    reply.setCookie(sessionCookie(req), id, {
      path: '/',
      httpOnly: true,
      sameSite: 'strict',
      secure: req.protocol === 'https',
      maxAge: Math.floor(this.times.absoluteMs / 1000)
    })
  }

  /** Clears the session cookie. */
  clearCookie (req: FastifyRequest, reply: FastifyReply): void {
    reply.clearCookie(sessionCookie(req), { path: '/', httpOnly: true, sameSite: 'strict', secure: req.protocol === 'https' })
  }
}

/** The permissions a session's role stands for. */
export function sessionPermissions (session: SessionRecord): string[] {
  return session.role === 'admin' ? ['mgmt', 'admin'] : ['mgmt']
}

/**
 * The key record a session stands in for on the management routes: its tenant and its role's permissions. Its id is
 * `user:<username>`, which is never a key id (those are 12 base32 characters), so usage and history never mix them up.
 */
export function sessionPrincipal (session: SessionRecord): ApiKeyRecord {
  return {
    id: `user:${session.username}`,
    tenant: session.tenant,
    permissions: sessionPermissions(session),
    quota: null,
    createdAt: session.createdAt,
    revokedAt: null,
    rateLimit: null,
    expiresAt: session.expiresAt,
    allowedCidrs: null,
    lastUsedAt: null
  }
}
