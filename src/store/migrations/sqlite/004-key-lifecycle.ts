/**
 * SQLite schema version 4: key lifecycle (API key management): a short-window rate limit, an expiry, the networks a key
 * may be used from and when it was last used.
 */
import type { SqliteMigration } from './index.ts'

const migration: SqliteMigration = `
  ALTER TABLE api_keys ADD COLUMN rate_limit INTEGER;      -- requests per minute, NULL = operator default
  ALTER TABLE api_keys ADD COLUMN expires_at TEXT;         -- ISO 8601 UTC, NULL = never
  ALTER TABLE api_keys ADD COLUMN allowed_cidrs TEXT;      -- JSON array of canonical CIDRs, NULL = anywhere
  ALTER TABLE api_keys ADD COLUMN last_used_at TEXT;       -- ISO 8601 UTC
  `

export default migration
