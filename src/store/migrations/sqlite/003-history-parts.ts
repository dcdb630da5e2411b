/**
 * SQLite schema version 3: items are kept as the scoring workers' encoded parts, grouped per tenant into blocks that
 * searches skip by filter (src/history/sqlite-search.ts): the history table and its two indexes cost the writer a row
 * and two index entries per indicator, which capped sustained bulk throughput. Existing rows move into parts and
 * blocks, ids unchanged.
 */
import { migrateRowsToBlocks } from '../../../history/sqlite-search.ts'
import type { SqliteMigration } from './index.ts'

const migration: SqliteMigration = migrateRowsToBlocks

export default migration
