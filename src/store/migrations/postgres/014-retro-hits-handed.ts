/**
 * PostgreSQL schema version 14: which retro-hunt hits were handed to the webhooks (retro-hunt.ts), so that hits a pass
 * recorded before a crash are still delivered; hits recorded before this version count as handed on.
 */
import { retroHitsHandedSchema } from '../../retro-hunt.ts'
import type { PostgresMigration } from './index.ts'

const migration: PostgresMigration = (s) => retroHitsHandedSchema(`${s}.retro_hits`, ' COLLATE "C"')

export default migration
