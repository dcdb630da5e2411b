/**
 * Errors raised by the persistence layer. Plain Error subclasses with a stable `code`, so the HTTP layer can map
 * them onto the central error codes (src/errors.ts) without the store depending on Fastify.
 * Messages never carry a key, a secret or a connection string: callers may show them to operators.
 */

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
