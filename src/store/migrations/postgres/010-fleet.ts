/**
 * PostgreSQL schema version 10: the fleet's published intel snapshot generations, the feed copies its leader shares
 * and its instances' rows (fleet-schema.ts; src/fleet/).
 */
import { fleetSchema } from '../../fleet-schema.ts'
import type { PostgresMigration } from './index.ts'

const migration: PostgresMigration = (s) => fleetSchema(s)

export default migration
