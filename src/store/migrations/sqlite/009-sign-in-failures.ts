/**
 * SQLite schema version 9: failed dashboard sign-ins, counted in the store (sign-in-limits.ts).
 */
import { signInFailuresSchema } from '../../sign-in-limits.ts'
import type { SqliteMigration } from './index.ts'

const migration: SqliteMigration = signInFailuresSchema('sign_in_failures')

export default migration
