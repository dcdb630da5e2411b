/**
 * `ioc-verdict score FILE` and `score -`, run as the CLI a user runs (a child process): plain lines, CSV and NDJSON in,
 * NDJSON or CSV out, per-item errors for bad lines, streaming from stdin.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { kTestIntelCache, serviceEnv } from '../helper.ts'

type Json = Record<string, any>

const kMain = join(import.meta.dirname, '..', '..', 'bin', 'ioc-verdict.js')
const dir = mkdtempSync(join(tmpdir(), 'ioc-verdict-test-cli-'))
after(() => rmSync(dir, { recursive: true, force: true }))

interface Run { code: number | null, stdout: string, stderr: string }

/** Runs the CLI with `args`; `stdin` is written and closed (or left to the test through `feed`). */
async function cli (args: string[], stdin = '', feed?: (child: ReturnType<typeof spawn>) => Promise<void>): Promise<Run> {
  const child = spawn(process.execPath, [kMain, ...args], {
    env: serviceEnv({ IOC_DATA_DIR: join(dir, 'data'), IOC_INTEL_CACHE_DIR: kTestIntelCache, IOC_LOG_LEVEL: 'silent' }),
    stdio: ['pipe', 'pipe', 'pipe']
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (b: Buffer) => { stdout += b.toString() })
  child.stderr.on('data', (b: Buffer) => { stderr += b.toString() })
  const exited = new Promise<number | null>((resolve) => child.once('close', resolve))
  if (feed !== undefined) await feed(child)
  else child.stdin.end(stdin)
  return { code: await exited, stdout, stderr }
}

function file (name: string, text: string): string {
  const path = join(dir, name)
  writeFileSync(path, text)
  return path
}

const lines = (out: string): Json[] => out.trim().split('\n').map((l) => JSON.parse(l) as Json)

test('a file of one indicator per line gives one bulk result item per indicator, in order, bad lines as errors', async () => {
  const path = file('plain.txt', '# a comment\n8.8.8.8\n\nexample[.]com\nnot an indicator!\nAS13335\n')
  const run = await cli(['score', path])
  assert.equal(run.code, 0)
  const items = lines(run.stdout)
  assert.deepEqual(items.map((i) => i.indicator.value), ['8.8.8.8', 'example[.]com', 'not an indicator!', 'AS13335'])
  assert.equal(items[0]?.indicator.type, 'ip')
  assert.equal(items[1]?.indicator.normalized, 'example.com')
  assert.ok(items[1]?.warnings.includes('type inferred as domain'))
  assert.equal(items[2]?.risk, null)
  assert.ok(items[2]?.errors.length > 0)
  assert.equal(typeof items[3]?.risk.score, 'number')
  for (const i of items) assert.equal(i.flags, undefined, 'items carry the bulk members only')
  assert.match(run.stderr, /scored 4 indicators, 1 invalid, 2 lines skipped/)
})

test('CSV input reads the value and type columns by header, quoted fields included; CSV output has one row each', async () => {
  const path = file('in.csv', 'id,Value,type\n1,"1.2.3[.]4",ip\n2,example.org,\n3,"x,y",domain\n')
  const run = await cli(['score', path, '--format', 'csv'])
  assert.equal(run.code, 0)
  const rows = run.stdout.trim().split(/\r?\n/)
  assert.equal(rows[0], 'value,type,normalized,score,strength,category,top_signals,error')
  assert.equal(rows.length, 4)
  assert.match(rows[1] as string, /^1\.2\.3\[\.\]4,ip,1\.2\.3\.4,\d+,/)
  assert.match(rows[2] as string, /^example\.org,domain,example\.org,\d+,/)
  assert.match(rows[3] as string, /^"x,y",domain,,,,,,.+/, 'an invalid value gives a row with its error')
})

test('NDJSON input: objects with value and type; malformed lines and prototype keys become item errors', async () => {
  const path = file('in.ndjson', '{"value":"192.0.2.1","type":"ip"}\nnot json\n{"__proto__":{"x":1},"value":"a.example"}\n{"type":"domain"}\n')
  const run = await cli(['score', path])
  assert.equal(run.code, 0)
  const items = lines(run.stdout)
  assert.equal(items.length, 4)
  assert.equal(items[0]?.indicator.normalized, '192.0.2.1')
  for (const i of items.slice(1)) {
    assert.equal(i.risk, null)
    assert.ok(i.errors.length > 0)
  }
  assert.equal(({} as Json).x, undefined)
})

test('score - reads stdin and answers while the input is still open (streaming)', async () => {
  let firstAnswerBeforeEnd = false
  const run = await cli(['score', '-'], '', async (child) => {
    child.stdin!.write('8.8.4.4\n')
    await new Promise<void>((resolve) => child.stdout!.once('data', () => resolve()))
    firstAnswerBeforeEnd = true
    child.stdin!.end(Array.from({ length: 2000 }, (_, i) => `10.0.${i >> 8}.${i & 255}`).join('\n') + '\n')
  })
  assert.equal(run.code, 0)
  assert.ok(firstAnswerBeforeEnd)
  assert.equal(lines(run.stdout).length, 2001)
})

test('every answer reaches a reader slower than the command, as a busy pipe consumer is', async () => {
  const input = Array.from({ length: 2001 }, (_, i) => `10.1.${i >> 8}.${i & 255}`).join('\n') + '\n'
  const run = await cli(['score', '-'], '', async (child) => {
    // The reader takes a pause after each chunk, so answers are still queued in the command when it has scored the
    // last line and decides to exit.
    child.stdout!.on('data', () => {
      child.stdout!.pause()
      setTimeout(() => child.stdout!.resume(), 25)
    })
    child.stdin!.end(input)
  })
  assert.equal(run.code, 0)
  assert.equal(lines(run.stdout).length, 2001)
})

test('CRLF line ends and a last line without an end are read as lines', async () => {
  const run = await cli(['score', file('crlf.txt', '192.0.2.1\r\n\r\na.example\r\nb.example')])
  assert.equal(run.code, 0)
  assert.deepEqual(lines(run.stdout).map((i) => i.indicator.normalized), ['192.0.2.1', 'a.example', 'b.example'])
})

test('bad options are refused with the usage and exit code 2, and nothing is scored', async () => {
  const path = file('one.txt', '8.8.8.8\n')
  for (const args of [['score', path, '--format', 'xml'], ['score', path, '--input', 'yaml'], ['score', '8.8.8.8', '--format', 'csv'], ['score', path, '--signals', 'some']]) {
    const run = await cli(args)
    assert.equal(run.code, 2, args.join(' '))
    assert.equal(run.stdout, '')
    assert.match(run.stderr, /usage: ioc-verdict/)
  }
})

test('a CSV without a value column is refused with a clear error', async () => {
  const run = await cli(['score', file('novalue.csv', 'ip,type\n1.2.3.4,ip\n'), '--input', 'csv'])
  assert.equal(run.code, 1)
  assert.match(run.stderr, /"value" column/)
})
