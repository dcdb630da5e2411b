/**
 * buildApp: plugins, parsers, error shape and routes. It never listens (main.ts does).
 */
import { randomUUID } from 'node:crypto'
import { STATUS_CODES } from 'node:http'
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import type { Logger } from 'pino'
import type { Socket } from 'node:net'
import { join } from 'node:path'
import cookie from '@fastify/cookie'
import { kProjectRoot, type Config } from './config.ts'
import { Admission } from './bulk/admission.ts'
import { causeCodes, InvalidRequestError, kExpectedRefusals, kRetryAfterCodes, NotFoundError, OverloadedError, toPublicError } from './errors.ts'
import { ConnectionDrain } from './http/connection-drain.ts'
import { clientErrorHandler, guardUrl, limitConnectionsPerAddress, lingerIfUnread, PipelineGuard, redactUrl } from './http/edges.ts'
import { KeyVerifier } from './http/auth.ts'
import { registerParsers } from './http/content.ts'
import { Metrics, metricsRoutes } from './http/metrics.ts'
import { retroHuntRoutes } from './http/routes-retro-hunt.ts'
import type { RetroHunter } from './pool/retro-hunt.ts'
import type { WebhookSender } from './pool/webhook-sender.ts'
import { webhookRoutes } from './http/routes-webhooks.ts'
import { registerOpenApi } from './http/openapi.ts'
import { registerRateLimit } from './http/rate-limit.ts'
import { kPackageVersion } from './http/request-fields.ts'
import { AccessLog, requestLogger } from './http/request-logger.ts'
import { keyRoutes } from './http/routes-keys.ts'
import { TenantAllowlists } from './bulk/allowlist.ts'
import { allowlistRoutes } from './http/routes-allowlist.ts'
import { feedbackRoutes } from './http/routes-feedback.ts'
import { mgmtRoutes } from './http/routes-mgmt.ts'
import { kRetiredHistoryRoute, serviceRoutes } from './http/routes-service.ts'
import { kCountedMembers, verdictDeps, verdictRoutes } from './http/routes-verdict.ts'
import { SessionAuth } from './http/session.ts'
import { dashboardRoutes } from './dashboard/routes.ts'
import type { HistorySink } from './history/types.ts'
import type { IntelService } from './pool/intel-service.ts'
import type { Fleet } from './fleet/fleet.ts'
import type { FeedRefresher } from './intel/index.ts'
import type { QuotaCounter, Store } from './store/index.ts'

/** Everything the app uses; main.ts (or a test) creates and owns these. */
export interface AppDeps {
  store: Store
  quota: QuotaCounter
  intel: IntelService
  history: HistorySink
  /** Status of fetched feeds. */
  feeds: Pick<FeedRefresher, 'rows' | 'refreshAll'>
  logger: Logger
  /** Instances sharing the store (absent or inactive: this instance alone). */
  fleet?: Fleet
  /** Retro-hunt counters for /metrics (absent: none shown). */
  retroHunt?: Pick<RetroHunter, 'state'>
  /** Retro-hunt webhook deliveries (absent: no webhook routes). */
  webhooks?: Pick<WebhookSender, 'state' | 'seal' | 'checkUrl'>
}

const kRequestIdPattern = /^[A-Za-z0-9._:-]{1,128}$/
const kOverloadRetryAfter = 1 // seconds
/** Routes that keep answering while the service shuts down, so orchestrators and load balancers see it. */
const kAnswerWhileClosing = new Set(['/api/v2/ioc/health', '/livez', '/readyz'])
/** How often Node checks connections against the header and request timeouts, in ms. */
const kConnectionsCheckMs = 1_000
/** Shutdown of the connections (connection-drain.ts): notice to clients with open connections, grace for readers. */
const kDrain = { noticeMs: 1_000, unreadGraceMs: 2_000 }

/** URLs of the API and the dashboard's calls, whose answers may carry keys, session tokens or tenant data. */
function isApiUrl (url: string): boolean {
  return url.startsWith('/api/') || url.startsWith('/dashboard/api/')
}

/** How long each plugin may take to load before the start fails (Fastify's default is 10 s). */
const kPluginTimeoutMs = 120_000

/**
 * A client-supplied x-request-id is kept only if it is short and plain, so it cannot forge log lines, and does not
 * have an API key's form (`iocv_...`): a key sent there by mistake would be echoed and logged with every line.
 */
function requestId (req: { headers: Record<string, string | string[] | undefined> }): string {
  const h = req.headers['x-request-id']
  return typeof h === 'string' && kRequestIdPattern.test(h) && !h.startsWith('iocv_') ? h : randomUUID()
}

/** The 404 of a request that no route takes. */
function notFound (req: FastifyRequest): Error {
  // Its path as logs show it (a key pasted as a path is not echoed to whatever records answers on the way back).
  return new NotFoundError(`no route ${req.method} ${redactUrl(req.url.split('?')[0] ?? '') ?? ''}`)
}

/** The documented error body for any error a request meets, and its one log line (a 4xx's line: its code, never its message). */
function answerError (err: FastifyError & { retryAfter?: number }, req: FastifyRequest, reply: FastifyReply): void {
  const pub = toPublicError(err)
  // Refusals by design (overload, quota, shutdown) are routine: one warn line, no stack; what caused it, as codes.
  if (kExpectedRefusals.has(pub.code)) req.log.warn({ code: pub.code, status: pub.status, reason: pub.message, causes: causeCodes(err) }, 'request refused')
  else if (pub.status >= 500) req.log.error({ err }, 'request failed')
  else req.log.info({ code: pub.code, status: pub.status }, 'request rejected')
  if (kRetryAfterCodes.has(pub.code)) reply.header('retry-after', String(err.retryAfter ?? kOverloadRetryAfter))
  reply.code(pub.status).type('application/json; charset=utf-8').send({
    statusCode: pub.status,
    code: pub.code,
    error: STATUS_CODES[pub.status] ?? 'Error',
    message: pub.message
  })
}

/** Builds the Fastify app with every route. */
export async function buildApp (config: Readonly<Config>, deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    // A request's pino child is made when it writes a line (request-logger.ts), not for every request.
    childLoggerFactory: (logger, bindings, options) => requestLogger(logger as Logger, bindings, options) as unknown as FastifyBaseLogger,
    // One line per request, as its answer is sent (request-logger.ts).
    logController: new AccessLog(deps.logger),
    bodyLimit: config.bodyLimit,
    genReqId: requestId,
    // Behind a reverse proxy, its X-Forwarded-For and X-Forwarded-Proto, from the listed addresses only (docs/OPERATIONS.md).
    trustProxy: config.trustProxy ?? false,
    // Requests during shutdown get the documented 503 OVERLOADED body (onRequest below), not Fastify's own.
    return503OnClosing: false,
    // Slow and idle clients (docs/API.md "Limits"): a whole request must arrive within requestTimeout (408 after),
    // headers within headersTimeout; Node checks both every second instead of its default 30 s.
    requestTimeout: config.requestTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    // An HTTP/1.1 request without Host is refused in onRequest below, with the documented body (Node's own check
    // answers an empty 400).
    http: { headersTimeout: config.headersTimeoutMs, requestTimeout: config.requestTimeoutMs, connectionsCheckingInterval: kConnectionsCheckMs, requireHostHeader: false },
    // Errors of Node's HTTP parser (431, 414, 408, malformed requests) get the documented body too.
    clientErrorHandler,
    // Fastify's own URL errors (a bad encoding, an over-long path parameter) get the documented body too. Not by
    // reply.send(err): Fastify answers those with its default handler, whose body and log line hold the whole URL,
    // query string and all.
    frameworkErrors: (err, req, reply) => { answerError(err, req, reply) },
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false, allErrors: false } },
    // Fastify's default gives each plugin 10 s to load; on a host whose CPUs are saturated (a busy shared machine,
    // a deploy starting many instances at once) @fastify/swagger-ui alone took longer and the start failed. A start
    // that is slow is better than one that fails; a plugin that truly hangs still fails after this.
    pluginTimeout: kPluginTimeoutMs
  })
  // preClose runs before the server stops listening: connection-drain.ts says what happens to connections from then on.
  const drain = new ConnectionDrain(app.server, kDrain)
  app.addHook('preClose', async () => { await drain.drain() })
  const closing = (): boolean => drain.draining
  app.decorateRequest('apiKey', null)
  app.decorateRequest('session', null)
  await app.register(cookie)
  // One callback-style hook for the checks every request passes (an async hook per check cost a promise and a
  // microtask turn each, on every call).
  const pipeline = new PipelineGuard()
  app.addHook('onRequest', (req, reply, done) => {
    // A connection sending requests faster than it reads their answers is closed (edges.ts PipelineGuard).
    if (!pipeline.admit(req.raw.socket as Socket | null, reply.raw)) {
      reply.hijack()
      done()
      return
    }
    drain.track(reply.raw)
    reply.header('x-request-id', req.id)
    try {
      // RFC 9112 3.2: an HTTP/1.1 request without Host is a 400.
      if (req.headers.host === undefined && req.raw.httpVersionMajor === 1 && req.raw.httpVersionMinor >= 1) throw new InvalidRequestError('the request has no Host header')
      // No route: answered now, before any body is read (a body sent to no route costs nothing but its lingering
      // close, whatever it holds).
      if (req.is404) throw notFound(req)
      // The retired history route answers 404 to any call, a key in its query string included.
      if (req.routeOptions.url !== kRetiredHistoryRoute) guardUrl(req)
      // Health keeps answering (unavailable) so load balancers see the shutdown; everything else is refused.
      if (closing() && !kAnswerWhileClosing.has(req.routeOptions.url ?? '')) throw new OverloadedError('service is shutting down; retry on another instance')
    } catch (err) {
      done(err as Error)
      return
    }
    done()
  })
  app.addHook('onSend', (req, reply, payload, done) => {
    // An answer whose client reads nothing (its buffers held in memory) is cut once nothing has moved on its
    // connection for sendTimeoutMs. Armed here, as the answer starts, and not for the whole connection: a socket
    // timeout running while a large bulk was still being scored cut it before any answer (Node's server sets the
    // socket's timeout back to server.timeout, 0 here, when the next request arrives, and to keepAliveTimeout once
    // an answer is finished).
    const socket = req.raw.socket as Socket | null
    if (typeof socket?.setTimeout === 'function') socket.setTimeout(config.sendTimeoutMs)
    if (closing()) reply.header('connection', 'close')
    // No answer is to be sniffed into another type; API answers (keys, session tokens, verdicts) are never cached.
    reply.header('x-content-type-options', 'nosniff')
    if (isApiUrl(req.url)) reply.header('cache-control', 'no-store')
    // Answered before its body was read (too large, wrong type, no key): read the rest before closing.
    if (reply.statusCode >= 400) lingerIfUnread(req.raw)
    done(null, payload)
  })
  registerParsers(app, kCountedMembers)
  await registerOpenApi(app, kPackageVersion)
  await registerRateLimit(app, { defaultPerMinute: config.rateLimit, redisUrl: config.redisUrl, redisPrefix: config.redisPrefix })
  // Connections beyond the bound are closed as they arrive, before any byte is read: file descriptors stay bounded
  // whatever clients do. (A stalled request holds its connection for requestTimeout at most.)
  app.server.maxConnections = config.maxConnections
  if (config.maxConnectionsPerAddress > 0) limitConnectionsPerAddress(app.server, config.maxConnectionsPerAddress, config.trustProxy)

  app.setErrorHandler(answerError)
  // Reached only if the onRequest hook above did not answer first (it does for every request without a route).
  app.setNotFoundHandler((req) => { throw notFound(req) })

  const verifier = new KeyVerifier(deps.store, (err) => { deps.logger.warn({ err }, 'could not record a key\'s last use') })
  const admission = new Admission(config.maxInflight, deps.quota, () => closing() ? 'service is shutting down' : deps.history.refusal())
  const metrics = new Metrics({ admission, intel: deps.intel, history: deps.history, feeds: deps.feeds, ...(deps.retroHunt === undefined ? {} : { retroHunt: deps.retroHunt }), ...(deps.webhooks === undefined ? {} : { webhooks: deps.webhooks }) })
  metricsRoutes(app, metrics)
  const allowlists = new TenantAllowlists(deps.store)
  const verdicts = verdictDeps({ intel: deps.intel, history: deps.history, admission, allowlists, observer: metrics })
  // Key and allowlist writes of any instance reach this one's caches on the next request (src/fleet/changes.ts).
  deps.fleet?.changes.on((change) => {
    if (change === null) {
      verifier.clear()
      allowlists.invalidateAll()
    } else if (change.table === 'api_keys') {
      verifier.forget(change.id)
    } else {
      allowlists.invalidate(change.id)
    }
  })
  const sessions = new SessionAuth(deps.store.accounts, { idleMs: config.sessionIdleMs, absoluteMs: config.sessionMaxMs })
  verdictRoutes(app, { verdicts, verifier, bodyLimit: config.bodyLimit })
  allowlistRoutes(app, { store: deps.store, allowlists, verifier, sessions })
  feedbackRoutes(app, { store: deps.store, verdicts, verifier, sessions, observer: metrics })
  retroHuntRoutes(app, { store: deps.store, verifier, sessions })
  if (deps.webhooks !== undefined) {
    webhookRoutes(app, { store: deps.store, verifier, sessions, webhooks: deps.webhooks })
  }
  serviceRoutes(app, { store: deps.store, quota: deps.quota, history: deps.history, intel: deps.intel, feeds: deps.feeds, closing, ...(deps.fleet === undefined ? {} : { fleet: deps.fleet }) })
  mgmtRoutes(app, { store: deps.store, quota: deps.quota, intel: deps.intel, feeds: deps.feeds, verifier, sessions, ...(deps.fleet === undefined ? {} : { fleet: deps.fleet }) })
  await dashboardRoutes(app, { verdicts, sessions, capacityReport: join(kProjectRoot, 'bench', 'results', 'capacity.html') })
  keyRoutes(app, { store: deps.store, verifier, defaultRateLimit: config.rateLimit > 0 ? config.rateLimit : null })
  return app
}
