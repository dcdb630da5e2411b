/**
 * SQLite schema version 11: retro-hunt webhooks and their deliveries (webhooks.ts).
 */
import { webhooksSchema } from '../../webhooks.ts'
import type { SqliteMigration } from './index.ts'

const migration: SqliteMigration = webhooksSchema('webhooks', 'webhook_deliveries')

export default migration
