/**
 * Key lifecycle over the API (admin permission): POST /api/v2/mgmt/keys creates a key and answers it once,
 * GET /api/v2/mgmt/keys lists the tenant's keys (never secrets), DELETE /api/v2/mgmt/keys/:id revokes one.
 * An admin key manages the keys of its own tenant only: keys of other tenants are made with the CLI on the server.
 * A key it creates has at most its own permissions, quota, rate limit, expiry and networks.
 */
import type { FastifyInstance } from 'fastify'
import { InvalidRequestError, NotFoundError, PermissionDeniedError } from '../errors.ts'
import { PERMISSIONS, withinCreator, type ApiKeyRecord, type Store } from '../store/index.ts'
import { requireKey, type KeyVerifier } from './auth.ts'
import { errorsOf } from './response-schemas.ts'
import { kIdParams } from './schemas.ts'

/** What the key routes need. */
export interface KeyRouteDeps {
  store: Pick<Store, 'createKey' | 'listKeys' | 'revokeKey'>
  verifier: KeyVerifier
  /** Requests per minute of keys without a rate limit of their own (IOC_RATE_LIMIT), null for none. */
  defaultRateLimit: number | null
}

const kKeyRecord = {
  type: 'object',
  required: ['id', 'tenant', 'permissions', 'quota', 'rate_limit', 'expires_at', 'allowed_cidrs', 'created_at', 'revoked_at', 'last_used_at'],
  properties: {
    id: { type: 'string', description: 'Public key id (what history records show)' },
    tenant: { type: 'string' },
    permissions: { type: 'array', items: { type: 'string', enum: [...PERMISSIONS] } },
    quota: { type: ['integer', 'null'], description: 'Indicators per UTC day; null = unlimited' },
    rate_limit: { type: ['integer', 'null'], description: 'Requests per minute; null = the operator default' },
    expires_at: { type: ['string', 'null'], format: 'date-time' },
    allowed_cidrs: { type: ['array', 'null'], items: { type: 'string' } },
    created_at: { type: 'string', format: 'date-time' },
    revoked_at: { type: ['string', 'null'], format: 'date-time' },
    last_used_at: { type: ['string', 'null'], format: 'date-time', description: 'Updated at most once a minute' }
  }
} as const

const kCreateBody = {
  type: 'object',
  additionalProperties: false,
  required: ['permissions'],
  properties: {
    tenant: { type: 'string', minLength: 1, maxLength: 128, description: 'Defaults to the caller\'s tenant, the only one allowed' },
    permissions: { type: 'array', minItems: 1, maxItems: PERMISSIONS.length, items: { type: 'string', enum: [...PERMISSIONS] } },
    quota: { type: ['integer', 'null'], minimum: 0 },
    rate_limit: { type: ['integer', 'null'], minimum: 1, maximum: 1_000_000 },
    expires_at: { type: ['string', 'null'], maxLength: 40 },
    allowed_cidrs: { type: ['array', 'null'], minItems: 1, maxItems: 64, items: { type: 'string', maxLength: 64 } }
  }
} as const

interface CreateBody {
  tenant?: string
  permissions: string[]
  quota?: number | null
  rate_limit?: number | null
  expires_at?: string | null
  allowed_cidrs?: string[] | null
}

/** The answer form of a key record (snake_case, as every answer of the API). */
function recordOut (r: ApiKeyRecord): Record<string, unknown> {
  return {
    id: r.id,
    tenant: r.tenant,
    permissions: r.permissions,
    quota: r.quota,
    rate_limit: r.rateLimit,
    expires_at: r.expiresAt,
    allowed_cidrs: r.allowedCidrs,
    created_at: r.createdAt,
    revoked_at: r.revokedAt,
    last_used_at: r.lastUsedAt
  }
}

/** Registers the key routes. */
export function keyRoutes (app: FastifyInstance, deps: KeyRouteDeps): void {
  const { store, verifier } = deps

  app.post('/api/v2/mgmt/keys', {
    schema: {
      tags: ['management'],
      summary: 'Create an API key (admin); the key is in this answer only',
      security: [{ apiKey: [] }],
      body: kCreateBody,
      response: { 201: { type: 'object', required: ['key', 'record'], properties: { key: { type: 'string', example: 'iocv_abcdefghijkl_...' }, record: kKeyRecord } }, ...errorsOf(400, 401, 403) }
    },
    onRequest: requireKey(verifier, 'admin')
  }, async (req, reply) => {
    const body = req.body as CreateBody
    const caller = req.apiKey!
    if (body.tenant !== undefined && body.tenant !== caller.tenant) {
      const err = new PermissionDeniedError('admin')
      err.message = 'an admin key creates keys of its own tenant only; leave out tenant or give the key\'s own'
      throw err
    }
    // Never more than the caller holds: left-out bounds are the caller's own (withinCreator).
    const bounded = withinCreator(caller, {
      permissions: body.permissions,
      quota: body.quota,
      rateLimit: body.rate_limit,
      expiresAt: body.expires_at,
      allowedCidrs: body.allowed_cidrs
    }, deps.defaultRateLimit)
    const created = await store.createKey({ tenant: caller.tenant, ...bounded })
    req.log.info({ key_id: created.record.id, tenant: created.record.tenant }, 'api key created')
    reply.code(201)
    return { key: created.key, record: recordOut(created.record) }
  })

  app.get('/api/v2/mgmt/keys', {
    schema: {
      tags: ['management'],
      summary: 'List the tenant\'s API keys (admin), revoked ones included; never secrets',
      security: [{ apiKey: [] }],
      querystring: { type: 'object', additionalProperties: false, properties: { include_revoked: { type: 'string', enum: ['true', 'false'] } } },
      response: { 200: { type: 'object', required: ['keys'], properties: { keys: { type: 'array', items: kKeyRecord } } }, ...errorsOf(400, 401, 403) }
    },
    onRequest: requireKey(verifier, 'admin')
  }, async (req) => {
    const tenant = req.apiKey!.tenant
    const withRevoked = (req.query as { include_revoked?: string }).include_revoked !== 'false'
    const keys = (await store.listKeys()).filter((k) => k.tenant === tenant && (withRevoked || k.revokedAt === null))
    return { keys: keys.map(recordOut) }
  })

  app.delete('/api/v2/mgmt/keys/:id', {
    schema: {
      tags: ['management'],
      summary: 'Revoke an API key of the tenant (admin); it is refused from the next request on',
      security: [{ apiKey: [] }],
      params: kIdParams,
      response: { 200: kKeyRecord, ...errorsOf(400, 401, 403, 404) }
    },
    onRequest: requireKey(verifier, 'admin')
  }, async (req) => {
    const { id } = req.params as { id: string }
    const tenant = req.apiKey!.tenant
    // Another tenant's key is answered as unknown: its existence is not the caller's business.
    const record = (await store.listKeys()).find((k) => k.id === id && k.tenant === tenant)
    if (record === undefined) throw new NotFoundError(`no key ${id} in this tenant`)
    if (record.revokedAt !== null) throw new InvalidRequestError(`key ${id} is already revoked`)
    await store.revokeKey(id)
    // This process forgets verified keys at once; other instances within the verification cache's few seconds.
    verifier.clear()
    req.log.info({ key_id: id }, 'api key revoked')
    const after = (await store.listKeys()).find((k) => k.id === id)
    return recordOut(after ?? record)
  })
}
