/**
 * Routes leave the mapping of errors to toPublicError (src/errors.ts): `npm run lint` refuses a route that catches an
 * error and maps it by its class. These cases lint a source text as if it sat at a path in src/.
 */
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { test } from 'node:test'

// ESLint runs in a plain Node child (its dependencies do not load under the tsx loader).
const kLint = `
import { ESLint } from 'eslint'
const eslint = new ESLint()
const out = []
for (const [filePath, text] of JSON.parse(process.env.CASES)) {
  const [result] = await eslint.lintText(text, { filePath })
  out.push(result.messages.filter((m) => m.ruleId === 'no-restricted-syntax').length)
}
process.stdout.write(JSON.stringify(out))
`

const kRemap = `import { InvalidRequestError, StoreError } from '../errors.ts'

export async function page (list: () => Promise<string[]>): Promise<string[]> {
  try {
    return await list()
  } catch (err) {
    if (err instanceof StoreError && err.code === 'INVALID_REQUEST') throw new InvalidRequestError(err.message, { cause: err })
    throw err
  }
}
`
const kLetThrough = `export async function page (list: () => Promise<string[]>): Promise<string[]> {
  return await list()
}
`

const cases: Array<[string, string, number]> = [
  ['src/http/routes-example.ts', kRemap, 1],
  ['src/dashboard/routes.ts', kRemap, 1],
  ['src/http/routes-example.ts', kLetThrough, 0],
  ['src/store/example.ts', kRemap, 0]
]
const results = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', kLint], {
  env: { ...process.env, CASES: JSON.stringify(cases.map(([file, text]) => [file, text])) },
  encoding: 'utf8'
})) as number[]

cases.forEach(([file, text, errors], i) => {
  test(`lint ${errors > 0 ? 'refuses' : 'accepts'} ${text === kRemap ? 'an error mapped by its class' : 'an error let through'} in ${file}`, () => {
    assert.equal(results[i], errors)
  })
})
