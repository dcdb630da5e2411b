/**
 * Tenant allowlist management: POST/GET /api/v2/mgmt/allowlist and DELETE /api/v2/mgmt/allowlist/:id
 * (docs/API.md "Tenant allowlist"). Every route needs the `mgmt` permission and sees only the key's tenant.
 */
import type { FastifyInstance } from 'fastify'
import { getPublicSuffix } from 'tldts'
import { kMaxAllowEntries, type TenantAllowlists } from '../bulk/allowlist.ts'
import { ALLOW_KINDS, normalizeAllowValue, type AllowKind } from '../engine/index.ts'
import { InvalidRequestError, NotFoundError } from '../errors.ts'
import { parseDateTime, type AllowEntry, type Store } from '../store/index.ts'
import { requireKey, type KeyVerifier } from './auth.ts'
import { errorsOf } from './response-schemas.ts'
import { kIdParams } from './schemas.ts'
import type { SessionAuth } from './session.ts'

/** Longest reason kept, in characters. */
export const kMaxReason = 500
/**
 * Shortest prefix of an ip_block entry, per IP version: a wider block is a large share of the whole address space
 * (0.0.0.0/0 and ::/0 are all of it), which no tenant's known-good list holds on purpose.
 */
export const kMinAllowPrefix = { 4: 8, 6: 16 } as const
const kDefaultLimit = 100
const kMaxLimit = 500

/** What the allowlist routes need. */
export interface AllowlistRouteDeps {
  store: Pick<Store, 'addAllowEntry' | 'listAllowEntries' | 'deleteAllowEntry'>
  allowlists: TenantAllowlists
  verifier: KeyVerifier
  /** Dashboard sessions, accepted in place of a key. */
  sessions?: SessionAuth
}

const kBody = {
  type: 'object',
  additionalProperties: false,
  required: ['kind', 'value', 'reason'],
  properties: {
    kind: { type: 'string', enum: [...ALLOW_KINDS] },
    value: { type: 'string', minLength: 1, maxLength: 512 },
    reason: { type: 'string', minLength: 1, maxLength: kMaxReason },
    expires_at: { type: ['string', 'null'], minLength: 1, maxLength: 64 }
  }
} as const

interface Body { kind: AllowKind, value: string, reason: string, expires_at?: string | null }

/**
 * Why an entry (normalized) covers too much to be accepted, or null: an ip_block wider than kMinAllowPrefix, or a
 * domain_suffix that is itself a public suffix (`co.uk`, or a private one such as `github.io`: every name under it
 * belongs to someone else).
 */
function tooBroad (kind: AllowKind, value: string): string | null {
  if (kind === 'ip_block') {
    const version = value.includes(':') ? 6 : 4
    const prefix = Number(value.slice(value.lastIndexOf('/') + 1))
    if (prefix < kMinAllowPrefix[version]) return `an ip_block entry must be /${kMinAllowPrefix[version]} or narrower for IPv${version}: ${value} covers too much of the address space`
  }
  if (kind === 'domain_suffix' && getPublicSuffix(value, { allowPrivateDomains: true }) === value) {
    return `${value} is a public suffix: a domain_suffix entry for it would cover every domain registered under it`
  }
  return null
}

/** The public form of an entry. */
function publicEntry (e: AllowEntry): object {
  return { id: e.id, kind: e.kind, value: e.value, reason: e.reason, created_by: e.createdBy, created_at: e.createdAt, expires_at: e.expiresAt }
}

const kEntry = {
  type: 'object',
  required: ['id', 'kind', 'value', 'reason', 'created_by', 'created_at', 'expires_at'],
  properties: {
    id: { type: 'string' },
    kind: { type: 'string', enum: ['ip', 'domain', 'file_hash_sha256', 'asn', 'ip_block', 'domain_suffix'] },
    value: { type: 'string', description: 'Normalized' },
    reason: { type: 'string' },
    created_by: { type: 'string', description: 'Key id (or user:<name> for a dashboard session)' },
    created_at: { type: 'string', format: 'date-time' },
    expires_at: { type: ['string', 'null'], format: 'date-time' }
  }
} as const

/** Registers the allowlist routes. */
export function allowlistRoutes (app: FastifyInstance, deps: AllowlistRouteDeps): void {
  const { store, allowlists } = deps
  const auth = requireKey(deps.verifier, 'mgmt', deps.sessions)

  app.post('/api/v2/mgmt/allowlist', {
    schema: {
      tags: ['management'],
      summary: 'Add a tenant allowlist entry: matching verdicts of this tenant become benign (allowlisted)',
      security: [{ apiKey: [] }],
      body: kBody,
      response: { 201: kEntry, ...errorsOf(400, 401, 403) }
    },
    onRequest: auth
  }, async (req, reply) => {
    const key = req.apiKey!
    const body = req.body as Body
    const reason = body.reason.trim()
    if (reason === '') throw new InvalidRequestError('reason must not be blank')
    const n = normalizeAllowValue(body.kind, body.value)
    if (!n.ok) throw new InvalidRequestError(`value is not a valid ${body.kind}: ${n.errors.join('; ')}`)
    const broad = tooBroad(body.kind, n.value)
    if (broad !== null) throw new InvalidRequestError(broad)
    let expiresAt: string | null = null
    if (body.expires_at !== undefined && body.expires_at !== null) {
      const ms = parseDateTime(body.expires_at) ?? NaN
      if (!Number.isFinite(ms)) throw new InvalidRequestError('expires_at must be an ISO 8601 date-time with a time zone')
      if (ms <= Date.now()) throw new InvalidRequestError('expires_at must be in the future')
      expiresAt = new Date(ms).toISOString()
    }
    // The store counts the tenant's active entries with the insert, concurrent adds on any instance included.
    const entry = await store.addAllowEntry({ tenant: key.tenant, kind: body.kind, value: n.value, reason, createdBy: key.id, expiresAt }, kMaxAllowEntries)
    if (entry === null) throw new InvalidRequestError(`a tenant holds at most ${kMaxAllowEntries} active allowlist entries`)
    allowlists.invalidate(key.tenant)
    return reply.code(201).send(publicEntry(entry))
  })

  app.get('/api/v2/mgmt/allowlist', {
    schema: {
      tags: ['management'],
      summary: 'The tenant\'s allowlist entries, oldest first, by cursor',
      security: [{ apiKey: [] }],
      response: { 200: { type: 'object', required: ['entries', 'next_cursor'], properties: { entries: { type: 'array', items: kEntry }, next_cursor: { type: ['string', 'null'] } } }, ...errorsOf(400, 401, 403) },
      querystring: {
        type: 'object',
        additionalProperties: false,
        properties: { limit: { type: 'string', pattern: '^[0-9]{1,4}$' }, cursor: { type: 'string', minLength: 1, maxLength: 128 } }
      }
    },
    onRequest: auth
  }, async (req) => {
    const q = req.query as { limit?: string, cursor?: string }
    const limit = q.limit === undefined ? kDefaultLimit : Number(q.limit)
    if (limit < 1 || limit > kMaxLimit) throw new InvalidRequestError(`limit must be from 1 to ${kMaxLimit}`)
    // A bad cursor is the store's INVALID_REQUEST, which toPublicError answers 400.
    const page = await store.listAllowEntries(req.apiKey!.tenant, limit, q.cursor ?? null)
    return { entries: page.entries.map(publicEntry), next_cursor: page.nextCursor }
  })

  app.delete('/api/v2/mgmt/allowlist/:id', {
    schema: {
      tags: ['management'],
      summary: 'Remove one of the tenant\'s allowlist entries; the next request no longer sees it',
      security: [{ apiKey: [] }],
      response: { 204: { type: 'null', description: 'Removed' }, ...errorsOf(401, 403, 404) },
      params: kIdParams
    },
    onRequest: auth
  }, async (req, reply) => {
    const key = req.apiKey!
    const { id } = req.params as { id: string }
    if (!await store.deleteAllowEntry(key.tenant, id)) throw new NotFoundError(`no allowlist entry ${id}`)
    allowlists.invalidate(key.tenant)
    return reply.code(204).send()
  })
}
