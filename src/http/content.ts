/**
 * Content negotiation: JSON (default) and standard MessagePack request bodies, the response format from
 * Accept, and a guard against prototype-pollution keys anywhere in a body.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { Unpackr } from 'msgpackr'
import { InvalidRequestError, NotAcceptableError } from '../errors.ts'

/** Media types accepted for msgpack bodies and offered in responses. */
export const kMsgpackTypes = ['application/msgpack', 'application/x-msgpack', 'application/vnd.msgpack']
const kForbiddenKeys = new Set(['__proto__', 'constructor', 'prototype'])
// msgpackr renames a "__proto__" key to "__proto_" instead of assigning the prototype; reject that too.
const kForbiddenMsgpackKeys = new Set([...kForbiddenKeys, '__proto_'])
const kUnpackr = new Unpackr({ useRecords: false, mapsAsObjects: true })
/** Deepest nesting accepted, so a hostile body cannot exhaust the stack while being checked. */
const kMaxDepth = 64

/** Throws INVALID_REQUEST when any object key in the value could pollute a prototype. */
export function assertNoForbiddenKeys (value: unknown, forbidden = kForbiddenKeys, depth = 0): void {
  if (value === null || typeof value !== 'object') return
  if (depth > kMaxDepth) throw new InvalidRequestError(`body is nested deeper than ${kMaxDepth} levels`)
  if (Array.isArray(value)) {
    for (const v of value) if (v !== null && typeof v === 'object') assertNoForbiddenKeys(v, forbidden, depth + 1)
    return
  }
  if (value instanceof Uint8Array) return
  for (const key of Object.keys(value)) {
    // msgpackr hands "__proto__" over renamed to "__proto_": name the key the client sent.
    if (forbidden.has(key)) throw new InvalidRequestError(`forbidden key "${key === '__proto_' ? '__proto__' : key}" in body`)
    const v = (value as Record<string, unknown>)[key]
    if (v !== null && typeof v === 'object') assertNoForbiddenKeys(v, forbidden, depth + 1)
  }
}

/** Installs the JSON and msgpack body parsers (everything else is 415). */
export function registerParsers (app: FastifyInstance): void {
  app.removeAllContentTypeParsers()
  // JSON.parse makes every key an own data property (a "__proto__" key sets no prototype), so the walk below finds
  // and refuses each forbidden key, escaped or not. (secure-json-parse, used before, also scanned the whole body text
  // twice with regular expressions for the same keys.)
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    let parsed: unknown
    try {
      parsed = JSON.parse(body as string)
    } catch {
      done(new InvalidRequestError('body is not valid JSON'), undefined)
      return
    }
    try {
      assertNoForbiddenKeys(parsed)
      done(null, parsed)
    } catch (err) {
      done(err as Error, undefined)
    }
  })
  app.addContentTypeParser(kMsgpackTypes, { parseAs: 'buffer' }, (_req, body, done) => {
    let parsed: unknown
    try {
      parsed = kUnpackr.unpack(body as Buffer)
    } catch {
      done(new InvalidRequestError('body is not valid MessagePack'), undefined)
      return
    }
    try {
      assertNoForbiddenKeys(parsed, kForbiddenMsgpackKeys)
      done(null, parsed)
    } catch (err) {
      done(err as Error, undefined)
    }
  })
}

/** Answer formats: every route speaks JSON and msgpack; the bulk route also NDJSON and CSV. */
export type AnswerFormat = 'json' | 'msgpack' | 'ndjson' | 'csv'

const kNdjsonTypes = ['application/x-ndjson', 'application/ndjson', 'application/jsonl']
const kCsvTypes = ['text/csv']

function formatOf (type: string, extra: boolean): AnswerFormat | null {
  if (kMsgpackTypes.includes(type)) return 'msgpack'
  if (type === 'application/json' || type === 'application/*' || type === '*/*') return 'json'
  if (extra && kNdjsonTypes.includes(type)) return 'ndjson'
  if (extra && (kCsvTypes.includes(type) || type === 'text/*')) return 'csv'
  return null
}

/** The preferred format the Accept header allows (JSON when absent or tied); NOT_ACCEPTABLE when it allows none. */
function negotiate (req: FastifyRequest, extra: boolean): AnswerFormat {
  const accept = req.headers.accept
  if (accept === undefined || accept === '') return 'json'
  let best: AnswerFormat | null = null
  let bestQ = 0
  for (const part of accept.split(',')) {
    const [rawType, ...params] = part.trim().split(';')
    const type = (rawType ?? '').trim().toLowerCase()
    let q = 1
    for (const p of params) {
      const [k, v] = p.trim().split('=')
      if (k === 'q' && v !== undefined) q = Number(v)
    }
    if (!(q > 0)) continue
    const fmt = formatOf(type, extra)
    if (fmt !== null && (q > bestQ || (q === bestQ && fmt === 'json'))) {
      best = fmt
      bestQ = q
    }
  }
  if (best === null) {
    throw new NotAcceptableError(extra
      ? 'bulk answers are available as application/json, application/msgpack, application/x-ndjson and text/csv'
      : 'only application/json and application/msgpack responses are available')
  }
  return best
}

/** Response format from the Accept header: msgpack only when asked for and preferred over JSON. */
export function responseFormat (req: FastifyRequest): 'json' | 'msgpack' {
  return negotiate(req, false) as 'json' | 'msgpack'
}

/** The bulk route's response format: JSON, msgpack, NDJSON (one result item per line) or CSV (one row per item). */
export function bulkResponseFormat (req: FastifyRequest): AnswerFormat {
  return negotiate(req, true)
}
