/**
 * PostgreSQL schema version 15: the snapshot the retro-hunt last hunted with (retro-hunt.ts), so that intel changed
 * while the fleet was stopped (a file feed edited, a new release's data) is hunted when an instance next leads.
 */
import { retroHuntSeenSchema } from '../../retro-hunt.ts'
import type { PostgresMigration } from './index.ts'

const migration: PostgresMigration = (s) => retroHuntSeenSchema(`${s}.retro_hunt_seen`)

export default migration
