/**
 * PostgreSQL schema version 3: dashboard users and sessions (accounts.ts).
 */
import { accountsSchema } from '../../accounts.ts'
import type { PostgresMigration } from './index.ts'

const migration: PostgresMigration = (s) => accountsSchema(`${s}.users`, `${s}.sessions`)

export default migration
