/**
 * Counts what the suite checks, to compare two versions of it: per test file the assert calls written
 * (`assert.` and `t.assert.` calls in the source) and the test() / t.test() / it() declarations; optionally, from a
 * TAP report of a run (`--test-reporter=tap`), the tests that ran and passed.
 *
 *   node --import tsx test/tools/count-assertions.ts [report.tap]
 */
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'

const kRoot = join(import.meta.dirname, '..')

function testFiles (dir: string): string[] {
  const out: string[] = []
  for (const name of readdirSync(dir)) {
    const p = join(dir, name)
    if (statSync(p).isDirectory()) out.push(...testFiles(p))
    else if (name.endsWith('.test.ts')) out.push(p)
  }
  return out.sort()
}

let asserts = 0
let declared = 0
for (const file of testFiles(kRoot)) {
  const text = readFileSync(file, 'utf8')
  const a = text.match(/\bassert\.[a-zA-Z]+\(/g)?.length ?? 0
  const d = text.match(/\b(?:test|it|t\.test)\(/g)?.length ?? 0
  asserts += a
  declared += d
  console.log(`${String(a).padStart(5)} ${String(d).padStart(4)}  ${relative(kRoot, file)}`)
}
console.log(`${String(asserts).padStart(5)} ${String(declared).padStart(4)}  total (assert calls, test declarations)`)

const report = process.argv[2]
if (report !== undefined) {
  const tap = readFileSync(report, 'utf8')
  const summary = (name: string): number => Number(tap.match(new RegExp(`^# ${name} ([\\d.]+)$`, 'm'))?.[1] ?? NaN)
  console.log(`run: ${summary('tests')} tests, ${summary('pass')} passed, ${summary('fail')} failed, ${summary('skipped')} skipped, ` +
    `${summary('duration_ms')} ms`)
}
