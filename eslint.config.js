import neostandard from 'neostandard'

export default [
  ...neostandard({ ts: true, ignores: ['node_modules/**', 'dist/**', 'data/run/**', 'bench/results/**', '.scratch/**'] }),
  {
    rules: {
      // `void promise` marks a deliberately unawaited call (timers, message handlers); keep it legal as a statement.
      'no-void': ['error', { allowAsStatement: true }]
    }
  }
]
