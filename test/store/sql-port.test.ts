/**
 * The stores' SQL ports (src/store/sql-port.ts): portable SQL rewritten per dialect, errors translated in the port, and
 * transactions that no other caller's statement can run inside (the SQLite port's one connection is held by one
 * transaction at a time).
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { connect, createServer, type AddressInfo, type Socket } from 'node:net'
import { test, type TestContext } from 'node:test'
import Database from 'better-sqlite3'
import { PostgresPort } from '../../src/store/postgres-port.ts'
import { dialectSql, isUniqueViolation, type SqlPort } from '../../src/store/sql-port.ts'
import { SqlitePort } from '../../src/store/sqlite-port.ts'
import { pgSchemaCleanups } from '../helper.ts'
import { stallRelay } from '../fixtures/stall-relay.ts'

const kDatabaseUrl = process.env.IOC_TEST_DATABASE_URL
const kNoPostgres = kDatabaseUrl === undefined || kDatabaseUrl === '' ? 'IOC_TEST_DATABASE_URL not set' : false

test('portable SQL becomes each dialect: numbered parameters, qualified tables, the byte-order collation', () => {
  const sql = 'SELECT * FROM {allowlist} WHERE tenant = ? AND id > ? COLLATE {bytes} ORDER BY id COLLATE {bytes} LIMIT ?'
  assert.equal(dialectSql(sql, (t) => t, 'BINARY', false),
    'SELECT * FROM allowlist WHERE tenant = ? AND id > ? COLLATE BINARY ORDER BY id COLLATE BINARY LIMIT ?')
  assert.equal(dialectSql(sql, (t) => `"s".${t}`, '"C"', true),
    'SELECT * FROM "s".allowlist WHERE tenant = $1 AND id > $2 COLLATE "C" ORDER BY id COLLATE "C" LIMIT $3')
})

function sqlitePort (): SqlitePort {
  const db = new Database(':memory:')
  db.exec('CREATE TABLE items (id TEXT PRIMARY KEY, n INTEGER NOT NULL)')
  return new SqlitePort(db)
}

/** A port on a schema of its own with the table `items`, closed and dropped after the test. */
async function postgresPort (t: TestContext): Promise<PostgresPort> {
  const schema = `iocv_test_${randomBytes(6).toString('hex')}`
  const cleanups = pgSchemaCleanups(t, kDatabaseUrl as string, schema)
  const port = new PostgresPort({ url: kDatabaseUrl as string, schema, max: 3, connectionTimeoutMs: 5000 })
  cleanups.after(async () => { await port.close() })
  await port.query(`CREATE SCHEMA "${schema}"`)
  // A collation that is not byte order where the server has one (ICU's root: '_x' < 'a' < 'Ab' < 'b' < 'B'), so
  // the byte order asked for with COLLATE {bytes} is seen to win over the column's own.
  const icu = (await port.query('SELECT 1 FROM pg_collation WHERE collname = $1', ['und-x-icu'])).rows.length > 0
  await port.query(`CREATE TABLE "${schema}".items (id text ${icu ? 'COLLATE "und-x-icu" ' : ''}PRIMARY KEY, n integer NOT NULL)`)
  return port
}

/** What both ports must do. */
async function contract (port: SqlPort): Promise<void> {
  assert.equal(await port.run('INSERT INTO {items} (id, n) VALUES (?, ?), (?, ?)', ['b', 2, 'a', 1]), 2)
  const dup = await port.run('INSERT INTO {items} (id, n) VALUES (?, ?)', ['a', 9]).then(() => null, (err: unknown) => err)
  assert.ok(isUniqueViolation(dup), 'a duplicate key is a unique violation')
  assert.equal((dup as { code?: string }).code, 'STORE_ERROR')
  const bad = await port.all('SELECT * FROM {no_such_table}', []).then(() => null, (err: unknown) => err)
  assert.equal((bad as { code?: string }).code, 'STORE_ERROR')
  assert.equal(isUniqueViolation(bad), false)

  // A transaction that throws leaves nothing behind, and the error comes out as it was thrown.
  await assert.rejects(port.transaction(async (tx) => {
    await tx.run('INSERT INTO {items} (id, n) VALUES (?, ?)', ['c', 3])
    throw new Error('changed my mind')
  }), /changed my mind/)
  assert.deepEqual(await port.all('SELECT id FROM {items} ORDER BY id COLLATE {bytes}', []), [{ id: 'a' }, { id: 'b' }])

  // While a transaction waits between its statements, another caller sees none of its writes, and a rollback
  // leaves the other caller's reads as they were.
  let resume = (): void => {}
  const paused = new Promise<void>((resolve) => { resume = resolve })
  let inserted = (): void => {}
  const didInsert = new Promise<void>((resolve) => { inserted = resolve })
  const tx = port.transaction(async (t) => {
    await t.run('INSERT INTO {items} (id, n) VALUES (?, ?)', ['d', 4])
    inserted()
    await paused
    throw new Error('roll back')
  })
  await didInsert
  const outside = port.all<{ id: string }>('SELECT id FROM {items} ORDER BY id COLLATE {bytes}', [])
  resume()
  await assert.rejects(tx, /roll back/)
  assert.deepEqual((await outside).map((r) => r.id), ['a', 'b'])

  // Byte order: upper case, then '_', then lower case.
  await port.run('INSERT INTO {items} (id, n) VALUES (?, ?), (?, ?), (?, ?)', ['_x', 0, 'B', 0, 'Ab', 0])
  assert.deepEqual((await port.all<{ id: string }>('SELECT id FROM {items} ORDER BY id COLLATE {bytes}', [])).map((r) => r.id), ['Ab', 'B', '_x', 'a', 'b'])
}

test('SQLite port: statements, errors and transactions', async () => {
  const port = sqlitePort()
  await contract(port)
})

test('PostgreSQL port: statements, errors and transactions', { skip: kNoPostgres }, async (t) => {
  await contract(await postgresPort(t))
})

test('SQLite port: a statement of another caller waits for the open transaction, then sees its commit', async () => {
  const port = sqlitePort()
  let resume = (): void => {}
  const paused = new Promise<void>((resolve) => { resume = resolve })
  const order: string[] = []
  const tx = port.transaction(async (t) => {
    await t.run('INSERT INTO {items} (id, n) VALUES (?, ?)', ['a', 1])
    await paused
    order.push('commit')
  })
  const read = port.all<{ n: number }>('SELECT count(*) AS n FROM {items}', []).then((rows) => { order.push('read'); return rows })
  const write = port.run('INSERT INTO {items} (id, n) VALUES (?, ?)', ['b', 2]).then((n) => { order.push('write'); return n })
  await new Promise((resolve) => setImmediate(resolve))
  assert.deepEqual(order, [], 'nothing ran inside the open transaction')
  resume()
  await tx
  assert.deepEqual((await read)[0], { n: 1 })
  assert.equal(await write, 1)
  assert.deepEqual(order, ['commit', 'read', 'write'])
})

test('SQLite port: synchronous work is refused while a transaction is open; exclusive() waits for it', async () => {
  const port = sqlitePort()
  let resume = (): void => {}
  const paused = new Promise<void>((resolve) => { resume = resolve })
  const tx = port.transaction(async () => { await paused })
  await new Promise((resolve) => setImmediate(resolve))
  assert.throws(() => port.sync((db) => db.prepare('SELECT 1').get()), { code: 'STORE_ERROR' })
  const later = port.exclusive((db) => db.inTransaction)
  resume()
  await tx
  assert.equal(await later, false, 'exclusive work ran after the transaction ended')
})

test('SQLite port: after close every call rejects with STORE_CLOSED', async () => {
  const port = sqlitePort()
  port.close()
  await assert.rejects(port.all('SELECT 1', []), { code: 'STORE_CLOSED' })
  await assert.rejects(port.transaction(async () => {}), { code: 'STORE_CLOSED' })
  assert.throws(() => port.assertOpen(), { code: 'STORE_CLOSED' })
})

test('PostgreSQL port: a snapshot transaction reads one snapshot while others commit', { skip: kNoPostgres }, async (t) => {
  const port = await postgresPort(t)
  await port.run('INSERT INTO {items} (id, n) VALUES (?, ?)', ['a', 1])
  const counts = await port.transaction(async (tx) => {
    const before = await tx.all<{ n: string }>('SELECT count(*) AS n FROM {items}', [])
    await port.run('INSERT INTO {items} (id, n) VALUES (?, ?)', ['b', 2]) // another connection commits meanwhile
    const after = await tx.all<{ n: string }>('SELECT count(*) AS n FROM {items}', [])
    return [before[0]?.n, after[0]?.n]
  }, 'snapshot')
  assert.deepEqual(counts.map(Number), [1, 1])
  assert.deepEqual((await port.all<{ n: string }>('SELECT count(*) AS n FROM {items}', []))[0], { n: '2' })
})

test('PostgreSQL port: while a server that does not answer is tried again, the other callers fail at once; then all pass', { skip: kNoPostgres }, async (t) => {
  // A relay on 127.0.0.1 that either holds connections without a word (a network dropping packets) or passes them to
  // the test database.
  const target = new URL(kDatabaseUrl as string)
  let forward = false
  const sockets = new Set<Socket>()
  const relay = createServer((client) => {
    sockets.add(client)
    client.on('close', () => sockets.delete(client))
    client.on('error', () => {})
    if (!forward) return
    const server = connect(Number(target.port === '' ? 5432 : target.port), target.hostname === 'localhost' ? '127.0.0.1' : target.hostname)
    sockets.add(server)
    server.on('close', () => { sockets.delete(server); client.destroy() })
    client.on('close', () => server.destroy())
    server.on('error', () => {})
    client.pipe(server).pipe(client)
  })
  relay.listen(0, '127.0.0.1')
  await once(relay, 'listening')
  t.after(() => { for (const s of sockets) s.destroy(); relay.close() })
  const url = new URL(kDatabaseUrl as string)
  url.hostname = '127.0.0.1'
  url.port = String((relay.address() as AddressInfo).port)
  const port = new PostgresPort({ url: url.href, schema: 'public', max: 3, connectionTimeoutMs: 800 })
  t.after(async () => { await port.close() })
  const codeOf = async (p: Promise<unknown>): Promise<string> => await p.then(() => 'ok', (err: { code?: string, message?: string }) => `${err.code ?? '?'}: ${err.message ?? ''}`)

  // Nothing known yet: each caller waits for its own connection attempt to time out.
  const first = await Promise.all(Array.from({ length: 2 }, async () => await codeOf(port.query('SELECT 1'))))
  for (const r of first) assert.match(r, /^STORE_UNAVAILABLE: PostgreSQL unavailable: .*timeout/i)
  // Known unreachable: one caller tries, the four others are answered at once, without a connection attempt.
  const second = await Promise.all(Array.from({ length: 5 }, async () => await codeOf(port.query('SELECT 1'))))
  assert.match(second[0] as string, /timeout/i, 'the first caller tried')
  for (const r of second.slice(1)) assert.equal(r, 'STORE_UNAVAILABLE: PostgreSQL unavailable: the last attempt failed and the next one is in progress')
  // Transactions and sessions take their connection through the same gate.
  const [probe, tx] = await Promise.all([codeOf(port.query('SELECT 1')), codeOf(port.transaction(async (q) => await q.all('SELECT 1', [])))])
  assert.match(probe, /timeout/i)
  assert.match(tx, /the next one is in progress/)

  // Reachable again: the next attempt gets through, and after it everyone does.
  forward = true
  assert.equal(await codeOf(port.query('SELECT 1')), 'ok')
  assert.deepEqual(await Promise.all(Array.from({ length: 5 }, async () => await codeOf(port.query('SELECT 1')))), ['ok', 'ok', 'ok', 'ok', 'ok'])
})

test('PostgreSQL port: a server that stops answering on an open connection fails lookups as unreachable; then all pass', { skip: kNoPostgres, timeout: 60_000 }, async (t) => {
  const target = new URL(kDatabaseUrl as string)
  const relay = await stallRelay(target.hostname, Number(target.port === '' ? 5432 : target.port))
  t.after(() => { relay.close() })
  const url = new URL(kDatabaseUrl as string)
  url.hostname = '127.0.0.1'
  url.port = String(relay.port)
  const port = new PostgresPort({ url: url.href, schema: 'public', max: 3, connectionTimeoutMs: 5000, queryTimeoutMs: 300 })
  t.after(async () => { await port.close() })
  const codeOf = async (p: Promise<unknown>): Promise<string> => await p.then(() => 'ok', (err: { code?: string, message?: string }) => `${err.code ?? '?'}: ${err.message ?? ''}`)
  assert.deepEqual(await port.all('SELECT 1 AS one', []), [{ one: 1 }], 'the connection is open')
  relay.stall()
  // Without a bound each of these would wait for as long as the server is silent: the test's own timeout.
  assert.match(await codeOf(port.all('SELECT 1', [])), /^STORE_UNAVAILABLE: PostgreSQL unavailable: .*timeout/i)
  const [probe, ...others] = await Promise.all(Array.from({ length: 4 }, async () => await codeOf(port.run('SELECT 1', []))))
  assert.match(probe as string, /timeout|connect/i, 'one caller tries again')
  for (const r of others) assert.match(r, /the next one is in progress/)
  relay.resume()
  assert.equal(await codeOf(port.all('SELECT 1', [])), 'ok')
  assert.deepEqual(await Promise.all(Array.from({ length: 4 }, async () => await codeOf(port.all('SELECT 1', [])))), ['ok', 'ok', 'ok', 'ok'])
})
