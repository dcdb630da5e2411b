/**
 * Every error code, in one place: the public codes the service answers with (docs/API.md), made with @fastify/error,
 * and the internal codes of its own parts (kInternalCodes), with the public answer each becomes. toPublicError is the
 * one mapping from any error to the public body, which keeps Fastify's shape: {statusCode, code, error, message}.
 */
import createError from '@fastify/error'
import type { FastifyError } from 'fastify'

/** Public codes a 4xx or 503 error may carry as they are (the ones docs/API.md lists): every publicError below. */
const kPublicCodes = new Set<string>()

/** A public error class (createError), its code listed as public. */
function publicError<C extends string, SC extends number> (code: C, message: string, status: SC): createError.FastifyErrorConstructor<{ code: C, statusCode: SC }> {
  kPublicCodes.add(code)
  return createError(code, message, status)
}

// --- request shape ---------------------------------------------------------------------------
/** Body failed schema validation, or is not parseable. */
export const InvalidRequestError = publicError('INVALID_REQUEST', '%s', 400)
/** action_source longer than 64 characters after trimming and lowercasing. */
export const InvalidActionSourceError = publicError('INVALID_ACTION_SOURCE', '%s', 400)
/** The single endpoint's indicator value is not a valid indicator. */
export const InvalidIndicatorError = publicError('INVALID_INDICATOR', '%s', 400)
/** More than 10,000 indicators in one bulk request. */
export const TooManyIndicatorsError = publicError('TOO_MANY_INDICATORS', '%s', 400)
/** Body larger than the configured limit. */
export const PayloadTooLargeError = publicError('PAYLOAD_TOO_LARGE', '%s', 413)
/** Content-Type other than JSON or msgpack. */
export const UnsupportedMediaTypeError = publicError('UNSUPPORTED_MEDIA_TYPE', '%s', 415)
/** Accept header that allows neither JSON nor msgpack. */
export const NotAcceptableError = publicError('NOT_ACCEPTABLE', '%s', 406)
/** The request line's URL is longer than the service accepts. */
export const UriTooLongError = publicError('URI_TOO_LONG', '%s', 414)
/** The request's headers are larger than the service accepts (Node's HTTP parser, answered in clientError). */
export const HeadersTooLargeError = publicError('HEADERS_TOO_LARGE', '%s', 431)
/** The client did not send the whole request in time (IOC_REQUEST_TIMEOUT_MS / IOC_HEADERS_TIMEOUT_MS). */
export const RequestTimeoutError = publicError('REQUEST_TIMEOUT', '%s', 408)
/** Route does not exist (also the retired history route). */
export const NotFoundError = publicError('NOT_FOUND', '%s', 404)

// --- auth and quota --------------------------------------------------------------------------
/** No X-API-Key header. */
export const MissingApiKeyError = publicError('MISSING_API_KEY', 'an API key is required in the X-API-Key header', 401)
/** A key was sent in the query string, where URLs end up in logs and proxies: refused, whatever the key. */
export const ApiKeyInQueryError = publicError('API_KEY_IN_QUERY', 'API keys are not accepted in the URL; send the key in the X-API-Key header', 401)
/** X-API-Key does not match an active key. */
export const InvalidApiKeyError = publicError('INVALID_API_KEY', 'the API key is not valid', 401)
/** The key (or a dashboard session's role) lacks the route's permission. */
export const PermissionDeniedError = publicError('PERMISSION_DENIED', 'the API key or dashboard session lacks the %s permission', 403)
/** A dashboard session cookie that names no live session (signed out, expired, or its user disabled). */
export const SessionExpiredError = publicError('SESSION_EXPIRED', 'the dashboard session has ended; sign in again', 401)
/** Username or password wrong (never says which), or the user is disabled. */
export const InvalidCredentialsError = publicError('INVALID_CREDENTIALS', 'username or password is wrong', 401)
/** A state-changing call with a session but without its CSRF token. */
export const CsrfError = publicError('CSRF_FAILED', 'send the session\'s CSRF token in X-CSRF-Token', 403)
/** The key is restricted to networks the caller's address is not in. */
export const AddressNotAllowedError = publicError('ADDRESS_NOT_ALLOWED', 'the API key may not be used from this address', 403)
/** The key's short-window rate limit is reached (Retry-After says when to retry). */
export const RateLimitedError = publicError('RATE_LIMITED', '%s', 429)
/** The key's daily indicator quota cannot fit the request. */
export const QuotaExceededError = publicError('QUOTA_EXCEEDED', '%s', 429)

// --- capacity and failures -------------------------------------------------------------------
/** In-flight bound reached, history journal full, or the service is shutting down. */
export const OverloadedError = publicError('OVERLOADED', '%s', 503)
/** A scoring worker failed while handling this request. */
export const ScoringFailedError = publicError('SCORING_FAILED', 'scoring failed for this request; it was not recorded and may be retried', 503)
/** Anything else: the message is logged, never sent. */
export const InternalError = publicError('INTERNAL_ERROR', 'internal error', 500)

/** Codes that carry a Retry-After header. */
export const kRetryAfterCodes = new Set(['QUOTA_EXCEEDED', 'RATE_LIMITED', 'OVERLOADED', 'SCORING_FAILED'])

// --- internal codes ----------------------------------------------------------------------------
// Errors of the service's own parts: a stable `code` from kInternalCodes, a message for operators, and the error they
// wrap as `cause`. No Fastify dependency, so threads and the CLI use them too. Messages never carry a key, a secret or
// a connection string: operators read them, and a client does wherever the table sends the error's own message.

/** The body every error answer carries (API.md): Fastify's shape, `code` always present. */
export interface PublicError { status: number, code: string, message: string }
/** The public answer a code becomes; `message: null` sends the error's own message. */
interface Answer { status: number, code: string, message: string | null }

const kShuttingDown: Answer = { status: 503, code: 'OVERLOADED', message: 'service is shutting down; retry on another instance' }
const kHistoryBusy: Answer = { status: 503, code: 'OVERLOADED', message: 'history cannot be recorded now; retry shortly' }
const kClientInput: Answer = { status: 400, code: 'INVALID_REQUEST', message: null }

/**
 * Every internal code, in one table (as undici's lib/core/errors.js keeps its codes): what it means, and the public
 * answer it becomes when it reaches a request (toPublicError). A code without an answer is a fault: 500
 * INTERNAL_ERROR, its message logged and never sent.
 */
export const kInternalCodes = {
  // configuration and start
  CONFIG_INVALID: { meaning: 'a setting is unknown, malformed or out of its bounds (at start)', answer: null },
  DATA_DIR_IN_USE: { meaning: 'another running instance holds the data directory (at start)', answer: null },
  PART_NOT_CLOSED: { meaning: 'a part of the service failed to close, or was destroyed when the close budget was spent', answer: null },
  SERVICE_STOPPING: { meaning: 'a part was to start after the service began stopping', answer: null },
  // scoring
  POOL_CLOSED: { meaning: 'a request needed the scoring pool after it began closing', answer: kShuttingDown },
  // history
  HISTORY_CLOSED: { meaning: 'a history write after the history client was destroyed', answer: kShuttingDown },
  HISTORY_COMMIT_FAILED: { meaning: 'a request\'s history was not durable within IOC_HISTORY_COMMIT_TIMEOUT_MS', answer: kHistoryBusy },
  JOURNAL_REFUSED: { meaning: 'the history journal is closed or cannot be written (a full disk)', answer: kHistoryBusy },
  // stores and quota
  INVALID_REQUEST: { meaning: 'input the store refuses (a bad cursor or date): the client\'s mistake', answer: kClientInput },
  INVALID_KEY_OPTIONS: { meaning: 'options of a new API key that the store refuses', answer: kClientInput },
  INVALID_USER_OPTIONS: { meaning: 'options of a new dashboard user that the store refuses', answer: kClientInput },
  INVALID_RECORD: { meaning: 'a stored history part of an unknown format', answer: null },
  INVALID_OPTIONS: { meaning: 'store or quota options that name no known kind', answer: null },
  STORE_CLOSED: { meaning: 'a store call after the store was closed', answer: null },
  STORE_UNAVAILABLE: { meaning: 'the store cannot be reached', answer: { status: 503, code: 'OVERLOADED', message: 'the store is unavailable; retry shortly' } },
  STORE_ERROR: { meaning: 'the store failed otherwise', answer: null },
  QUOTA_UNAVAILABLE: { meaning: 'the quota counter (Redis) cannot be reached', answer: { status: 503, code: 'OVERLOADED', message: 'the quota counter is unavailable; retry shortly' } },
  // fetched feeds: the feed's status and the log show these, never a request's answer
  FEED_FETCH_FAILED: { meaning: 'a feed download failed for good (after its retries) or was stopped', answer: null },
  FEED_VARIABLE_MISSING: { meaning: 'a feed\'s headers name an environment variable that is not set', answer: null },
  FEED_ZIP_REFUSED: { meaning: 'a zip feed body is no archive, lacks its member, or inflates past max_bytes', answer: null },
  // the fleet: health and the log show it, never a request's answer
  FLEET_SNAPSHOT_INVALID: { meaning: 'the intel snapshot the fleet\'s leader published cannot be read or does not match its digest', answer: null }
} as const satisfies Record<string, { meaning: string, answer: Answer | null }>

/** An internal code (kInternalCodes). */
export type InternalCode = keyof typeof kInternalCodes

/** The base of every internal error: a code of kInternalCodes, a message for operators, and the cause it wraps. */
export class IocVerdictError<C extends InternalCode = InternalCode> extends Error {
  readonly code: C

  constructor (code: C, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = new.target.name
    this.code = code
  }
}

/** Codes of store and quota errors. */
export type StoreErrorCode = 'INVALID_REQUEST' | 'INVALID_KEY_OPTIONS' | 'INVALID_USER_OPTIONS' | 'INVALID_RECORD' | 'INVALID_OPTIONS' |
  'STORE_CLOSED' | 'STORE_UNAVAILABLE' | 'STORE_ERROR' | 'QUOTA_UNAVAILABLE'

/** An error of the store or quota layer. */
export class StoreError extends IocVerdictError<StoreErrorCode> {}

/** A published fleet snapshot that cannot be read or verified (src/fleet/snapshots.ts); the follower keeps its own. */
export class FleetSnapshotError extends IocVerdictError<'FLEET_SNAPSHOT_INVALID'> {
  constructor (message: string, options?: { cause?: unknown }) {
    super('FLEET_SNAPSHOT_INVALID', message, options)
  }
}

/** A configuration problem, reported at start. */
export class ConfigError extends IocVerdictError<'CONFIG_INVALID'> {
  constructor (message: string, options?: { cause?: unknown }) {
    super('CONFIG_INVALID', message, options)
  }
}

/** The data directory is used by another running instance. */
export class DataDirInUseError extends IocVerdictError<'DATA_DIR_IN_USE'> {
  constructor (message: string) {
    super('DATA_DIR_IN_USE', message)
  }
}

/** The lifecycle (src/lifecycle.ts): a part that did not close as it should, or a start while stopping. */
export class LifecycleError extends IocVerdictError<'PART_NOT_CLOSED' | 'SERVICE_STOPPING'> {}

/** A request needed the scoring pool after it began closing (shutdown). */
export class PoolClosedError extends IocVerdictError<'POOL_CLOSED'> {
  constructor (message = 'the scoring pool is closed') {
    super('POOL_CLOSED', message)
  }
}

/**
 * A history write after the history client was destroyed (the service is stopping now): refused before it reaches
 * the journal, so nothing refused is ever recorded.
 */
export class HistoryClosedError extends IocVerdictError<'HISTORY_CLOSED'> {
  constructor (message = 'history is closed: the service is stopping', options?: { cause?: unknown }) {
    super('HISTORY_CLOSED', message, options)
  }
}

/** A request's history could not be made durable in time. */
export class HistoryCommitError extends IocVerdictError<'HISTORY_COMMIT_FAILED'> {
  constructor (message: string) {
    super('HISTORY_COMMIT_FAILED', message)
  }
}

/** The journal refuses an append: it is closed, or its writes fail. */
export class JournalRefusedError extends IocVerdictError<'JOURNAL_REFUSED'> {
  constructor (message: string, options?: { cause?: unknown }) {
    super('JOURNAL_REFUSED', message, options)
  }
}

/** A feed download that failed for good; `reason` is a short code, the message already scrubbed of secrets. */
export class FeedFetchError extends IocVerdictError<'FEED_FETCH_FAILED'> {
  readonly reason: string
  constructor (reason: string, message: string) {
    super('FEED_FETCH_FAILED', message)
    this.reason = reason
  }
}

/** A feed's headers name an environment variable that is not set. */
export class MissingVariableError extends IocVerdictError<'FEED_VARIABLE_MISSING'> {
  readonly variable: string
  constructor (variable: string) {
    super('FEED_VARIABLE_MISSING', `environment variable ${variable} (named in the feed's headers) is not set`)
    this.variable = variable
  }
}

/** Why a zip body was refused; `reason` is a short code, the message names no secret (only member names and sizes). */
export class ZipError extends IocVerdictError<'FEED_ZIP_REFUSED'> {
  readonly reason: 'bad_zip' | 'zip_member' | 'oversize'
  constructor (reason: ZipError['reason'], message: string) {
    super('FEED_ZIP_REFUSED', message)
    this.reason = reason
  }
}

// --- public mapping --------------------------------------------------------------------------------
/** Fastify's own codes, with the public answer each becomes. */
const kFastifyCodes: Readonly<Record<string, Answer>> = {
  FST_ERR_CTP_BODY_TOO_LARGE: { status: 413, code: 'PAYLOAD_TOO_LARGE', message: 'request body is larger than the limit' },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { status: 415, code: 'UNSUPPORTED_MEDIA_TYPE', message: 'send application/json or application/msgpack' },
  FST_ERR_CTP_EMPTY_JSON_BODY: { status: 400, code: 'INVALID_REQUEST', message: 'body is empty' },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { status: 400, code: 'INVALID_REQUEST', message: 'content-length does not match the body' },
  FST_ERR_MAX_PARAM_LENGTH: { status: 414, code: 'URI_TOO_LONG', message: 'a path segment of the URL is too long' },
  FST_ERR_BAD_URL: { status: 400, code: 'INVALID_REQUEST', message: 'the URL is not valid' }
}

/** The answer the tables give a code: an Answer, null (an internal fault: 500), or undefined (in neither table). */
function answerOf (code: string): Answer | null | undefined {
  if (Object.hasOwn(kInternalCodes, code)) return kInternalCodes[code as InternalCode].answer
  return kFastifyCodes[code]
}

/** What toPublicError reads of an error: Fastify's, ours, or any thrown Error. */
export type ErrorLike = Error & Partial<Pick<FastifyError, 'code' | 'statusCode' | 'validation' | 'validationContext'>>

const kInternal: PublicError = Object.freeze({ status: 500, code: 'INTERNAL_ERROR', message: 'internal error' })

/** Refusals the service gives by design (capacity, quota, shutdown): logged at warn, without a stack. */
export const kExpectedRefusals = new Set(['OVERLOADED', 'QUOTA_EXCEEDED', 'RATE_LIMITED'])

/**
 * Maps any error to the public body: schema failures to INVALID_REQUEST, internal and Fastify codes by their tables,
 * public codes as they are, other client errors to INVALID_REQUEST, everything else to INTERNAL_ERROR (its message is
 * logged, never sent). Routes throw or let errors through and leave the mapping to this function.
 */
export function toPublicError (err: ErrorLike): PublicError {
  if (err.validation !== undefined) {
    return { status: 400, code: 'INVALID_REQUEST', message: `${err.validationContext ?? 'body'}${err.message.replace(/^(body|querystring|params|headers)/, '')}` }
  }
  const code = typeof err.code === 'string' ? err.code : ''
  const answer = answerOf(code)
  if (answer !== undefined) {
    return answer === null ? kInternal : { status: answer.status, code: answer.code, message: answer.message ?? err.message }
  }
  const status = err.statusCode ?? 500
  if (kPublicCodes.has(code) && status >= 400 && status < 600 && status !== 500) return { status, code, message: err.message }
  // A framework 403 without a code of ours: @fastify/static refusing a path out of its root (`/dashboard/%2e%2e/x`),
  // which is a file that is not there.
  if (status === 403) return { status: 404, code: 'NOT_FOUND', message: 'no such file' }
  if (status >= 400 && status < 500) return { status, code: 'INVALID_REQUEST', message: err.message }
  return kInternal
}

/**
 * The codes along an error's causes, outermost first (a journal refusal: `JOURNAL_REFUSED`, then the disk's `ENOSPC`),
 * or undefined without any: what an operator needs of a refusal's cause, with no message or stack. A cause without a
 * code is named by its class (`TypeError`).
 */
export function causeCodes (err: unknown): string[] | undefined {
  const codes: string[] = []
  let cause = (err as { cause?: unknown }).cause
  for (let depth = 0; depth < 4 && cause !== null && typeof cause === 'object'; depth++) {
    const code = (cause as { code?: unknown }).code
    const name = typeof code === 'string' ? code : cause instanceof Error ? cause.name : null
    if (name !== null && name.length <= 64) codes.push(name)
    cause = (cause as { cause?: unknown }).cause
  }
  return codes.length > 0 ? codes : undefined
}
