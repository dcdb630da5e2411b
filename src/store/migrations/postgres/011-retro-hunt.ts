/**
 * PostgreSQL schema version 9: retro-hunt hits (retro-hunt.ts), once per tenant, indicator and cause; ids ordered
 * bytewise as on SQLite.
 */
import { retroHuntSchema } from '../../retro-hunt.ts'
import type { PostgresMigration } from './index.ts'

const migration: PostgresMigration = (s) => retroHuntSchema(`${s}.retro_hits`, ' COLLATE "C"')

export default migration
