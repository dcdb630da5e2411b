/**
 * SQLite schema version 5: dashboard users and sessions (accounts.ts).
 */
import { accountsSchema } from '../../accounts.ts'
import type { SqliteMigration } from './index.ts'

const migration: SqliteMigration = accountsSchema('users', 'sessions')

export default migration
