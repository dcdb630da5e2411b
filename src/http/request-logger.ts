/**
 * The logger each request gets as `req.log` (Fastify's childLoggerFactory): a pino child with the request id, made
 * only when the request writes a line at an enabled level. Fastify makes a child per request before its hooks run; a
 * pino child copies its parent's state and serializes its bindings, which a request that writes no line never uses
 * (at `warn`, where no access line is written). Lines written through it are the eager child's, byte for byte
 * (test/http/request-logger.test.ts).
 */
import { LogController, type FastifyReply, type FastifyRequest } from 'fastify'
import type { Bindings, ChildLoggerOptions, Level, Logger } from 'pino'

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

/**
 * Fastify's per-request log lines, one per request: `request completed` (or `request errored`) at `info`, when the
 * answer is sent, with the request (method, URL with its query redacted, client address), the status and the time
 * taken. Fastify's own `incoming request` line, written as each request arrives, is at `debug`: at `info` it doubled
 * the lines of a busy service for nothing the completion line lacks (two lines cost single calls about a fifth of
 * their rate, docs/PERFORMANCE.md). A request that never completes is still seen at `debug`.
 */
export class AccessLog extends LogController {
  override incomingRequest (request: FastifyRequest): void {
    if (this.isLogDisabled(request)) return
    request.log.debug({ req: request }, 'incoming request')
  }

  override requestCompleted (error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (this.isLogDisabled(request)) return
    if (error !== null && error !== undefined) {
      reply.log.error({ req: request, res: reply, err: error, responseTime: reply.elapsedTime }, 'request errored')
    } else {
      reply.log.info({ req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed')
    }
  }
}
