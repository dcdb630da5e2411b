/**
 * SQLite schema version 13: which retro-hunt hits were handed to the webhooks (retro-hunt.ts), so that hits a pass
 * recorded before a crash are still delivered; hits recorded before this version count as handed on.
 */
import { retroHitsHandedSchema } from '../../retro-hunt.ts'
import type { SqliteMigration } from './index.ts'

const migration: SqliteMigration = retroHitsHandedSchema('retro_hits', '')

export default migration
