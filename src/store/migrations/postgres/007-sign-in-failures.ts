/**
 * PostgreSQL schema version 7: failed dashboard sign-ins, counted in the store so every instance sees them
 * (sign-in-limits.ts).
 */
import { signInFailuresSchema } from '../../sign-in-limits.ts'
import type { PostgresMigration } from './index.ts'

const migration: PostgresMigration = (s) => signInFailuresSchema(`${s}.sign_in_failures`)

export default migration
