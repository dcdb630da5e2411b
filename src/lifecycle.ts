/**
 * The service's long-lived parts, started once in the order of a registry and stopped in the reverse order, from one
 * place (as Fastify closes plugins in reverse registration order, and undici's dispatcher-base.js owns its closed and
 * destroyed states once):
 *
 * - start(name, ...) starts the next part of the registry and records how it stops; a part's start that fails unwinds
 *   every part started before it, in reverse, and rethrows.
 * - close() closes the parts in reverse (drain, flush) within a budget; a part still closing when the budget is spent
 *   is destroyed, with every part after it in the close order.
 * - destroy(err) destroys the parts in reverse (stop now); a part with nothing to stop now is closed instead.
 *
 * Both are idempotent and each part is closed and destroyed at most once, whoever asks; once either has begun, no part
 * starts. A new long-lived part is a row of the registry (what starting, closing and destroying it does, shown in
 * docs/ARCHITECTURE.md) and one start() call at its place.
 */

import { LifecycleError } from './errors.ts'

/** A part as the registry describes it; lifecycleTable() renders these rows for docs/ARCHITECTURE.md. */
export interface PartSpec {
  /** Short name, used in logs. */
  name: string
  /** What starting it does. */
  start: string
  /** What its graceful close does. */
  close: string
  /** What destroying it does; '-' when it has nothing to stop now (then destroy closes it). */
  destroy: string
}

/** How a started part stops. Either may be absent; both must be idempotent. */
export interface PartStops {
  /** Graceful: drain and flush. */
  close?: () => Promise<void> | void
  /** Now: stop running work. */
  destroy?: (err?: Error) => Promise<void> | void
}

/** What the lifecycle logs. */
export interface LifecycleLogger {
  debug: (obj: object, msg: string) => void
  error: (obj: object, msg: string) => void
}

interface Started {
  spec: PartSpec
  stops: PartStops
  closing: Promise<void> | null
  /** Its close has finished: a destroy leaves it be. */
  closed: boolean
  destroying: Promise<void> | null
}

/** Parts started in registry order, stopped in reverse. */
export class Lifecycle {
  private readonly registry: readonly PartSpec[]
  private readonly logger: LifecycleLogger
  private readonly budgetMs: number
  private readonly started: Started[] = []
  private closing: Promise<void> | null = null
  private destroying: Promise<void> | null = null
  /** Settles when destroy() begins: a close waiting on a part stops waiting. */
  private readonly overtaken: Promise<'overtaken'>
  private overtake: () => void = () => {}

  /** `budgetMs`: longest close() waits for the parts to close before it destroys the rest. */
  constructor (registry: readonly PartSpec[], options: { budgetMs: number, logger: LifecycleLogger }) {
    const names = new Set(registry.map((p) => p.name))
    if (names.size !== registry.length) throw new TypeError('part names must be distinct')
    this.registry = registry
    this.budgetMs = options.budgetMs
    this.logger = options.logger
    this.overtaken = new Promise((resolve) => { this.overtake = () => resolve('overtaken') })
  }

  /** Names of the parts started so far, in start order. */
  get parts (): string[] {
    return this.started.map((p) => p.spec.name)
  }

  /**
   * Starts a part of the registry: after every part started so far in registry order (a part may be left out, never
   * moved). If `start` throws, the parts started before it are closed in reverse and the error is rethrown.
   * `stops` says how the started part closes and is destroyed; without it, the part's own close() and destroy().
   */
  async start<T extends PartStops> (name: string, start: () => Promise<T> | T): Promise<T>
  async start<T> (name: string, start: () => Promise<T> | T, stops: (part: T) => PartStops): Promise<T>
  async start<T> (name: string, start: () => Promise<T> | T, stops: (part: T) => PartStops = (part) => part as PartStops): Promise<T> {
    const at = this.registry.findIndex((p) => p.name === name)
    const last = this.started.length === 0 ? -1 : this.registry.indexOf((this.started.at(-1) as Started).spec)
    if (at === -1) throw new TypeError(`part ${name} is not in the registry`)
    if (at <= last) throw new TypeError(`part ${name} starts after ${(this.started.at(-1) as Started).spec.name}, against the registry's order`)
    if (this.closing !== null || this.destroying !== null) throw new LifecycleError('SERVICE_STOPPING', `part ${name} not started: the service is stopping`)
    let part: T
    try {
      part = await start()
    } catch (err) {
      this.logger.error({ part: name, err }, 'part failed to start; stopping the parts started before it')
      await this.close().catch(() => {})
      throw err
    }
    this.started.push({ spec: this.registry[at] as PartSpec, stops: stops(part), closing: null, closed: false, destroying: null })
    this.logger.debug({ part: name }, 'part started')
    return part
  }

  /**
   * Graceful: closes every started part in reverse order. A part whose close fails is logged and the next one closed
   * all the same; a part still closing when the budget is spent is destroyed, and so is every part after it. Rejects
   * (after all of that) with PART_NOT_CLOSED when a close failed or the budget was spent.
   */
  async close (): Promise<void> {
    this.closing ??= this.closeAll()
    await this.closing
  }

  /** Now: destroys every started part in reverse order (a close already running is overtaken). Idempotent. */
  async destroy (err?: Error): Promise<void> {
    if (this.destroying === null) {
      this.destroying = this.destroyAll(err)
      this.overtake()
    }
    await this.destroying
  }

  private async closeAll (): Promise<void> {
    let timer: NodeJS.Timeout | undefined
    const spent = new Promise<'spent'>((resolve) => { timer = setTimeout(() => resolve('spent'), this.budgetMs) })
    let failed: LifecycleError | null = null
    try {
      for (const part of [...this.started].reverse()) {
        if (this.destroying !== null) break
        const outcome = await Promise.race([this.closePart(part).then(() => 'closed' as const, (err: unknown) => ({ err })), spent, this.overtaken])
        if (outcome === 'overtaken') break
        if (outcome === 'spent') {
          this.logger.error({ part: part.spec.name, budget_ms: this.budgetMs }, 'closing took longer than its budget; destroying the parts not yet closed')
          failed ??= new LifecycleError('PART_NOT_CLOSED', `part ${part.spec.name} did not close within ${this.budgetMs} ms`)
          await this.destroy(failed)
          break
        }
        if (outcome !== 'closed') {
          this.logger.error({ part: part.spec.name, err: outcome.err }, 'part failed to close; closing the next')
          failed ??= new LifecycleError('PART_NOT_CLOSED', `part ${part.spec.name} failed to close`, { cause: outcome.err })
        }
      }
    } finally {
      clearTimeout(timer)
    }
    await this.destroying
    if (failed !== null) throw failed
  }

  private async destroyAll (err: Error | undefined): Promise<void> {
    for (const part of [...this.started].reverse()) {
      try {
        await this.destroyPart(part, err)
      } catch (e) {
        this.logger.error({ part: part.spec.name, err: e }, 'part failed to stop; stopping the next')
      }
    }
  }

  private async closePart (part: Started): Promise<void> {
    part.closing ??= (async () => {
      await part.stops.close?.()
      part.closed = true
      this.logger.debug({ part: part.spec.name }, 'part closed')
    })()
    await part.closing
  }

  /** A part without a destroy of its own is closed (or its running close awaited). */
  private async destroyPart (part: Started, err: Error | undefined): Promise<void> {
    if (part.closed) return
    if (part.stops.destroy === undefined) return await this.closePart(part)
    part.destroying ??= (async () => {
      await part.stops.destroy?.(err)
      this.logger.debug({ part: part.spec.name }, 'part destroyed')
    })()
    await part.destroying
  }
}

/** The registry as the Markdown table docs/ARCHITECTURE.md shows ("Lifecycle"), in start order. */
export function lifecycleTable (registry: readonly PartSpec[]): string {
  const cell = (s: string): string => s.replaceAll('|', '\\|')
  return [
    '| part | start (in this order) | close() (in reverse order) | destroy() (in reverse order) |',
    '|---|---|---|---|',
    ...registry.map((p) => `| ${p.name} | ${cell(p.start)} | ${cell(p.close)} | ${cell(p.destroy)} |`)
  ].join('\n')
}
