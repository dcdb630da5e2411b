/**
 * The dashboard: static pages under /dashboard/ (src/dashboard/public: plain HTML, CSS and one ES module, no build
 * step, no CDN), sign-in and sign-out, and the two calls the pages make that the API answers to keys only: a lookup
 * and a bulk, scored and recorded exactly as the verdict routes do, with the session as the requester. Everything
 * else the pages show comes from the management routes, which accept the session cookie (src/http/session.ts).
 */
import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import fastifyStatic from '@fastify/static'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { VerdictDeps } from '../bulk/verdicts.ts'
import { answerBulk, answerSingle, chunkBulk } from '../bulk/verdicts.ts'
import { InvalidCredentialsError, RateLimitedError, SessionExpiredError } from '../errors.ts'
import { requireSession } from '../http/auth.ts'
import { envelopeOf, sourceOf } from '../http/request-fields.ts'
import { sessionCookie, sessionPermissions, type SessionAuth } from '../http/session.ts'

/** What the dashboard needs. */
export interface DashboardDeps {
  verdicts: VerdictDeps
  sessions: SessionAuth
  /** The latest capacity report (bench/results/capacity.html), served when it exists. */
  capacityReport: string
}

const kPublic = join(import.meta.dirname, 'public')
const kMaxDashboardBulk = 10_000

// Pages load only from the service itself: no inline script, no other host, no framing.
const kCsp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

const kSignInBody = {
  type: 'object',
  additionalProperties: false,
  required: ['username', 'password'],
  properties: { username: { type: 'string', minLength: 1, maxLength: 64 }, password: { type: 'string', minLength: 1, maxLength: 1024 } }
} as const

/** Largest sign-in body, bytes: a username of 64 and a password of 1,024 characters, each written as JSON escapes. */
const kSignInBodyLimit = 16 * 1024

const kLookupBody = {
  type: 'object',
  additionalProperties: false,
  required: ['value'],
  properties: { value: { type: 'string', minLength: 1, maxLength: 8192 }, type: { type: 'string', enum: ['ip', 'domain', 'ip_block', 'file_hash_sha256', 'asn'] } }
} as const

const kBulkBody = {
  type: 'object',
  additionalProperties: false,
  required: ['values'],
  properties: { values: { type: 'array', maxItems: kMaxDashboardBulk, items: { type: 'string', maxLength: 8192 } } }
} as const

function sessionAnswer (s: { username: string, tenant: string, role: string, csrf: string, expiresAt: string }): object {
  return { username: s.username, tenant: s.tenant, role: s.role, permissions: sessionPermissions(s as never), csrf: s.csrf, expires_at: s.expiresAt }
}

/** Registers the dashboard's pages and calls. */
export async function dashboardRoutes (app: FastifyInstance, deps: DashboardDeps): Promise<void> {
  const { sessions, verdicts } = deps
  // The dashboard's own calls take the session only (an API key asks for verdicts on the verdict routes).
  const session = requireSession(sessions, 'mgmt')

  app.get('/', { schema: { hide: true } }, async (_req, reply) => await reply.redirect('/dashboard/'))
  app.get('/dashboard', { schema: { hide: true } }, async (_req, reply) => await reply.redirect('/dashboard/'))
  await app.register(fastifyStatic, {
    root: kPublic,
    prefix: '/dashboard/',
    decorateReply: false,
    index: 'index.html',
    setHeaders: (res) => {
      res.header('content-security-policy', kCsp)
      res.header('x-content-type-options', 'nosniff')
      res.header('referrer-policy', 'no-referrer')
    }
  })

  app.post('/dashboard/api/session', {
    schema: { hide: true, tags: ['dashboard'], summary: 'Sign in: sets the session cookie and answers the CSRF token', body: kSignInBody },
    // Open to anyone: a body no sign-in needs is refused with 413 before it is read.
    bodyLimit: kSignInBodyLimit
  }, async (req, reply) => {
    const { username, password } = req.body as { username: string, password: string }
    // Limits per address, per username and address, and per username, kept in the store (docs/OPERATIONS.md).
    const outcome = await sessions.accounts.signIn(username, password, req.ip)
    if (!outcome.ok) {
      if (outcome.reason === 'invalid') {
        req.log.warn({ event: 'sign-in failed' }, 'dashboard sign-in failed')
        throw new InvalidCredentialsError()
      }
      // The wait is in the message too: the page shows the message, not the Retry-After header.
      const wait = outcome.retryAfterSeconds >= 120 ? `${Math.ceil(outcome.retryAfterSeconds / 60)} minutes` : `${outcome.retryAfterSeconds} seconds`
      const message = outcome.reason === 'busy' ? 'too many sign-ins are being checked; retry in a moment' : `too many failed sign-ins; try again in ${wait}`
      throw Object.assign(new RateLimitedError(message), { retryAfter: outcome.retryAfterSeconds })
    }
    const user = outcome.user
    const created = await sessions.accounts.createSession(user, sessions.times)
    sessions.setCookie(req, reply, created.id)
    req.log.info({ user: user.username, tenant: user.tenant }, 'dashboard sign-in')
    return sessionAnswer(created.session)
  })

  app.get('/dashboard/api/session', { schema: { hide: true, tags: ['dashboard'], summary: 'The current session' } }, async (req) => {
    const s = await sessions.of(req)
    if (s === null) throw new SessionExpiredError()
    return sessionAnswer(s)
  })

  app.delete('/dashboard/api/session', {
    schema: { hide: true, tags: ['dashboard'], summary: 'Sign out: ends the session in the store' },
    onRequest: session
  }, async (req, reply) => {
    await sessions.accounts.deleteSession(req.cookies[sessionCookie(req)] as string)
    sessions.clearCookie(req, reply)
    return { signed_out: true }
  })

  app.post('/dashboard/api/lookup', {
    schema: { hide: true, tags: ['dashboard'], summary: 'One verdict for the Lookup page (all signals, full evidence), recorded with the session as requester', body: kLookupBody },
    onRequest: session
  }, async (req: FastifyRequest) => {
    const body = req.body as { value: string, type?: string }
    const answer = await answerSingle(verdicts, {
      key: req.apiKey!,
      log: req.log,
      envelopeOf: (fields) => envelopeOf(req, fields),
      format: 'json',
      type: body.type ?? null,
      value: body.value,
      actionTaken: null,
      actionSource: null,
      signalDetails: 'all',
      evidenceDetails: 'full',
      source: sourceOf({ channel: 'portal', product: 'ioc-verdict dashboard' }),
      requestId: req.id,
      started: performance.now()
    })
    return answer.verdict
  })

  app.post('/dashboard/api/bulk', {
    schema: { hide: true, tags: ['dashboard'], summary: 'Verdicts for the Bulk page (up to 10,000 values), recorded with the session as requester', body: kBulkBody },
    onRequest: session,
    bodyLimit: 16 * 1024 * 1024
  }, async (req: FastifyRequest, reply: FastifyReply) => {
    const values = (req.body as { values: string[] }).values
    const indicators = values.map((value) => ({ value }))
    const answer = await answerBulk(verdicts, {
      key: req.apiKey!,
      log: req.log,
      envelopeOf: (fields) => envelopeOf(req, fields),
      format: 'json',
      count: indicators.length,
      signalDetails: 'top',
      evidenceDetails: undefined,
      scoringVersion: undefined,
      logged: { source: sourceOf({ channel: 'portal', product: 'ioc-verdict dashboard' }), scoring_version: null, query_type: null, project_id: null, project_name: null },
      started: performance.now()
    }, chunkBulk(verdicts, indicators))
    reply.raw.once('finish', answer.sent)
    return reply.type('application/json; charset=utf-8').send(answer.payload)
  })

  app.get('/dashboard/api/capacity', { schema: { hide: true, tags: ['dashboard'], summary: 'Whether a capacity report exists' }, onRequest: session }, async () => ({
    available: existsSync(deps.capacityReport)
  }))
  app.get('/dashboard/capacity-report', { schema: { hide: true }, onRequest: session }, async (_req, reply) => {
    if (!existsSync(deps.capacityReport)) return await reply.code(404).send({ statusCode: 404, code: 'NOT_FOUND', error: 'Not Found', message: 'no capacity report yet: run npm run bench:capacity' })
    // The report is self-contained (inline SVG, no script from elsewhere).
    reply.header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'self'")
    return await reply.type('text/html; charset=utf-8').send(await readFile(deps.capacityReport))
  })
}
