/**
 * PostgreSQL schema version 8: history as parts in blocks, in day partitions (history/postgres-history.ts); the rows
 * move after it.
 */
import { partsSchema } from '../../../history/postgres-history.ts'
import type { PostgresMigration } from './index.ts'

const migration: PostgresMigration = (s) => partsSchema(s)

export default migration
