/**
 * Schema migrations (src/store/migrations/<dialect>/NNN-name.ts): each dialect's list holds every file of its folder in
 * order; a new database and one upgraded from every earlier version end with the same schema; and both dialects end
 * with the same tables and columns, types mapped, apart from the differences listed here with their reason.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test, type TestContext } from 'node:test'
import { pathToFileURL } from 'node:url'
import Database from 'better-sqlite3'
import pg from 'pg'
import { kPostgresMigrations } from '../../src/store/migrations/postgres/index.ts'
import { kSqliteMigrations } from '../../src/store/migrations/sqlite/index.ts'
import { PostgresStore } from '../../src/store/postgres.ts'
import { SqliteStore } from '../../src/store/sqlite.ts'
import { pgSchemaCleanups } from '../helper.ts'

const kDatabaseUrl = process.env.IOC_TEST_DATABASE_URL
const kNoPostgres = kDatabaseUrl === undefined || kDatabaseUrl === '' ? 'IOC_TEST_DATABASE_URL not set' : false
const kSrc = join(import.meta.dirname, '../../src/store/migrations')

/** table -> column -> type, as each dialect reports them. */
type Schema = Map<string, Map<string, string>>

/**
 * Where the dialects differ on purpose. PostgreSQL keeps history in day partitions: the partition key `day` is a
 * column of parts and blocks, and requests are dated by a timestamptz `date` where SQLite keeps epoch ms in `ts`.
 */
const kPostgresOnlyColumns = new Set(['history_blocks.day', 'history_parts.day'])
const kRenamed = new Map([['history_requests.ts', 'history_requests.date']])
/**
 * Tables only one dialect has, with the reason. The fleet's (src/fleet/): only instances sharing PostgreSQL elect a
 * leader and publish a snapshot; with SQLite one instance serves alone.
 */
const kPostgresOnlyTables = new Set<string>(['intel_generations', 'intel_chunks', 'fleet_feeds', 'fleet_instances'])
const kSqliteOnlyTables = new Set<string>()

/** The SQLite storage class a PostgreSQL type is kept as (STRICT tables: TEXT, INTEGER, BLOB). */
function sqliteClassOf (pgType: string): string {
  if (/^(text|text\[\]|timestamp with time zone|date)$/.test(pgType)) return 'TEXT' // arrays as JSON, times as ISO 8601
  if (/^(integer|bigint|boolean)$/.test(pgType)) return 'INTEGER'
  if (pgType === 'bytea') return 'BLOB'
  return `no SQLite class for ${pgType}`
}

function sqliteClass (declared: string): string {
  return /INT/i.test(declared) ? 'INTEGER' : declared.toUpperCase() // SQLite's affinity rule: any *INT* type is INTEGER
}

function sqliteSchema (db: Database.Database): Schema {
  const schema: Schema = new Map()
  for (const table of db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").pluck().all() as string[]) {
    const columns = db.prepare(`PRAGMA table_info("${table}")`).all() as Array<{ name: string, type: string }>
    schema.set(table, new Map(columns.map((c) => [c.name, c.type])))
  }
  return schema
}

function sqliteIndexes (db: Database.Database): string[] {
  return db.prepare("SELECT name || ': ' || sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name").pluck().all() as string[]
}

async function postgresSchema (client: pg.Client, schema: string): Promise<Schema> {
  // Tables and partitioned parents; partitions (per day) are an instance of their parent.
  const { rows } = await client.query<{ t: string, c: string, ty: string }>(
    'SELECT c.relname AS t, a.attname AS c, format_type(a.atttypid, a.atttypmod) AS ty FROM pg_class c ' +
    'JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped ' +
    "WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY c.relname, a.attnum", [schema])
  const out: Schema = new Map()
  for (const r of rows) {
    const columns = out.get(r.t) ?? new Map<string, string>()
    columns.set(r.c, r.ty)
    out.set(r.t, columns)
  }
  return out
}

async function postgresIndexes (client: pg.Client, schema: string): Promise<string[]> {
  const { rows } = await client.query<{ d: string }>(
    "SELECT indexname || ': ' || regexp_replace(indexdef, '\"?' || schemaname || '\"?\\.', '', 'g') AS d FROM pg_indexes " +
    "WHERE schemaname = $1 AND tablename !~ '_d[0-9]{8}$' ORDER BY indexname", [schema])
  return rows.map((r) => r.d)
}

function flat (schema: Schema): string[] {
  return [...schema].flatMap(([t, columns]) => [...columns].map(([c, ty]) => `${t}.${c} ${ty}`)).sort()
}

for (const [dialect, list] of [['sqlite', kSqliteMigrations], ['postgres', kPostgresMigrations]] as const) {
  test(`the ${dialect} migration list holds every file of its folder, numbered from 001 without a gap, in order`, async () => {
    const files = readdirSync(join(kSrc, dialect)).filter((f) => f !== 'index.ts').sort()
    assert.ok(files.length > 0)
    assert.equal(files.length, list.length, `files: ${files.join(', ')}`)
    for (const [i, file] of files.entries()) {
      assert.match(file, /^\d{3}-[a-z0-9-]+\.ts$/)
      assert.equal(Number(file.slice(0, 3)), i + 1, `${file} is version ${i + 1}`)
      const mod = await import(pathToFileURL(join(kSrc, dialect, file)).href) as { default: unknown }
      assert.equal(list[i], mod.default, `entry ${i} of the list is ${file}`)
    }
  })
}

function tempDb (t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-migrations-'))
  t.after(() => { rmSync(dir, { recursive: true, force: true }) })
  return join(dir, 'store.db')
}

test('a SQLite database of every earlier version upgrades to the schema a new one gets, versions unchanged', async (t) => {
  const freshPath = tempDb(t)
  const fresh = new SqliteStore({ path: freshPath })
  fresh.migrateSync()
  await fresh.close()
  const read = (path: string): { tables: string[], indexes: string[], versions: number[] } => {
    const db = new Database(path, { readonly: true })
    try {
      return {
        tables: flat(sqliteSchema(db)),
        indexes: sqliteIndexes(db),
        versions: db.prepare('SELECT version FROM schema_version ORDER BY version').pluck().all() as number[]
      }
    } finally {
      db.close()
    }
  }
  const want = read(freshPath)
  assert.deepEqual(want.versions, kSqliteMigrations.map((_, i) => i + 1))
  for (let v = 1; v < kSqliteMigrations.length; v++) {
    const path = tempDb(t)
    const old = new SqliteStore({ path })
    old.migrateSync(v)
    await old.close()
    const upgraded = new SqliteStore({ path })
    await upgraded.migrate()
    await upgraded.close()
    assert.deepEqual(read(path), want, `from version ${v}`)
  }
})

/** A PostgreSQL store on a schema of its own, dropped after the test (after the store closed). */
function postgresStore (t: TestContext): { store: PostgresStore, schema: string } {
  const schema = `iocv_test_${randomBytes(6).toString('hex')}`
  const cleanups = pgSchemaCleanups(t, kDatabaseUrl as string, schema)
  const store = new PostgresStore({ url: kDatabaseUrl as string, schema, max: 2 })
  cleanups.after(async () => { await store.close() })
  return { store, schema }
}

async function admin (t: TestContext): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: kDatabaseUrl as string })
  await client.connect()
  t.after(async () => { await client.end() })
  return client
}

test('PostgreSQL: a schema of every earlier version upgrades to the schema a new one gets, versions unchanged', { skip: kNoPostgres }, async (t) => {
  const client = await admin(t)
  const read = async (schema: string): Promise<{ tables: string[], indexes: string[], versions: number[] }> => ({
    tables: flat(await postgresSchema(client, schema)),
    indexes: await postgresIndexes(client, schema),
    versions: (await client.query<{ version: number }>(`SELECT version FROM "${schema}".schema_version ORDER BY version`)).rows.map((r) => r.version)
  })
  const fresh = postgresStore(t)
  await fresh.store.migrate()
  const want = await read(fresh.schema)
  assert.deepEqual(want.versions, kPostgresMigrations.map((_, i) => i + 1))
  for (let v = 1; v < kPostgresMigrations.length; v++) {
    const old = postgresStore(t)
    await old.store.migrate(v)
    await old.store.migrate()
    assert.deepEqual(await read(old.schema), want, `from version ${v}`)
  }
})

test('SQLite and PostgreSQL end with the same tables and columns, types mapped', { skip: kNoPostgres }, async (t) => {
  const path = tempDb(t)
  const lite = new SqliteStore({ path })
  lite.migrateSync()
  await lite.close()
  const db = new Database(path, { readonly: true })
  const sqlite = sqliteSchema(db)
  db.close()
  const { store, schema } = postgresStore(t)
  await store.migrate()
  const postgres = await postgresSchema(await admin(t), schema)

  const tables = (s: Schema, only: Set<string>): string[] => [...s.keys()].filter((name) => !only.has(name)).sort()
  assert.deepEqual(tables(sqlite, kSqliteOnlyTables), tables(postgres, kPostgresOnlyTables), 'the same tables')
  const expected: string[] = []
  for (const [table, columns] of postgres) {
    if (kPostgresOnlyTables.has(table)) continue
    for (const [column, type] of columns) {
      const name = `${table}.${column}`
      if (kPostgresOnlyColumns.has(name)) continue
      const sqliteName = [...kRenamed].find(([, pgName]) => pgName === name)?.[0] ?? name
      expected.push(`${sqliteName} ${sqliteName === name ? sqliteClassOf(type) : 'INTEGER'}`)
    }
  }
  const actual = [...sqlite].filter(([table]) => !kSqliteOnlyTables.has(table))
    .flatMap(([table, columns]) => [...columns].map(([column, type]) => `${table}.${column} ${sqliteClass(type)}`))
  assert.deepEqual(actual.sort(), expected.sort())
})
