/**
 * A request's logger (src/http/request-logger.ts): its lines are pino's eager child's, byte for byte, and no child is
 * made for a request that writes nothing at an enabled level.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import pino from 'pino'
import { RequestLogger, requestLogger } from '../../src/http/request-logger.ts'

/** A pino logger as the service makes one (redaction, an err serializer), writing its lines into `lines`. */
function logger (level: string, lines: string[]): pino.Logger {
  return pino({
    level,
    timestamp: false,
    base: { pid: 1, hostname: 'h' },
    serializers: { err: pino.stdSerializers.err },
    redact: { paths: ['req.headers["x-api-key"]'], censor: '[redacted]' }
  }, { write: (line: string) => { lines.push(line) } })
}

test('lines written through a request logger are the eager child\'s, at every level', () => {
  for (const level of ['trace', 'info', 'warn', 'silent']) {
    const lazyLines: string[] = []
    const eagerLines: string[] = []
    const lazy = requestLogger(logger(level, lazyLines), { reqId: 'r-1' }, {}) as RequestLogger
    const eager = logger(level, eagerLines).child({ reqId: 'r-1' })
    assert.ok(lazy instanceof RequestLogger)
    const err = Object.assign(new Error('boom'), { code: 'E_X' })
    for (const l of [lazy, eager]) {
      l.trace('t')
      l.debug({ a: 1 }, 'd')
      l.info({ req: { headers: { 'x-api-key': 'secret' } } }, 'incoming %s', 'request')
      l.warn({ code: 'OVERLOADED' }, 'request refused')
      l.error({ err }, 'request failed')
      l.fatal('f')
      l.child({ sub: 1 }).warn('from a child')
    }
    // The error's stack holds the line it was made on: the same error was written by both.
    assert.deepEqual(lazyLines, eagerLines, `level ${level}`)
    assert.equal(lazy.level, level)
    assert.equal(lazy.isLevelEnabled('warn'), level !== 'silent')
  }
})

test('no pino child is made until a line is written at an enabled level', () => {
  const lines: string[] = []
  const lazy = requestLogger(logger('warn', lines), { reqId: 'r-2' }, {}) as RequestLogger
  lazy.info('not written')
  lazy.debug({ a: 1 }, 'not written')
  assert.equal(lazy.made, false)
  assert.deepEqual(lines, [])
  lazy.warn('written')
  assert.equal(lazy.made, true)
  assert.equal((JSON.parse(String(lines[0])) as { reqId: string }).reqId, 'r-2')
})

test('a route that sets its own level or serializers gets pino\'s own child', () => {
  const lines: string[] = []
  const child = requestLogger(logger('warn', lines), { reqId: 'r-3' }, { level: 'info' })
  assert.ok(!(child instanceof RequestLogger))
  child.info('written at the route\'s level')
  assert.equal(lines.length, 1)
})
