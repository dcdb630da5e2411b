/**
 * SQLite schema version 14: the snapshot the retro-hunt last hunted with (retro-hunt.ts), so that intel changed while
 * the service was stopped (a file feed edited, a new release's data) is hunted at the next start.
 */
import { retroHuntSeenSchema } from '../../retro-hunt.ts'
import type { SqliteMigration } from './index.ts'

const migration: SqliteMigration = retroHuntSeenSchema('retro_hunt_seen')

export default migration
