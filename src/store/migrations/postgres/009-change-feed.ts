/**
 * PostgreSQL schema version 9: key and allowlist writes announced to every instance on commit (change-feed.ts;
 * src/fleet/ listens), so each applies them to its next request.
 */
import { changesSchema } from '../../change-feed.ts'
import type { PostgresMigration } from './index.ts'

const migration: PostgresMigration = (s) => changesSchema(s)

export default migration
