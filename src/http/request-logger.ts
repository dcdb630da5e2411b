/**
 * The logger each request gets as `req.log` (Fastify's childLoggerFactory): a pino child with the request id, made
 * only when the request writes a line at an enabled level. Fastify makes a child per request before its hooks run; a
 * pino child copies its parent's state and serializes its bindings, which most requests (a verdict answered at the
 * default `warn` of a busy deployment, where no line is written) never use. Lines written through it are the eager
 * child's, byte for byte (test/http/request-logger.test.ts).
 */
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
