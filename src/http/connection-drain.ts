/**
 * How the HTTP server lets its connections go at shutdown (Fastify's preClose runs drain(), then the server stops
 * listening and its close waits for every connection to end):
 *
 * 1. From drain() on, `draining` is true: answers ask clients to close their keep-alive connections and new verdict
 *    requests are refused (app.ts). Clients with connections open get `noticeMs` to send on them and be told so,
 *    rather than have an idle connection closed under a request they are sending (a reset).
 * 2. Then a request still sending its body was never admitted (nothing scored or recorded): its connection is cut, so
 *    a client trickling an upload cannot hold the shutdown until its request timeout. Running requests finish and are
 *    answered.
 * 3. Once every answer is written out (handed to the socket), clients get `unreadGraceMs` to read them; then every
 *    connection still open is cut: a client that stopped reading its answer must not hold the server's close.
 *
 * Step 2 and 3 are checked whenever an answer is written out or its connection closes (no polling).
 */
import type { Server, ServerResponse } from 'node:http'

/** Timings of the drain, in ms. */
export interface DrainOptions {
  /** How long open connections are answered `Connection: close` before the server stops listening. */
  noticeMs: number
  /** Once every answer is written out, how long a connection may still take to deliver it before it is cut. */
  unreadGraceMs: number
}

/** The connections of one server, let go at shutdown. */
export class ConnectionDrain {
  private readonly server: Server
  private readonly options: DrainOptions
  /** Responses not yet delivered (nor their connection closed). */
  private readonly answering = new Set<ServerResponse>()
  private stage: 'serving' | 'notice' | 'cutting' = 'serving'
  private grace: NodeJS.Timeout | null = null

  constructor (server: Server, options: DrainOptions) {
    this.server = server
    this.options = options
  }

  /** True from drain() on. */
  get draining (): boolean {
    return this.stage !== 'serving'
  }

  /** Follows a response until its connection closes (call it as each request arrives). */
  track (res: ServerResponse): void {
    this.answering.add(res)
    // 'prefinish' is emitted when end() hands the last bytes to the socket, whether or not the client reads them.
    res.once('prefinish', () => { this.settle() })
    res.once('close', () => {
      this.answering.delete(res)
      this.settle()
    })
  }

  /** Gives open connections their notice, then lets the rest of the drain run on its own; resolves after the notice. */
  async drain (): Promise<void> {
    if (this.stage !== 'serving') return
    this.stage = 'notice'
    if (!this.server.listening) return
    const open = await new Promise<number>((resolve) => { this.server.getConnections((_err, n) => { resolve(n ?? 0) }) })
    if (open > 0) await new Promise((resolve) => setTimeout(resolve, this.options.noticeMs))
    this.stage = 'cutting'
    this.settle()
  }

  /** Cuts every connection now. */
  destroy (): void {
    if (this.grace !== null) clearTimeout(this.grace)
    this.server.closeAllConnections()
  }

  /** After the notice: cuts uploads still arriving; once no answer is being written, starts the grace for readers. */
  private settle (): void {
    if (this.stage !== 'cutting' || this.grace !== null) return
    let writing = false
    for (const res of this.answering) {
      if (res.writableEnded) continue
      if (!res.req.complete) res.req.socket.destroy()
      else writing = true
    }
    if (writing) return
    this.grace = setTimeout(() => { this.server.closeAllConnections() }, this.options.unreadGraceMs)
    this.grace.unref()
  }
}
