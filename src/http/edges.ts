/**
 * The edges of HTTP that Fastify's routes never see: errors Node's HTTP parser raises before a request exists
 * (headers too large, URL too long, a client too slow, malformed requests) get the documented JSON error body;
 * keys sent in the query string are refused; URLs are redacted before they reach a log line.
 */
import { STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyRequest } from 'fastify'
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import { ApiKeyInQueryError, UriTooLongError } from '../errors.ts'
import { addressAllowed, canonicalCidr } from '../store/index.ts'

/** Query parameter names that carry a key in other services' APIs. */
const kKeyParams = new Set(['api_key', 'apikey', 'api-key', 'key', 'x-api-key', 'x_api_key', 'access_token', 'token'])
/** Longest URL accepted (request line target), in bytes; routes take no more than a few hundred. */
export const kMaxUrlLength = 8192

/** An absolute-form request target's scheme and user information (`http://user:password@`). */
const kUserInfo = /^([A-Za-z][A-Za-z0-9+.-]*:\/\/)[^/?#]*@/

/** An API key's form (`iocv_` then its id and secret), as a path segment may hold one pasted by mistake. */
const kKeyInPath = /iocv_[A-Za-z0-9_-]+/g

/**
 * A URL as logs may show it: the path, and no query string or user information (either may carry secrets; a client
 * may send an absolute URL, `http://user:password@host/path`, as its request target), nor anything of an API key's
 * form in the path (`DELETE /api/v2/mgmt/keys/<the key>` where its id was meant).
 */
export function redactUrl (url: string | undefined): string | undefined {
  if (url === undefined) return undefined
  const q = url.indexOf('?')
  let path = q === -1 ? url : `${url.slice(0, q)}?[redacted]`
  // A key may be percent-encoded in part or whole (%69ocv_..., ...%2D...): looked for in the decoded path, which is
  // then the one shown.
  if (path.includes('%')) {
    try {
      const decoded = decodeURIComponent(path)
      if (decoded.includes('iocv_')) path = decoded
    } catch {
      // Not decodable: shown as sent, minus anything of a key's form in it.
    }
  }
  if (path.includes('iocv_')) path = path.replace(kKeyInPath, 'iocv_[redacted]')
  return path.charCodeAt(0) === 47 ? path : path.replace(kUserInfo, '$1[redacted]@') // 47: '/', the usual origin form
}

/** Throws for a URL over kMaxUrlLength and for any key in the query string (the app's first onRequest check). */
export function guardUrl (req: FastifyRequest): void {
  const url = req.raw.url ?? ''
  if (url.length > kMaxUrlLength) throw new UriTooLongError(`the URL is longer than ${kMaxUrlLength} bytes`)
  const q = url.indexOf('?')
  if (q === -1) return
  for (const pair of url.slice(q + 1).split('&')) {
    const eq = pair.indexOf('=')
    let name = eq === -1 ? pair : pair.slice(0, eq)
    try {
      name = decodeURIComponent(name.replace(/\+/g, ' '))
    } catch {
      // Undecodable: compared as sent.
    }
    const lower = name.trim().toLowerCase()
    // `apikey` is also search-history's filter on a key id (iocv_<id>_<secret> minus the secret): refused only when
    // it holds a whole key.
    if (lower === 'apikey' && !/^iocv_[^_]+_./.test(pairValue(pair, eq))) continue
    if (kKeyParams.has(lower)) throw new ApiKeyInQueryError()
  }
}

/** The decoded value of a query pair (as sent when undecodable). */
function pairValue (pair: string, eq: number): string {
  const raw = eq === -1 ? '' : pair.slice(eq + 1)
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '))
  } catch {
    return raw
  }
}

/** What clientError hands over: the parser's error, sometimes with the bytes it was parsing. */
export type ParserError = Error & { code?: string, rawPacket?: unknown }

/** The status, code and message of a parser-level client error. */
function describe (err: ParserError): { status: number, code: string, message: string } {
  switch (err.code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 408, code: 'REQUEST_TIMEOUT', message: 'the request was not received in time' }
    case 'HPE_HEADER_OVERFLOW': {
      // The limit covers the request line too: a request line longer than kMaxUrlLength (or one with no end in
      // sight) is a URL too long.
      const raw = err.rawPacket
      const eol = Buffer.isBuffer(raw) ? raw.indexOf('\n') : 0
      if (eol === -1 || eol > kMaxUrlLength) {
        return { status: 414, code: 'URI_TOO_LONG', message: 'the URL is too long' }
      }
      return { status: 431, code: 'HEADERS_TOO_LARGE', message: 'the request headers are too large' }
    }
    default:
      return { status: 400, code: 'INVALID_REQUEST', message: 'the request is not valid HTTP' }
  }
}

/**
 * Fastify's clientErrorHandler: writes the documented error body (status, code, error, message) with
 * `Connection: close`, then closes the socket once the answer is flushed.
 */
export function clientErrorHandler (err: ParserError, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return
  if (!socket.writable) {
    socket.destroy()
    return
  }
  const { status, code, message } = describe(err)
  const body = JSON.stringify({ statusCode: status, code, error: STATUS_CODES[status] ?? 'Error', message })
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\nContent-Type: application/json; charset=utf-8\r\n` +
    `X-Content-Type-Options: nosniff\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`)
  // A client still sending would otherwise hold the socket: it is closed once the answer is out, or after a bound.
  setTimeout(() => socket.destroy(), 5_000).unref()
}

/** Longest a connection is kept reading (and dropping) the rest of a refused request's body, in ms. */
const kLingerMs = 10_000
/** Most bytes of a refused request's body read and dropped before the connection is closed anyway. */
const kLingerBytes = 64 * 1024 * 1024

/**
 * Lingering close for answers sent before the request's body was read (413, 415, 400, 401...): Node closes such a
 * connection once the answer is written, and a close with unread bytes resets it, so a client still writing its
 * body sees EPIPE or ECONNRESET instead of the answer. Here the answer is followed by a half-close (FIN), and the rest
 * of the body is read and dropped until the client has sent it all, kLingerBytes were dropped, or kLingerMs passed;
 * then the connection closes. The client finishes writing and reads the answer.
 */
export function lingerIfUnread (req: IncomingMessage): void {
  if (req.complete) return
  const socket = req.socket as Socket & { destroySoon?: () => void }
  if (socket === null || socket.destroyed) return
  let dropped = 0
  let timer: NodeJS.Timeout | null = null
  const close = (): void => {
    if (timer !== null) clearTimeout(timer)
    socket.destroy()
  }
  req.on('data', (chunk: Buffer) => {
    dropped += chunk.length
    if (dropped > kLingerBytes) close()
  })
  req.on('error', () => {})
  req.resume()
  socket.destroySoon = function lingeringClose (): void {
    if (req.complete) {
      socket.end()
      socket.once('finish', () => socket.destroy())
      return
    }
    socket.end() // the answer, then FIN; reading goes on
    timer = setTimeout(close, kLingerMs)
    timer.unref()
    req.once('end', () => { setTimeout(close, 1_000).unref() })
    socket.once('close', () => { if (timer !== null) clearTimeout(timer) })
  }
}

/**
 * At most `most` open connections per peer address: one more is closed as it arrives, before any byte is read. The
 * server's own bound (maxConnections) counts every client together, so one client opening thousands of idle
 * connections would otherwise lock every other out. The counts live as long as their connections.
 */
export function limitConnectionsPerAddress (server: Server, most: number, proxies: readonly string[] | null = null): void {
  const open = new Map<string, number>()
  // Trusted reverse proxies (IOC_TRUST_PROXY) carry every client's connections: they are not bounded as one client.
  const proxyNets = (proxies ?? []).flatMap((p) => canonicalCidr(p) ?? [])
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? ''
    if (proxyNets.length > 0 && addressAllowed(address, proxyNets)) return
    const n = (open.get(address) ?? 0) + 1
    if (n > most) {
      socket.destroy()
      return
    }
    open.set(address, n)
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1
      if (left <= 0) open.delete(address)
      else open.set(address, left)
    })
  })
}

/** Requests of one connection whose answers are not yet out, at most (HTTP/1.1 pipelining). */
export const kMaxPipelined = 16
/** Answers waiting behind an earlier one of their connection, over all connections, at most. */
export const kMaxQueuedAnswers = 1024
const kPending = Symbol('answers of this connection not yet out')

/**
 * Bounds HTTP/1.1 pipelining. Node reads a whole chunk of a connection (64 KiB: some 1,800 small GETs) before it
 * stops reading for backpressure, and each request's answer is then built and held in memory until the ones before
 * it have gone out: a client that sends thousands of GETs of a large answer (the OpenAPI document, the metrics) and
 * never reads held about 190 MB per connection, and 40 connections without a key exhausted the heap. A connection
 * with more than kMaxPipelined answers pending, or one whose waiting answer would pass kMaxQueuedAnswers over all
 * connections, is closed; its requests not yet handled are dropped unanswered.
 */
export class PipelineGuard {
  #queued = 0

  /** Whether the request whose answer is `res` may be handled (false: its connection is closed). */
  admit (socket: Socket | null, res: ServerResponse): boolean {
    if (socket === null || socket.destroyed === true) return false
    const s = socket as Socket & { [kPending]?: number }
    const n = (s[kPending] ?? 0) + 1
    const queued = n > 1
    if (n > kMaxPipelined || (queued && this.#queued >= kMaxQueuedAnswers)) {
      socket.destroy()
      return false
    }
    s[kPending] = n
    if (queued) this.#queued++
    res.once('close', () => {
      s[kPending] = (s[kPending] ?? 1) - 1
      if (queued) this.#queued--
    })
    return true
  }
}
