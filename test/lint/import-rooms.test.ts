/**
 * The one-way import rule of docs/ARCHITECTURE.md is enforced by `npm run lint`: these cases lint a source text as if
 * it sat at a path in src/ and check that a back-arrow is an error and a down-arrow is not.
 */
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { test } from 'node:test'

// ESLint runs in a plain Node child (its dependencies do not load under the tsx loader), once for every case.
const kLint = `
import { ESLint } from 'eslint'
const eslint = new ESLint()
const out = []
for (const [filePath, specifier] of JSON.parse(process.env.CASES)) {
  const [result] = await eslint.lintText("import { x } from '" + specifier + "'\\n\\nexport const y = x\\n", { filePath })
  out.push(result.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message))
}
process.stdout.write(JSON.stringify(out))
`

const backArrows: Array<[string, string]> = [
  ['src/engine/score.ts', '../http/auth.ts'],
  ['src/engine/snapshot/snapshot.ts', '../../intel/compile.ts'],
  ['src/engine/normalize/ip.ts', '../../config.ts'],
  ['src/bytes/byte-sink.ts', '../engine/index.ts'],
  ['src/bytes/fnv.ts', '../errors.ts'],
  ['src/history/block.ts', '../store/index.ts'],
  ['src/store/sqlite.ts', '../pool/scoring-pool.ts'],
  ['src/intel/feeds/plain.ts', '../../pool/intel-service.ts'],
  ['src/pool/score-chunk.ts', '../bulk/chunk.ts'],
  ['src/bulk/chunk.ts', '../http/schemas.ts'],
  ['src/fleet/fleet.ts', '../bulk/allowlist.ts'],
  ['src/pool/intel-service.ts', '../fleet/fleet.ts'],
  ['src/http/auth.ts', '../app.ts'],
  ['src/http/routes-verdict.ts', '../cli/score-file.ts'],
  ['workers/scoring.ts', '../src/http/content.ts']
]

const downArrows: Array<[string, string]> = [
  ['src/http/auth.ts', '../store/index.ts'],
  ['src/bulk/merge.ts', '../bytes/byte-sink.ts'],
  ['src/pool/score-chunk.ts', '../history/codec.ts'],
  ['src/fleet/fleet.ts', '../pool/intel-service.ts'],
  ['src/bulk/verdicts.ts', '../fleet/fleet.ts'],
  ['src/store/sqlite.ts', '../history/block.ts'],
  ['src/engine/snapshot/hash.ts', '../../bytes/fnv.ts'],
  ['src/engine/score.ts', './snapshot/format.ts'],
  ['src/history/rows.ts', '../errors.ts'],
  ['workers/history.ts', '../src/history/codec.ts']
]

const cases = [...backArrows, ...downArrows]
const results = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', kLint], {
  env: { ...process.env, CASES: JSON.stringify(cases) },
  encoding: 'utf8'
})) as string[][]

backArrows.forEach(([file, specifier], i) => {
  test(`lint refuses ${file} importing ${specifier}`, () => {
    assert.equal(results[i]?.length, 1, `expected one no-restricted-imports error, got ${JSON.stringify(results[i])}`)
  })
})

downArrows.forEach(([file, specifier], i) => {
  test(`lint allows ${file} importing ${specifier}`, () => {
    assert.deepEqual(results[backArrows.length + i], [])
  })
})
