/**
 * Retro-hunt webhooks (docs/API.md "Retro-hunt webhooks"): POST /api/v2/mgmt/webhooks (admin) creates one and shows
 * its signing secret once; GET lists the tenant's without secrets (mgmt); DELETE /:id removes one (admin);
 * GET /:id/deliveries shows each delivery's status, attempts and last error (mgmt). A dashboard session stands in
 * for a key as on the other management routes. Only the caller's tenant is ever read or changed.
 */
import type { FastifyInstance } from 'fastify'
import { InvalidRequestError, NotFoundError } from '../errors.ts'
import type { WebhookSender } from '../pool/webhook-sender.ts'
import { newWebhookSecret } from '../pool/webhook-sender.ts'
import { kMaxDeliveryLimit, type Store, type Webhook } from '../store/index.ts'
import { requireKey, type KeyVerifier } from './auth.ts'
import { errorsOf } from './response-schemas.ts'
import type { SessionAuth } from './session.ts'

/** What the routes need. */
export interface WebhookRouteDeps {
  store: Pick<Store, 'webhooks'>
  verifier: KeyVerifier
  sessions?: SessionAuth
  webhooks: Pick<WebhookSender, 'seal' | 'checkUrl'>
}

const kHook = {
  type: 'object',
  required: ['id', 'url', 'min_score', 'description', 'created_at'],
  properties: {
    id: { type: 'string', example: 'wh_0mhx3k2f48a1c9e2b7d0' },
    url: { type: 'string' },
    min_score: { type: 'integer', minimum: 0, maximum: 100 },
    description: { type: 'string' },
    created_at: { type: 'string', format: 'date-time' }
  }
} as const

const kCreated = {
  type: 'object',
  required: ['id', 'url', 'min_score', 'secret', 'created_at'],
  properties: {
    id: { type: 'string' },
    url: { type: 'string' },
    min_score: { type: 'integer' },
    secret: { type: 'string', description: 'The HMAC-SHA256 signing secret: shown only in this answer' },
    created_at: { type: 'string', format: 'date-time' }
  }
} as const

const kDelivery = {
  type: 'object',
  required: ['id', 'status', 'attempts', 'hits', 'last_error', 'created_at', 'next_attempt_at', 'delivered_at'],
  properties: {
    id: { type: 'string', description: 'The delivery_id of the body and X-IOC-Delivery' },
    status: { type: 'string', enum: ['pending', 'delivered', 'failed'] },
    attempts: { type: 'integer' },
    hits: { type: 'integer' },
    last_error: { type: ['string', 'null'] },
    created_at: { type: 'string', format: 'date-time' },
    next_attempt_at: { type: ['string', 'null'], format: 'date-time' },
    delivered_at: { type: ['string', 'null'], format: 'date-time' }
  }
} as const

const kIdParams = { type: 'object', required: ['id'], properties: { id: { type: 'string', minLength: 1, maxLength: 64 } } } as const

function publicHook (h: Webhook): object {
  return { id: h.id, url: h.url, min_score: h.minScore, description: h.description, created_at: h.createdAt }
}

/** Registers the webhook routes. */
export function webhookRoutes (app: FastifyInstance, deps: WebhookRouteDeps): void {
  const db = deps.store.webhooks
  const admin = requireKey(deps.verifier, 'admin', deps.sessions)
  const mgmt = requireKey(deps.verifier, 'mgmt', deps.sessions)

  app.post('/api/v2/mgmt/webhooks', {
    schema: {
      tags: ['management'],
      summary: 'Send the tenant\'s new retro-hunt hits to a URL, signed',
      description: 'The URL must be https:// and resolve to public addresses only (IOC_WEBHOOK_ALLOW_PRIVATE=1 lifts both). The signing secret is in this answer only.',
      security: [{ apiKey: [] }],
      body: {
        type: 'object',
        additionalProperties: false,
        required: ['url'],
        properties: {
          url: { type: 'string', minLength: 1, maxLength: 2048 },
          min_score: { type: 'integer', minimum: 0, maximum: 100, default: 65, description: 'Hits whose score now is at least this are sent' },
          description: { type: 'string', maxLength: 200, pattern: '^[^\\u0000-\\u001f\\u007f-\\u009f]*$' }
        }
      },
      response: { 201: kCreated, ...errorsOf(400, 401, 403) }
    },
    onRequest: admin
  }, async (req, reply) => {
    const body = req.body as { url: string, min_score?: number, description?: string }
    const refused = await deps.webhooks.checkUrl(body.url)
    if (refused !== null) throw new InvalidRequestError(refused)
    const secret = newWebhookSecret()
    const hook = await db.create({ tenant: req.apiKey!.tenant, url: body.url, minScore: body.min_score ?? 65, description: (body.description ?? '').trim(), secretSealed: deps.webhooks.seal(secret) })
    req.log.info({ webhook: hook.id }, 'webhook created')
    return reply.code(201).send({ id: hook.id, url: hook.url, min_score: hook.minScore, secret, created_at: hook.createdAt })
  })

  app.get('/api/v2/mgmt/webhooks', {
    schema: {
      tags: ['management'],
      summary: 'The tenant\'s retro-hunt webhooks (never their secrets)',
      security: [{ apiKey: [] }],
      // No parameter: one sent by mistake (a limit, a filter) is 400, as on every other listing.
      querystring: { type: 'object', additionalProperties: false, properties: {} },
      response: { 200: { type: 'object', required: ['webhooks'], properties: { webhooks: { type: 'array', items: kHook } } }, ...errorsOf(400, 401, 403) }
    },
    onRequest: mgmt
  }, async (req) => ({ webhooks: (await db.list(req.apiKey!.tenant)).map(publicHook) }))

  app.delete('/api/v2/mgmt/webhooks/:id', {
    schema: {
      tags: ['management'],
      summary: 'Remove a webhook and its deliveries',
      security: [{ apiKey: [] }],
      params: kIdParams,
      response: { 204: { type: 'null', description: 'Removed' }, ...errorsOf(401, 403, 404) }
    },
    onRequest: admin
  }, async (req, reply) => {
    const { id } = req.params as { id: string }
    if (!await db.delete(req.apiKey!.tenant, id)) throw new NotFoundError(`no webhook ${id}`)
    return reply.code(204).send()
  })

  app.get('/api/v2/mgmt/webhooks/:id/deliveries', {
    schema: {
      tags: ['management'],
      summary: 'A webhook\'s deliveries, newest first: status, attempts, last error',
      security: [{ apiKey: [] }],
      params: kIdParams,
      querystring: { type: 'object', additionalProperties: false, properties: { limit: { type: 'string', pattern: '^[0-9]{1,4}$' } } },
      response: { 200: { type: 'object', required: ['deliveries'], properties: { deliveries: { type: 'array', items: kDelivery } } }, ...errorsOf(400, 401, 403, 404) }
    },
    onRequest: mgmt
  }, async (req) => {
    const { id } = req.params as { id: string }
    const q = req.query as { limit?: string }
    const limit = q.limit === undefined ? 100 : Number(q.limit)
    if (limit < 1 || limit > kMaxDeliveryLimit) throw new InvalidRequestError(`limit must be from 1 to ${kMaxDeliveryLimit}`)
    const tenant = req.apiKey!.tenant
    if (!(await db.list(tenant)).some((h) => h.id === id)) throw new NotFoundError(`no webhook ${id}`)
    const list = await db.deliveries(tenant, id, limit)
    return {
      deliveries: list.map((d) => ({
        id: d.id, status: d.status, attempts: d.attempts, hits: d.hits, last_error: d.lastError, created_at: d.createdAt, next_attempt_at: d.nextAttemptAt, delivered_at: d.deliveredAt
      }))
    }
  })
}
