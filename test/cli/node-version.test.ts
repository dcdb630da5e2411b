/**
 * The Node.js version check that runs before the service or the test runner loads anything: on an older Node the
 * SQLite driver crashes the process with a segmentation fault and no message, so the command says what to do instead.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { nodeVersionProblem, requiredNode } from '../../bin/node-version.js'
import { serviceEnv } from '../helper.ts'

const kRoot = join(import.meta.dirname, '..', '..')

test('the version required is package.json\'s engines.node, and this Node meets it', () => {
  const engines = (JSON.parse(readFileSync(join(kRoot, 'package.json'), 'utf8')) as { engines: { node: string } }).engines.node
  const { major, minor } = requiredNode()
  assert.equal(engines, `>=${major}.${minor}`)
  assert.equal(nodeVersionProblem(process.versions.node), null)
})

test('older versions get a message naming both versions and the way out; the lowest and newer ones none', () => {
  const required = { major: 22, minor: 12 }
  for (const old of ['20.20.2', '22.11.0', '18.0.0', '21.99.99', '0.10.48']) {
    const problem = nodeVersionProblem(old, required)
    assert.ok(problem !== null, old)
    assert.match(problem, /needs Node\.js 22\.12 or later/)
    assert.ok(problem.includes(`this is Node.js ${old}`), problem)
    assert.match(problem, /scripts\/node-runtime\.sh env 24/)
  }
  for (const ok of ['22.12.0', '22.23.3', '23.0.0', '24.21.0', '26.12.1', '100.0.0']) assert.equal(nodeVersionProblem(ok, required), null, ok)
})

// The machine's own Node at /usr/bin/node, when it is older than required: the launcher says so and exits 1.
const kSystemNode = '/usr/bin/node'
const systemVersion = existsSync(kSystemNode) ? spawnSync(kSystemNode, ['-p', 'process.versions.node'], { encoding: 'utf8' }).stdout.trim() : ''
const systemTooOld = /^\d+\.\d+/.test(systemVersion) && nodeVersionProblem(systemVersion) !== null

test('the launcher on an older Node prints the problem and exits 1, not a crash', { skip: systemTooOld ? false : `no Node older than required at ${kSystemNode}` }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'ioc-verdict-old-node-'))
  try {
    const r = spawnSync(kSystemNode, [join(kRoot, 'bin', 'ioc-verdict.js'), 'serve'], {
      env: serviceEnv({ IOC_DATA_DIR: dir, IOC_PORT: '0' }), encoding: 'utf8', timeout: 60_000
    })
    assert.equal(r.status, 1, `${r.signal ?? ''} ${r.stderr}`)
    assert.ok(r.stderr.includes(`this is Node.js ${systemVersion}`), r.stderr)
    assert.equal(r.stdout, '')
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
