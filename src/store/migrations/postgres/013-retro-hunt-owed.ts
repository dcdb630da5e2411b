/**
 * PostgreSQL schema version 13: the retro-hunt pass owed after a stop or a crash (retro-hunt.ts).
 */
import { retroHuntOwedSchema } from '../../retro-hunt.ts'
import type { PostgresMigration } from './index.ts'

const migration: PostgresMigration = (s) => retroHuntOwedSchema(`${s}.retro_hunt_owed`)

export default migration
