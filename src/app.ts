/**
 * buildApp: plugins, parsers, error shape and routes. It never listens (main.ts does).
 */
import { randomUUID } from 'node:crypto'
import { STATUS_CODES } from 'node:http'
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance } from 'fastify'
import type { Logger } from 'pino'
import type { Config } from './config.ts'
import { Admission } from './bulk/admission.ts'
import { kRetryAfterCodes, NotFoundError, toPublicError } from './errors.ts'
import { KeyVerifier } from './http/auth.ts'
import { registerParsers } from './http/content.ts'
import { TenantAllowlists } from './bulk/allowlist.ts'
import { allowlistRoutes } from './http/routes-allowlist.ts'
import { mgmtRoutes } from './http/routes-mgmt.ts'
import { serviceRoutes } from './http/routes-service.ts'
import { verdictRoutes } from './http/routes-verdict.ts'
import type { HistorySink } from './history/types.ts'
import type { IntelService } from './pool/intel-service.ts'
import type { QuotaCounter, Store } from './store/index.ts'

/** Everything the app uses; main.ts (or a test) creates and owns these. */
export interface AppDeps {
  store: Store
  quota: QuotaCounter
  intel: IntelService
  history: HistorySink
  logger: Logger
}

const kRequestIdPattern = /^[A-Za-z0-9._:-]{1,128}$/
const kOverloadRetryAfter = 1 // seconds

/** A client-supplied x-request-id is kept only if it is short and plain, so it cannot forge log lines. */
function requestId (req: { headers: Record<string, string | string[] | undefined> }): string {
  const h = req.headers['x-request-id']
  return typeof h === 'string' && kRequestIdPattern.test(h) ? h : randomUUID()
}

/** Builds the Fastify app with every route. */
export async function buildApp (config: Readonly<Config>, deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    bodyLimit: config.bodyLimit,
    genReqId: requestId,
    return503OnClosing: true,
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false, allErrors: false } }
  })
  let closing = false
  // preClose runs before the server stops listening: from then on, responses ask clients to close their
  // keep-alive connections, so the server can finish closing once running requests are answered.
  app.addHook('preClose', async () => { closing = true })
  app.decorateRequest('apiKey', null)
  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id)
  })
  app.addHook('onSend', async (_req, reply) => {
    if (closing) reply.header('connection', 'close')
  })
  registerParsers(app)

  app.setErrorHandler((err: FastifyError & { retryAfter?: number }, req, reply) => {
    const pub = toPublicError(err)
    if (pub.status >= 500) req.log.error({ err }, 'request failed')
    else req.log.info({ code: pub.code, status: pub.status }, 'request rejected')
    if (kRetryAfterCodes.has(pub.code)) reply.header('retry-after', String(err.retryAfter ?? kOverloadRetryAfter))
    reply.code(pub.status).type('application/json; charset=utf-8').send({
      statusCode: pub.status,
      code: pub.code,
      error: STATUS_CODES[pub.status] ?? 'Error',
      message: pub.message
    })
  })
  app.setNotFoundHandler((req, reply) => {
    reply.code(404).send({ statusCode: 404, code: new NotFoundError('').code, error: 'Not Found', message: `no route ${req.method} ${req.url.split('?')[0] ?? ''}` })
  })

  const verifier = new KeyVerifier(deps.store)
  const admission = new Admission(config.maxInflight, deps.quota, () => closing ? 'service is shutting down' : deps.history.refusal())
  const allowlists = new TenantAllowlists(deps.store)
  verdictRoutes(app, { intel: deps.intel, history: deps.history, admission, verifier, allowlists, bodyLimit: config.bodyLimit })
  allowlistRoutes(app, { store: deps.store, allowlists, verifier })
  serviceRoutes(app, { store: deps.store, quota: deps.quota, history: deps.history, intel: deps.intel, closing: () => closing })
  mgmtRoutes(app, { store: deps.store, quota: deps.quota, intel: deps.intel, verifier })
  return app
}
