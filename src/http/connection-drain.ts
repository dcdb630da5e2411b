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

/** A followed response: a node of the drain's list of responses not yet delivered. */
interface Followed {
  res: ServerResponse | null
  prev: Followed | null
  next: Followed | null
}

/** The connections of one server, let go at shutdown. */
export class ConnectionDrain {
  private readonly server: Server
  private readonly options: DrainOptions
  /**
   * Responses not yet delivered (nor their connection closed), newest first, as a list through nodes made per
   * response, not a Set: a Set kept for the server's life reaches the old generation, and each time it rehashed its
   * table (every few dozen additions and removals) the dead table went on pointing at the responses then in flight.
   * The young generation's collections count such pointers as live until a full collection, so every response, its
   * request and its headers were promoted: about 2 KB of every single verdict call (docs/PERFORMANCE.md). A node
   * taken out of the list points at nothing.
   */
  private head: Followed | null = null
  private stage: 'serving' | 'notice' | 'cutting' = 'serving'
  private grace: NodeJS.Timeout | null = null

  /** The server's own closeIdleConnections (see the constructor). */
  private readonly closeIdle: () => void

  constructor (server: Server, options: DrainOptions) {
    this.server = server
    this.options = options
    // Node's server.close() (and Fastify's close) first destroys the connections it counts as idle, and it counts one
    // whose answer was ended but still waits in the socket's buffer (a client slow to read it) as idle: that answer
    // would be cut at once instead of getting the grace. While such an answer is followed after the notice, the idle
    // close is left to the grace's closeAllConnections, or done as soon as the last such answer is delivered.
    const closeIdle = server.closeIdleConnections.bind(server)
    this.closeIdle = closeIdle
    server.closeIdleConnections = () => { if (this.stage !== 'cutting' || !this.unread()) closeIdle() }
  }

  /** True from drain() on. */
  get draining (): boolean {
    return this.stage !== 'serving'
  }

  /** Follows a response until its connection closes (call it as each request arrives). */
  track (res: ServerResponse): void {
    const node: Followed = { res, prev: null, next: this.head }
    if (this.head !== null) this.head.prev = node
    this.head = node
    // 'prefinish' is emitted when end() hands the last bytes to the socket, whether or not the client reads them.
    res.once('prefinish', () => { this.settle() })
    res.once('close', () => {
      this.unlink(node)
      if (this.stage === 'cutting' && !this.unread()) this.closeIdle()
      this.settle()
    })
  }

  /** Whether an answer ended by the server is still not handed to the socket in full (its client reads slowly). */
  private unread (): boolean {
    for (let f = this.head; f !== null; f = f.next) if (f.res !== null && f.res.writableEnded && !f.res.writableFinished) return true
    return false
  }

  /** Responses followed now (not yet delivered, connection open). */
  get following (): number {
    let n = 0
    for (let f = this.head; f !== null; f = f.next) n++
    return n
  }

  private unlink (node: Followed): void {
    if (node.prev !== null) node.prev.next = node.next
    else if (this.head === node) this.head = node.next
    if (node.next !== null) node.next.prev = node.prev
    node.prev = null
    node.next = null
    node.res = null
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
    // Collected first: destroying a socket may close its response, which takes its node out of the list.
    const responses: ServerResponse[] = []
    for (let f = this.head; f !== null; f = f.next) if (f.res !== null) responses.push(f.res)
    for (const res of responses) {
      if (res.writableEnded) continue
      if (!res.req.complete) res.req.socket.destroy()
      else writing = true
    }
    if (writing) return
    this.grace = setTimeout(() => { this.server.closeAllConnections() }, this.options.unreadGraceMs)
    this.grace.unref()
  }
}
