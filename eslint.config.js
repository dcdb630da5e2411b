import neostandard from 'neostandard'

/**
 * Rooms of src/, top to bottom: a room may import the rooms below it, never one above (docs/ARCHITECTURE.md).
 * app.ts, service.ts and main.ts compose everything and are imported by nothing but each other; errors.ts,
 * config.ts and worker-entry.ts are leaves any room may import, except bytes/ and engine/, which import nothing of ours
 * but bytes/.
 */
const kRooms = ['cli', 'dashboard', 'http', 'bulk', 'fleet', 'pool', 'intel', 'store', 'history', 'engine', 'bytes']
const kRoots = ['app', 'service', 'main']
const kLeaves = ['errors', 'config', 'worker-entry']

/** Forbidden targets per room (names of rooms and top-level modules of src/). */
function forbidden (room) {
  const above = kRooms.slice(0, kRooms.indexOf(room))
  const pure = room === 'engine' || room === 'bytes'
  return [...above, ...kRoots, ...(pure ? kLeaves : []), ...(room === 'bytes' ? ['engine'] : [])]
}

/** A regex matching an import specifier that climbs out of a file `depth` folders below src/ into one of `names`. */
function climbing (depth, names) {
  return `^(\\.\\./){${depth}}(${names.join('|')})(/|\\.ts$)`
}

function roomRules (room) {
  const names = forbidden(room)
  return [1, 2, 3].map((depth) => ({
    files: [`src/${room}/${'*/'.repeat(depth - 1)}*.ts`],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [{ regex: climbing(depth, names), message: `src/${room}/ may not import ${names.join(', ')}: imports run one way (docs/ARCHITECTURE.md)` }]
      }]
    }
  }))
}

export default [
  ...neostandard({ ts: true, ignores: ['node_modules/**', 'dist/**', '.cache/**', 'data/run/**', 'bench/results/**', '.scratch/**'] }),
  {
    rules: {
      // `void promise` marks a deliberately unawaited call (timers, message handlers); keep it legal as a statement.
      'no-void': ['error', { allowAsStatement: true }]
    }
  },
  ...kRooms.flatMap(roomRules),
  {
    // Routes throw or let errors through; toPublicError (src/errors.ts) maps every code to its public answer, once.
    files: ['src/http/**/*.ts', 'src/dashboard/**/*.ts'],
    rules: {
      'no-restricted-syntax': ['error', {
        selector: 'CatchClause BinaryExpression[operator="instanceof"]',
        message: 'do not map an error by its class in a route: let it through to toPublicError (src/errors.ts), whose tables map every code'
      }]
    }
  },
  {
    // Worker threads never load Fastify or the composition roots.
    files: ['workers/*.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [{ regex: `^\\.\\./src/(http/|${kRoots.join('\\.ts|')}\\.ts)`, message: 'workers may not import the HTTP layer or the composition roots' }]
      }]
    }
  }
]
