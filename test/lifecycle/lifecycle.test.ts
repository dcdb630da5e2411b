/**
 * The lifecycle (src/lifecycle.ts): parts start in the registry's order and close and are destroyed in the reverse
 * order, each at most once; a failed start unwinds what started; a close that overruns its budget destroys the rest.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { LifecycleError } from '../../src/errors.ts'
import { Lifecycle, lifecycleTable, type PartSpec, type PartStops } from '../../src/lifecycle.ts'

const kRegistry: PartSpec[] = ['a', 'b', 'c', 'd'].map((name) => ({ name, start: `starts ${name}`, close: `closes ${name}`, destroy: `destroys ${name}` }))
const kQuiet = { debug: () => {}, error: () => {} }

/** A lifecycle over kRegistry whose parts write what happens to them into `events`. */
function recorder (budgetMs = 60_000): { life: Lifecycle, events: string[], part: (name: string, stops?: Partial<Record<keyof PartStops, () => Promise<void> | void>>) => Promise<string> } {
  const life = new Lifecycle(kRegistry, { budgetMs, logger: kQuiet })
  const events: string[] = []
  const part = async (name: string, stops: Partial<Record<keyof PartStops, () => Promise<void> | void>> = {}): Promise<string> => await life.start(name, () => {
    events.push(`start ${name}`)
    return name
  }, () => ({
    close: async () => { events.push(`close ${name}`); await stops.close?.() },
    destroy: async () => { events.push(`destroy ${name}`); await stops.destroy?.() }
  }))
  return { life, events, part }
}

/** A promise that never settles, and the one-shot resolve of another that does when asked. */
const never = async (): Promise<void> => await new Promise<void>(() => {})

test('parts close in the reverse of their start order, each once, however often close is called', async () => {
  const { life, events, part } = recorder()
  for (const name of ['a', 'b', 'c', 'd']) await part(name)
  assert.deepEqual(life.parts, ['a', 'b', 'c', 'd'])
  await Promise.all([life.close(), life.close()])
  await life.close()
  assert.deepEqual(events, ['start a', 'start b', 'start c', 'start d', 'close d', 'close c', 'close b', 'close a'])
})

test('parts are destroyed in reverse order, each once; a part without a destroy of its own is closed instead', async () => {
  const life = new Lifecycle(kRegistry, { budgetMs: 60_000, logger: kQuiet })
  const events: string[] = []
  await life.start('a', () => 'a', () => ({ close: () => { events.push('close a') } }))
  await life.start('c', () => 'c', () => ({ close: () => { events.push('close c') }, destroy: (err) => { events.push(`destroy c: ${err?.message ?? ''}`) } }))
  await life.start('d', () => 'd', () => ({}))
  await Promise.all([life.destroy(new Error('now')), life.destroy()])
  assert.deepEqual(events, ['destroy c: now', 'close a'])
})

test('a part that fails to start unwinds the parts started before it, in reverse, and its error reaches the caller', async () => {
  const { life, events, part } = recorder()
  await part('a')
  await part('b')
  const boom = new Error('c cannot start')
  await assert.rejects(life.start('c', () => { throw boom }, () => ({})), (err) => err === boom)
  assert.deepEqual(events, ['start a', 'start b', 'close b', 'close a'])
  await assert.rejects(part('d'), { code: 'SERVICE_STOPPING' }, 'nothing starts once the lifecycle is stopping')
})

test('a close that overruns the budget destroys that part and every part after it, and close rejects', async () => {
  const { life, events, part } = recorder(50)
  await part('a')
  await part('b', { close: never })
  await part('c')
  await assert.rejects(life.close(), { code: 'PART_NOT_CLOSED' })
  assert.deepEqual(events.slice(3), ['close c', 'close b', 'destroy b', 'destroy a'])
})

test('a part whose close fails is reported and the parts before it are closed all the same', async () => {
  const { life, events, part } = recorder()
  await part('a')
  await part('b', { close: () => { throw new Error('b failed') } })
  await part('c')
  await assert.rejects(life.close(), (err: unknown) => err instanceof LifecycleError && err.code === 'PART_NOT_CLOSED' && (err.cause as Error).message === 'b failed')
  assert.deepEqual(events.slice(3), ['close c', 'close b', 'close a'])
})

test('a destroy while a close hangs destroys the parts not yet closed, and the close then ends', async () => {
  const { life, events, part } = recorder()
  await part('a')
  await part('b', { close: never })
  await part('c')
  const closing = life.close()
  await new Promise((resolve) => setImmediate(resolve))
  await life.destroy()
  await closing
  assert.deepEqual(events.slice(3), ['close c', 'close b', 'destroy b', 'destroy a'])
})

test('parts start in the registry\'s order: one may be left out, none moved, and none unknown', async () => {
  const { part } = recorder()
  await part('b')
  await assert.rejects(part('a'), /against the registry's order/)
  await assert.rejects(part('b'), /against the registry's order/)
  await assert.rejects(part('z'), /not in the registry/)
  await part('d')
  assert.throws(() => new Lifecycle([...kRegistry, { name: 'a', start: '', close: '', destroy: '' }], { budgetMs: 1, logger: kQuiet }), /distinct/)
})

test('the registry renders as the docs table, one row per part in start order', () => {
  const rows = lifecycleTable([...kRegistry, { name: 'e', start: 'a | b', close: '-', destroy: '-' }]).split('\n')
  assert.equal(rows.length, 2 + kRegistry.length + 1)
  assert.equal(rows[2], '| a | starts a | closes a | destroys a |')
  assert.equal(rows.at(-1), '| e | a \\| b | - | - |')
})
