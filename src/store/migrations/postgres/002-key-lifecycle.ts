/**
 * PostgreSQL schema version 2: key lifecycle (API key management): rate limit, expiry, allowed networks, last use.
 */
import type { PostgresMigration } from './index.ts'

const migration: PostgresMigration = (s) => `
  ALTER TABLE ${s}.api_keys ADD COLUMN rate_limit integer;       -- requests per minute, NULL = operator default
  ALTER TABLE ${s}.api_keys ADD COLUMN expires_at timestamptz;   -- NULL = never
  ALTER TABLE ${s}.api_keys ADD COLUMN allowed_cidrs text[];     -- canonical CIDRs, NULL = anywhere
  ALTER TABLE ${s}.api_keys ADD COLUMN last_used_at timestamptz;
  `

export default migration
