/**
 * Every error code the service returns (docs/API.md), in one place.
 * Bodies keep Fastify's shape: {statusCode, code, error, message}.
 */
import createError from '@fastify/error'
import type { FastifyError } from 'fastify'

// --- request shape ---------------------------------------------------------------------------
/** Body failed schema validation, or is not parseable. */
export const InvalidRequestError = createError('INVALID_REQUEST', '%s', 400)
/** action_source longer than 64 characters after trimming and lowercasing (spec 7). */
export const InvalidActionSourceError = createError('INVALID_ACTION_SOURCE', '%s', 400)
/** The single endpoint's indicator value is not a valid indicator. */
export const InvalidIndicatorError = createError('INVALID_INDICATOR', '%s', 400)
/** More than 10,000 indicators in one bulk request (spec 8). */
export const TooManyIndicatorsError = createError('TOO_MANY_INDICATORS', '%s', 400)
/** Body larger than the configured limit. */
export const PayloadTooLargeError = createError('PAYLOAD_TOO_LARGE', '%s', 413)
/** Content-Type other than JSON or msgpack. */
export const UnsupportedMediaTypeError = createError('UNSUPPORTED_MEDIA_TYPE', '%s', 415)
/** Accept header that allows neither JSON nor msgpack. */
export const NotAcceptableError = createError('NOT_ACCEPTABLE', '%s', 406)
/** The request line's URL is longer than the service accepts. */
export const UriTooLongError = createError('URI_TOO_LONG', '%s', 414)
/** The request's headers are larger than the service accepts (Node's HTTP parser, answered in clientError). */
export const HeadersTooLargeError = createError('HEADERS_TOO_LARGE', '%s', 431)
/** The client did not send the whole request in time (IOC_REQUEST_TIMEOUT_MS / IOC_HEADERS_TIMEOUT_MS). */
export const RequestTimeoutError = createError('REQUEST_TIMEOUT', '%s', 408)
/** Route does not exist (also the retired history route). */
export const NotFoundError = createError('NOT_FOUND', '%s', 404)

// --- auth and quota --------------------------------------------------------------------------
/** No X-API-Key header. */
export const MissingApiKeyError = createError('MISSING_API_KEY', 'an API key is required in the X-API-Key header', 401)
/** A key was sent in the query string, where URLs end up in logs and proxies: refused, whatever the key. */
export const ApiKeyInQueryError = createError('API_KEY_IN_QUERY', 'API keys are not accepted in the URL; send the key in the X-API-Key header', 401)
/** X-API-Key does not match an active key. */
export const InvalidApiKeyError = createError('INVALID_API_KEY', 'the API key is not valid', 401)
/** The key lacks the route's permission. */
export const PermissionDeniedError = createError('PERMISSION_DENIED', 'the API key lacks the %s permission', 403)
/** A dashboard session cookie that names no live session (signed out, expired, or its user disabled). */
export const SessionExpiredError = createError('SESSION_EXPIRED', 'the dashboard session has ended; sign in again', 401)
/** Username or password wrong (never says which), or the user is disabled. */
export const InvalidCredentialsError = createError('INVALID_CREDENTIALS', 'username or password is wrong', 401)
/** A state-changing call with a session but without its CSRF token. */
export const CsrfError = createError('CSRF_FAILED', 'send the session\'s CSRF token in X-CSRF-Token', 403)
/** The key is restricted to networks the caller's address is not in. */
export const AddressNotAllowedError = createError('ADDRESS_NOT_ALLOWED', 'the API key may not be used from this address', 403)
/** The key's short-window rate limit is reached (Retry-After says when to retry). */
export const RateLimitedError = createError('RATE_LIMITED', '%s', 429)
/** The key's daily indicator quota cannot fit the request. */
export const QuotaExceededError = createError('QUOTA_EXCEEDED', '%s', 429)

// --- capacity and failures -------------------------------------------------------------------
/** In-flight bound reached, history spool full, or the service is shutting down. */
export const OverloadedError = createError('OVERLOADED', '%s', 503)
/** A scoring worker failed while handling this request. */
export const ScoringFailedError = createError('SCORING_FAILED', 'scoring failed for this request; it was not recorded and may be retried', 503)
/** A request needed the scoring pool after it began closing (shutdown); answered as 503 OVERLOADED. */
export const PoolClosedError = createError('POOL_CLOSED', 'the scoring pool is closed', 503)
/** Anything else: the message is logged, never sent. */
export const InternalError = createError('INTERNAL_ERROR', 'internal error', 500)

/** Codes that carry a Retry-After header. */
export const kRetryAfterCodes = new Set(['QUOTA_EXCEEDED', 'RATE_LIMITED', 'OVERLOADED', 'SCORING_FAILED'])

// --- internal: store and quota layer -----------------------------------------------------------
// Plain Error subclasses with a stable `code` and no Fastify dependency, so the stores, the history writer's
// thread and the CLI use them too; the HTTP error handler maps them onto the public codes above (toPublicError).
// Messages never carry a key, a secret or a connection string: callers may show them to operators.

/** Stable codes of store errors; `INVALID_REQUEST` is the public 400 code, the others are internal. */
export type StoreErrorCode =
  | 'INVALID_REQUEST'
  | 'INVALID_KEY_OPTIONS'
  | 'INVALID_USER_OPTIONS'
  | 'INVALID_RECORD'
  | 'INVALID_OPTIONS'
  | 'STORE_CLOSED'
  | 'STORE_UNAVAILABLE'
  | 'STORE_ERROR'
  | 'QUOTA_UNAVAILABLE'

/** An error of the store or quota layer; `code` is stable, `message` is for humans. */
export class StoreError extends Error {
  readonly code: StoreErrorCode

  constructor (code: StoreErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'StoreError'
    this.code = code
  }
}

/**
 * A history write after the history client was destroyed (the service is stopping now): refused before it reaches
 * the journal, so nothing refused is ever recorded. Answered 503 OVERLOADED.
 */
export class HistoryClosedError extends Error {
  readonly code = 'HISTORY_CLOSED'

  constructor (message = 'history is closed: the service is stopping', options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'HistoryClosedError'
  }
}

// --- public mapping --------------------------------------------------------------------------------
/** The body every error answer carries (API.md): Fastify's shape, `code` always present. */
export interface PublicError { status: number, code: string, message: string }

/** Fastify's own codes and internal codes, with the public answer each becomes. Anything not here and not public is 500. */
const kPublicOf: Readonly<Record<string, (err: { message: string }) => PublicError>> = {
  FST_ERR_CTP_BODY_TOO_LARGE: () => ({ status: 413, code: 'PAYLOAD_TOO_LARGE', message: 'request body is larger than the limit' }),
  FST_ERR_CTP_INVALID_MEDIA_TYPE: () => ({ status: 415, code: 'UNSUPPORTED_MEDIA_TYPE', message: 'send application/json or application/msgpack' }),
  FST_ERR_CTP_EMPTY_JSON_BODY: () => ({ status: 400, code: 'INVALID_REQUEST', message: 'body is empty' }),
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: () => ({ status: 400, code: 'INVALID_REQUEST', message: 'content-length does not match the body' }),
  POOL_CLOSED: () => ({ status: 503, code: 'OVERLOADED', message: 'service is shutting down; retry on another instance' }),
  HISTORY_CLOSED: () => ({ status: 503, code: 'OVERLOADED', message: 'service is shutting down; retry on another instance' }),
  STORE_UNAVAILABLE: () => ({ status: 503, code: 'OVERLOADED', message: 'the store is unavailable; retry shortly' }),
  QUOTA_UNAVAILABLE: () => ({ status: 503, code: 'OVERLOADED', message: 'the quota counter is unavailable; retry shortly' }),
  INVALID_KEY_OPTIONS: (err) => ({ status: 400, code: 'INVALID_REQUEST', message: err.message }),
  INVALID_USER_OPTIONS: (err) => ({ status: 400, code: 'INVALID_REQUEST', message: err.message }),
  FST_ERR_MAX_PARAM_LENGTH: () => ({ status: 414, code: 'URI_TOO_LONG', message: 'a path segment of the URL is too long' }),
  FST_ERR_BAD_URL: () => ({ status: 400, code: 'INVALID_REQUEST', message: 'the URL is not valid' }),
  INVALID_REQUEST: (err) => ({ status: 400, code: 'INVALID_REQUEST', message: err.message })
}

/** What toPublicError reads of an error: Fastify's, ours, or any thrown Error. */
export type ErrorLike = Error & Partial<Pick<FastifyError, 'code' | 'statusCode' | 'validation' | 'validationContext'>>

/** Public codes a 4xx or 503 error may carry as they are (the ones docs/API.md lists). */
const kPublicCodes = new Set([
  'INVALID_REQUEST', 'INVALID_ACTION_SOURCE', 'INVALID_INDICATOR', 'TOO_MANY_INDICATORS', 'PAYLOAD_TOO_LARGE',
  'UNSUPPORTED_MEDIA_TYPE', 'NOT_ACCEPTABLE', 'NOT_FOUND', 'MISSING_API_KEY', 'INVALID_API_KEY', 'API_KEY_IN_QUERY',
  'SESSION_EXPIRED', 'INVALID_CREDENTIALS', 'CSRF_FAILED', 'PERMISSION_DENIED', 'ADDRESS_NOT_ALLOWED', 'QUOTA_EXCEEDED',
  'RATE_LIMITED', 'OVERLOADED', 'SCORING_FAILED', 'URI_TOO_LONG', 'HEADERS_TOO_LARGE', 'REQUEST_TIMEOUT'
])

/** Refusals the service gives by design (capacity, quota, shutdown): logged at warn, without a stack. */
export const kExpectedRefusals = new Set(['OVERLOADED', 'QUOTA_EXCEEDED', 'RATE_LIMITED'])

/**
 * Maps any error to the public body: schema failures to INVALID_REQUEST, the table above, public codes as they are,
 * other client errors to INVALID_REQUEST, everything else to INTERNAL_ERROR (its message is logged, never sent).
 */
export function toPublicError (err: ErrorLike): PublicError {
  if (err.validation !== undefined) {
    return { status: 400, code: 'INVALID_REQUEST', message: `${err.validationContext ?? 'body'}${err.message.replace(/^(body|querystring|params|headers)/, '')}` }
  }
  const code = typeof err.code === 'string' ? err.code : ''
  const mapped = kPublicOf[code]
  if (mapped !== undefined) return mapped(err)
  const status = err.statusCode ?? 500
  if (kPublicCodes.has(code) && status >= 400 && status < 600 && status !== 500) return { status, code, message: err.message }
  if (status >= 400 && status < 500) return { status, code: 'INVALID_REQUEST', message: err.message }
  return { status: 500, code: 'INTERNAL_ERROR', message: 'internal error' }
}
