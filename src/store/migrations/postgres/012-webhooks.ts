/**
 * PostgreSQL schema version 10: retro-hunt webhooks and their deliveries (webhooks.ts); ids ordered bytewise as on
 * SQLite.
 */
import { webhooksSchema } from '../../webhooks.ts'
import type { PostgresMigration } from './index.ts'

const migration: PostgresMigration = (s) => webhooksSchema(`${s}.webhooks`, `${s}.webhook_deliveries`, ' COLLATE "C"')

export default migration
