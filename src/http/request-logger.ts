/**
 * The logger each request gets as `req.log` (Fastify's childLoggerFactory): a pino child with the request id, made
 * only when the request writes a line at an enabled level. Fastify makes a child per request before its hooks run; a
 * pino child copies its parent's state and serializes its bindings, which a request that writes no line never uses
 * (at `warn`, where no access line is written). Lines written through it are the eager child's, byte for byte
 * (test/http/request-logger.test.ts).
 */
import { LogController, type FastifyReply, type FastifyRequest } from 'fastify'
import pino, { type Bindings, type ChildLoggerOptions, type DestinationStream, type Level, type Logger } from 'pino'
import { redactUrl } from './edges.ts'

type Write = (...args: unknown[]) => void

/** A request's logger whose pino child is made on its first enabled line. */
export class RequestLogger {
  readonly #parent: Logger
  readonly #bindings: Bindings
  #child: Logger | null = null

  constructor (parent: Logger, bindings: Bindings) {
    this.#parent = parent
    this.#bindings = bindings
  }

  /** Whether the pino child has been made (a line was written, or a child of this logger asked for). */
  get made (): boolean {
    return this.#child !== null
  }

  #write (level: Level, args: unknown[]): void {
    if (!this.#parent.isLevelEnabled(level)) return
    this.#child ??= this.#parent.child(this.#bindings)
    ;(this.#child[level] as Write).apply(this.#child, args)
  }

  get level (): string {
    return this.#parent.level
  }

  isLevelEnabled (level: string): boolean {
    return this.#parent.isLevelEnabled(level)
  }

  fatal (...args: unknown[]): void { this.#write('fatal', args) }
  error (...args: unknown[]): void { this.#write('error', args) }
  warn (...args: unknown[]): void { this.#write('warn', args) }
  info (...args: unknown[]): void { this.#write('info', args) }
  debug (...args: unknown[]): void { this.#write('debug', args) }
  trace (...args: unknown[]): void { this.#write('trace', args) }
  silent (): void {}

  child (bindings: Bindings, options?: ChildLoggerOptions): Logger {
    this.#child ??= this.#parent.child(this.#bindings)
    return this.#child.child(bindings, options)
  }
}

/**
 * Fastify's childLoggerFactory: a RequestLogger, or pino's own child when the route changes the level or the
 * serializers (no route of this service does; such a child is made as Fastify would make it).
 */
export function requestLogger (parent: Logger, bindings: Bindings, options: ChildLoggerOptions): Logger | RequestLogger {
  if (options.level !== undefined || options.serializers !== undefined) return parent.child(bindings, options)
  return new RequestLogger(parent, bindings)
}

/** A request as its log lines show it: never its query string or headers (keys, cookies). */
export function requestSerializer (req: { method?: string, url?: string, ip?: string, socket?: { remotePort?: number | undefined } }): object {
  return { method: req.method, url: redactUrl(req.url), remoteAddress: req.ip, remotePort: req.socket?.remotePort }
}

/**
 * Fastify's per-request log lines, one per request: `request completed` at `info`, when the answer is sent, with the
 * request (requestSerializer), the status and the time taken; `request errored` at `error` when the answer failed.
 * Fastify's own `incoming request` line, written as each request arrives, is at `debug`: at `info` it doubled the
 * lines of a busy service for nothing the completion line lacks (docs/PERFORMANCE.md). A request that never
 * completes is still seen at `debug`.
 *
 * The completion line is written by a logger of its own on the service logger's destination, with its level and base
 * fields, and without its redaction: the line holds only what is built here (the serialized request, the status, the
 * time and the request id, never a header, a query string or a body), so redaction, which walks every line's object
 * for the service's wildcard paths, had nothing to find there, and cost a single call about 8 us. Nor does a request
 * need its pino child for it. Every other line, `request errored` included, goes through the service's logger.
 */
export class AccessLog extends LogController {
  readonly #lines: Logger

  constructor (logger: Logger) {
    super()
    const stream = (logger as unknown as Record<symbol, DestinationStream>)[pino.symbols.streamSym]
    this.#lines = pino({ level: logger.level }, stream)
  }

  override incomingRequest (request: FastifyRequest): void {
    if (this.isLogDisabled(request)) return
    request.log.debug({ req: request }, 'incoming request')
  }

  override requestCompleted (error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (this.isLogDisabled(request)) return
    if (error !== null && error !== undefined) {
      reply.log.error({ req: request, res: reply, err: error, responseTime: reply.elapsedTime }, 'request errored')
    } else if (this.#lines.isLevelEnabled('info')) {
      this.#lines.info({ reqId: request.id, req: requestSerializer(request), res: { statusCode: reply.statusCode }, responseTime: reply.elapsedTime }, 'request completed')
    }
  }
}
