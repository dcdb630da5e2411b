/**
 * Every error code the service returns (docs/API.md), in one place.
 * Bodies keep Fastify's shape: {statusCode, code, error, message}.
 */
import createError from '@fastify/error'

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
/** Route does not exist (also the retired history route). */
export const NotFoundError = createError('NOT_FOUND', '%s', 404)

// --- auth and quota --------------------------------------------------------------------------
/** No X-API-Key header. */
export const MissingApiKeyError = createError('MISSING_API_KEY', 'an API key is required in the X-API-Key header', 401)
/** X-API-Key does not match an active key. */
export const InvalidApiKeyError = createError('INVALID_API_KEY', 'the API key is not valid', 401)
/** The key lacks the route's permission. */
export const PermissionDeniedError = createError('PERMISSION_DENIED', 'the API key lacks the %s permission', 403)
/** The key's daily indicator quota cannot fit the request. */
export const QuotaExceededError = createError('QUOTA_EXCEEDED', '%s', 429)

// --- capacity and failures -------------------------------------------------------------------
/** In-flight bound reached, history spool full, or the service is shutting down. */
export const OverloadedError = createError('OVERLOADED', '%s', 503)
/** A scoring worker failed while handling this request. */
export const ScoringFailedError = createError('SCORING_FAILED', 'scoring failed for this request; it was not recorded and may be retried', 503)
/** Anything else: the message is logged, never sent. */
export const InternalError = createError('INTERNAL_ERROR', 'internal error', 500)

/** Codes that carry a Retry-After header. */
export const kRetryAfterCodes = new Set(['QUOTA_EXCEEDED', 'OVERLOADED', 'SCORING_FAILED'])

// --- internal: store and quota layer -----------------------------------------------------------
// Plain Error subclasses with a stable `code` and no Fastify dependency, so the stores, the history writer's
// thread and the CLI use them too; the HTTP error handler maps them onto the public codes above (toPublicError).
// Messages never carry a key, a secret or a connection string: callers may show them to operators.

/** Stable codes of store errors; `INVALID_REQUEST` is the public 400 code, the others are internal. */
export type StoreErrorCode =
  | 'INVALID_REQUEST'
  | 'INVALID_KEY_OPTIONS'
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
