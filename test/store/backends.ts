/**
 * Store and quota backends the contract tests run against: SQLite always, PostgreSQL and Redis when their URL is
 * in the environment (IOC_TEST_DATABASE_URL, IOC_TEST_REDIS_URL). Each run uses its own temp file, schema or
 * key prefix and removes it afterwards.
 */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import pg from 'pg'
import { PostgresStore } from '../../src/store/postgres.ts'
import { MemoryQuota, RedisQuota, type QuotaCounter, type UsageSource } from '../../src/store/quota.ts'
import { SqliteStore } from '../../src/store/sqlite.ts'
import type { SearchFilters, Store } from '../../src/store/types.ts'

/** A store that can also explain its search plan. */
export type ExplainableStore = Store & {
  explainSearch (tenant: string, filters: SearchFilters, cursor?: string | null): Promise<string[]>
}

/** An opened store and how to remove every trace of it. */
export interface StoreHarness {
  store: ExplainableStore
  /** A second, independent store on the same database (for close/use-after-close tests). */
  openAnother (): Promise<ExplainableStore>
  /** Problems with a plan returned by explainSearch (empty when the query is served by an index, in order). */
  planProblems (plan: string[]): string[]
  cleanup (): Promise<void>
}

/** A store backend of the contract table. */
export interface StoreBackend {
  name: string
  /** Why the backend is skipped, or null. */
  skip: string | null
  open (): Promise<StoreHarness>
}

const kDatabaseUrl = process.env.IOC_TEST_DATABASE_URL
const kRedisUrl = process.env.IOC_TEST_REDIS_URL

function sqlitePlanProblems (plan: string[]): string[] {
  const problems: string[] = []
  for (const line of plan) {
    if (/^SCAN /.test(line) && !/USING (COVERING )?INDEX/.test(line)) problems.push(`full scan: ${line}`)
    if (/TEMP B-TREE/.test(line)) problems.push(`sort: ${line}`)
  }
  // The outer loop reads a tenant-prefixed index (requests, or item blocks); the rest is reached by primary key (a
  // part's request by id, a request's items by the part holding an id) or, for a block's parts, by block.
  const outer = plan.findIndex((l) => /^SEARCH history_(requests|blocks) USING (COVERING )?INDEX history_(requests|blocks)_tenant\w* \(tenant=\?/.test(l))
  if (outer === -1) problems.push(`no tenant-prefixed index search in: ${plan.join(' | ')}`)
  if (!plan.some((l, i) => i > outer && /^SEARCH history_(requests|parts) USING INTEGER PRIMARY KEY \(rowid/.test(l))) {
    problems.push(`the joined table is not read by primary key in: ${plan.join(' | ')}`)
  }
  return problems
}

function postgresPlanProblems (plan: string[]): string[] {
  // explainSearch disables seq scans, bitmap scans and sorts: if one appears anyway, no index can do the job.
  const problems = plan.filter((l) => /Seq Scan|Bitmap|^\s*(->\s+)?(Incremental )?Sort\s+\(/.test(l)).map((l) => `not index-served: ${l.trim()}`)
  // Two statements (each plan starts at column 0): the page of a tenant's requests or blocks, every partition read
  // through a tenant-prefixed index; then the parts they point to, by primary key or block (and their requests by
  // primary key).
  const statements: string[][] = []
  for (const line of plan) {
    if (!/^\s/.test(line)) statements.push([])
    statements[statements.length - 1]?.push(line)
  }
  const scans = (lines: string[]): Array<{ index: string, table: string }> => lines.flatMap((l) => {
    const m = /Index (?:Only )?Scan (?:Backward )?using (\S+) on (\S+)/.exec(l)
    return m === null ? [] : [{ index: m[1] as string, table: m[2] as string }]
  })
  const [page, parts] = statements
  if (page === undefined || parts === undefined || statements.length !== 2) return [...problems, `expected two statements in: ${plan.join(' | ')}`]
  const outer = scans(page)
  if (outer.length === 0) problems.push(`no index scan in: ${page.join(' | ')}`)
  for (const s of outer) {
    if (!/^history_(requests|blocks)_d\d{8}$/.test(s.table) || !s.index.includes('_tenant')) problems.push(`not a tenant-prefixed index: ${s.index} on ${s.table}`)
  }
  const inner = scans(parts)
  if (!inner.some((s) => /^history_parts_d\d{8}$/.test(s.table))) problems.push(`parts not read by index in: ${parts.join(' | ')}`)
  for (const s of inner) {
    if (/^history_requests_d/.test(s.table) && !s.index.endsWith('_pkey')) problems.push(`a part's request not read by primary key: ${s.index}`)
  }
  return problems
}

/** SQLite (temp file) and PostgreSQL (throwaway schema). */
export const storeBackends: StoreBackend[] = [
  {
    name: 'SQLite',
    skip: null,
    async open () {
      const dir = mkdtempSync(join(tmpdir(), 'iocv-store-'))
      const path = join(dir, 'store.db')
      const store = new SqliteStore({ path })
      await store.migrate()
      const others: SqliteStore[] = []
      return {
        store,
        async openAnother () {
          const other = new SqliteStore({ path })
          others.push(other)
          return other
        },
        planProblems: sqlitePlanProblems,
        async cleanup () {
          await store.close()
          for (const o of others) await o.close()
          rmSync(dir, { recursive: true, force: true })
        }
      }
    }
  },
  {
    name: 'PostgreSQL',
    skip: kDatabaseUrl === undefined || kDatabaseUrl === '' ? 'IOC_TEST_DATABASE_URL not set' : null,
    async open () {
      const url = kDatabaseUrl as string
      const schema = `iocv_test_${randomBytes(6).toString('hex')}`
      const store = new PostgresStore({ url, schema, max: 4 })
      const others: PostgresStore[] = []
      await store.migrate()
      return {
        store,
        async openAnother () {
          const other = new PostgresStore({ url, schema, max: 1 })
          others.push(other)
          return other
        },
        planProblems: postgresPlanProblems,
        async cleanup () {
          await store.close()
          for (const o of others) await o.close()
          const client = new pg.Client({ connectionString: url })
          await client.connect()
          try {
            await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
          } finally {
            await client.end()
          }
        }
      }
    }
  }
]

/** An opened quota counter factory and how to remove its traces. */
export interface QuotaHarness {
  /** A new counter over `source`; several counters of one harness share state as separate instances would. */
  open (source: UsageSource, now?: () => number): QuotaCounter
  /** Redis only: a raw client on the same server, and the full key of a counter. */
  redis: { client: Redis, key (keyId: string, day: string): string } | null
  cleanup (): Promise<void>
}

/** A quota backend of the contract table. */
export interface QuotaBackend {
  name: string
  skip: string | null
  /** True when separate counters share their counts (Redis); false for process-local counters. */
  shared: boolean
  open (): Promise<QuotaHarness>
}

/** MemoryQuota and RedisQuota (unique key prefix). */
export const quotaBackends: QuotaBackend[] = [
  {
    name: 'MemoryQuota',
    skip: null,
    shared: false,
    async open () {
      const counters: QuotaCounter[] = []
      return {
        open (source, now) {
          const q = new MemoryQuota(now === undefined ? { store: source } : { store: source, now })
          counters.push(q)
          return q
        },
        redis: null,
        async cleanup () {
          for (const q of counters) await q.close()
        }
      }
    }
  },
  {
    name: 'RedisQuota',
    skip: kRedisUrl === undefined || kRedisUrl === '' ? 'IOC_TEST_REDIS_URL not set' : null,
    shared: true,
    async open () {
      const url = kRedisUrl as string
      const prefix = `iocv_test_${randomBytes(6).toString('hex')}:`
      const client = new Redis(url)
      const counters: QuotaCounter[] = []
      return {
        open (source, now) {
          const q = new RedisQuota(now === undefined ? { url, store: source, prefix } : { url, store: source, prefix, now })
          counters.push(q)
          return q
        },
        redis: { client, key: (keyId, day) => `${prefix}quota:${day}:${keyId}` },
        async cleanup () {
          for (const q of counters) await q.close()
          let cursor = '0'
          do {
            const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
            if (keys.length > 0) await client.del(...keys)
            cursor = next
          } while (cursor !== '0')
          await client.quit()
        }
      }
    }
  }
]
