/**
 * toPublicError (src/errors.ts) is the one mapping from any error to the public body: one case per code it knows.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import * as errors from '../../src/errors.ts'

type Case = [string, errors.ErrorLike, { status: number, code: string }]

const fastify = (code: string, statusCode: number): errors.ErrorLike => Object.assign(new Error('x'), { code, statusCode })

const cases: Case[] = [
  ['a schema failure', Object.assign(new Error('body must have property indicator'), { code: 'FST_ERR_VALIDATION', statusCode: 400, validation: [], validationContext: 'body' as const }), { status: 400, code: 'INVALID_REQUEST' }],
  ['a body over the limit', fastify('FST_ERR_CTP_BODY_TOO_LARGE', 413), { status: 413, code: 'PAYLOAD_TOO_LARGE' }],
  ['an unknown content type', fastify('FST_ERR_CTP_INVALID_MEDIA_TYPE', 415), { status: 415, code: 'UNSUPPORTED_MEDIA_TYPE' }],
  ['an empty JSON body', fastify('FST_ERR_CTP_EMPTY_JSON_BODY', 400), { status: 400, code: 'INVALID_REQUEST' }],
  ['a wrong content-length', fastify('FST_ERR_CTP_INVALID_CONTENT_LENGTH', 400), { status: 400, code: 'INVALID_REQUEST' }],
  ['another Fastify client error', fastify('FST_ERR_CTP_INVALID_JSON_BODY', 400), { status: 400, code: 'INVALID_REQUEST' }],
  ['a closed pool', new errors.PoolClosedError(), { status: 503, code: 'OVERLOADED' }],
  ['a write to destroyed history', new errors.HistoryClosedError(), { status: 503, code: 'OVERLOADED' }],
  ['an unavailable store', new errors.StoreError('STORE_UNAVAILABLE', 'down'), { status: 503, code: 'OVERLOADED' }],
  ['an unavailable quota counter', new errors.StoreError('QUOTA_UNAVAILABLE', 'down'), { status: 503, code: 'OVERLOADED' }],
  ['bad key options', new errors.StoreError('INVALID_KEY_OPTIONS', 'quota must be a non-negative integer'), { status: 400, code: 'INVALID_REQUEST' }],
  ['bad user options', new errors.StoreError('INVALID_USER_OPTIONS', 'password too short'), { status: 400, code: 'INVALID_REQUEST' }],
  ['a store-level bad filter', new errors.StoreError('INVALID_REQUEST', 'limit must be an integer'), { status: 400, code: 'INVALID_REQUEST' }],
  ['a store error with an internal code', new errors.StoreError('STORE_ERROR', 'secret detail'), { status: 500, code: 'INTERNAL_ERROR' }],
  ['a plain Error', new Error('boom at /srv/app.ts:1'), { status: 500, code: 'INTERNAL_ERROR' }],
  ['an uncoded 503', Object.assign(new Error('x'), { statusCode: 503 }), { status: 500, code: 'INTERNAL_ERROR' }],
  ...([
    [errors.InvalidRequestError, 400], [errors.InvalidActionSourceError, 400], [errors.InvalidIndicatorError, 400],
    [errors.TooManyIndicatorsError, 400], [errors.PayloadTooLargeError, 413], [errors.UnsupportedMediaTypeError, 415],
    [errors.NotAcceptableError, 406], [errors.NotFoundError, 404], [errors.MissingApiKeyError, 401],
    [errors.InvalidApiKeyError, 401], [errors.PermissionDeniedError, 403], [errors.QuotaExceededError, 429],
    [errors.OverloadedError, 503], [errors.ScoringFailedError, 503], [errors.AddressNotAllowedError, 403],
    [errors.RateLimitedError, 429], [errors.SessionExpiredError, 401], [errors.InvalidCredentialsError, 401], [errors.CsrfError, 403]
  ] as const).map(([E, status]): Case => {
    const e = new E('m')
    return [`public code ${e.code}`, e, { status, code: e.code }]
  })
]

for (const [what, err, expected] of cases) {
  test(`${what} is answered ${expected.status} ${expected.code}`, () => {
    const pub = errors.toPublicError(err)
    assert.deepEqual({ status: pub.status, code: pub.code }, expected)
    if (expected.status === 500) assert.equal(pub.message, 'internal error', 'a 500 never shows its cause')
  })
}

/** One instance of every internal error class, each with the code it carries. */
const kInternalErrors: errors.IocVerdictError[] = [
  new errors.StoreError('STORE_ERROR', 'm'), new errors.ConfigError('m'), new errors.DataDirInUseError('m'), new errors.PoolClosedError(),
  new errors.HistoryClosedError(), new errors.HistoryCommitError('m'), new errors.JournalRefusedError('m'), new errors.FeedFetchError('timeout', 'm'),
  new errors.MissingVariableError('FEED_KEY'), new errors.ZipError('bad_zip', 'm'), new errors.LifecycleError('PART_NOT_CLOSED', 'm'),
  new errors.FleetSnapshotError('m')
]

test('every internal code is answered as its row of the code table says, and a fault as 500 without its message', () => {
  const codes = Object.keys(errors.kInternalCodes) as errors.InternalCode[]
  assert.ok(codes.length >= 18)
  for (const code of codes) {
    const { answer } = errors.kInternalCodes[code]
    const pub = errors.toPublicError(new errors.IocVerdictError(code, `detail of ${code}`))
    if (answer === null) {
      assert.deepEqual(pub, { status: 500, code: 'INTERNAL_ERROR', message: 'internal error' }, code)
    } else {
      assert.deepEqual(pub, { status: answer.status, code: answer.code, message: answer.message ?? `detail of ${code}` }, code)
    }
  }
})

test('every internal error class carries its code, a message, its name and the cause it wraps', () => {
  for (const err of kInternalErrors) {
    assert.ok(err instanceof errors.IocVerdictError)
    assert.ok(Object.hasOwn(errors.kInternalCodes, err.code), `${err.name}: ${err.code} is in the table`)
    assert.equal(err.name, err.constructor.name)
    assert.ok(err.message.length > 0)
  }
  const cause = new Error('disk full')
  assert.equal(new errors.JournalRefusedError('cannot write', { cause }).cause, cause)
  assert.equal(new errors.StoreError('STORE_UNAVAILABLE', 'down', { cause }).cause, cause)
})
