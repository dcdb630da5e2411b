/**
 * Content negotiation: JSON (default) and standard MessagePack request bodies, each checked by body-guard.ts (depth,
 * element count, prototype-pollution keys) in one pass linear in its size, and the response format from Accept.
 */
import { isUtf8 } from 'node:buffer'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { Unpackr } from 'msgpackr'
import { InvalidRequestError, NotAcceptableError, UnsupportedMediaTypeError } from '../errors.ts'
import { checkJsonBody, checkJsonText, checkMsgpackBody, type CountedMember } from './body-guard.ts'

/** Media types accepted for msgpack bodies and offered in responses. */
export const kMsgpackTypes = ['application/msgpack', 'application/x-msgpack', 'application/vnd.msgpack']
// After checkMsgpackBody a body holds standard types only; structuredClone: false refuses msgpackr's reference
// extensions even so, and 64-bit integers become numbers, as in JSON.
const kUnpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, structuredClone: false, int64AsType: 'number' })

/**
 * Bodies are read as sent: a compressed one would be parsed as garbage and answered "not valid JSON", so a coding
 * other than identity is refused as an unsupported media type (RFC 7694). Checked in the parsers, which run only for
 * a body and after the key check, so that no other request pays for it.
 */
function compressed (req: FastifyRequest): Error | null {
  const coding = req.headers['content-encoding']
  if (coding === undefined) return null
  const c = coding.trim().toLowerCase()
  return c === '' || c === 'identity' ? null : new UnsupportedMediaTypeError('compressed bodies are not accepted: send the body without Content-Encoding')
}

/**
 * Installs the JSON and msgpack body parsers (everything else is 415). `counted` names, per route URL, a top-level
 * array member the guard counts before its element limit (body-guard.ts CountedMember).
 */
export function registerParsers (app: FastifyInstance, counted: Readonly<Record<string, CountedMember>> = {}): void {
  const countedOf = (req: FastifyRequest): CountedMember | undefined => {
    const url = req.routeOptions.url
    return url === undefined || !Object.hasOwn(counted, url) ? undefined : counted[url]
  }
  app.removeAllContentTypeParsers()
  // JSON.parse makes every key an own data property (a "__proto__" key sets no prototype), so the walk finds and
  // refuses each forbidden key, escaped or not.
  // Read as bytes: JSON is UTF-8 (RFC 8259), and bytes that are not would be decoded to U+FFFD, so that an answer and
  // its history record would show a value other than the one sent. One native check (simdutf), then one decode.
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    const coded = compressed(req)
    if (coded !== null) {
      done(coded, undefined)
      return
    }
    const bytes = body as Buffer
    if (!isUtf8(bytes)) {
      done(new InvalidRequestError('body is not valid UTF-8'), undefined)
      return
    }
    const text = bytes.toString('utf8')
    let parsed: unknown
    const counted = countedOf(req)
    try {
      checkJsonText(text, counted === undefined)
    } catch (err) {
      done(err as Error, undefined)
      return
    }
    try {
      // A leading byte order mark (some Windows clients write one) is ignored, as RFC 8259 allows.
      parsed = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text)
    } catch {
      done(new InvalidRequestError('body is not valid JSON'), undefined)
      return
    }
    try {
      checkJsonBody(parsed, counted)
      done(null, parsed)
    } catch (err) {
      done(err as Error, undefined)
    }
  })
  app.addContentTypeParser(kMsgpackTypes, { parseAs: 'buffer' }, (req, body, done) => {
    const coded = compressed(req)
    if (coded !== null) {
      done(coded, undefined)
      return
    }
    let parsed: unknown
    try {
      checkMsgpackBody(body as Buffer, countedOf(req))
    } catch (err) {
      done(err as Error, undefined)
      return
    }
    try {
      parsed = kUnpackr.unpack(body as Buffer)
    } catch {
      done(new InvalidRequestError('body is not valid MessagePack'), undefined)
      return
    }
    done(null, parsed)
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
  let mediaTypes = 0
  for (const part of accept.split(',')) {
    const [rawType, ...params] = part.trim().split(';')
    const type = (rawType ?? '').trim().toLowerCase()
    if (type.includes('/')) mediaTypes++
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
  // A header that names no media type at all (`;;;`) is malformed: ignored, as if absent (RFC 9110 12.5.1).
  if (best === null && mediaTypes === 0) return 'json'
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
