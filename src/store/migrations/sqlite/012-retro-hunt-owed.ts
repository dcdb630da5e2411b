/**
 * SQLite schema version 12: the retro-hunt pass owed after a stop or a crash (retro-hunt.ts).
 */
import { retroHuntOwedSchema } from '../../retro-hunt.ts'
import type { SqliteMigration } from './index.ts'

const migration: SqliteMigration = retroHuntOwedSchema('retro_hunt_owed')

export default migration
