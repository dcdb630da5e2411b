/**
 * SQLite schema version 10: retro-hunt hits (retro-hunt.ts), once per tenant, indicator and cause.
 */
import { retroHuntSchema } from '../../retro-hunt.ts'
import type { SqliteMigration } from './index.ts'

const migration: SqliteMigration = retroHuntSchema('retro_hits')

export default migration
