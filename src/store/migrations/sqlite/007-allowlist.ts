/**
 * SQLite schema version 7: tenant allowlists (docs/API.md "Tenant allowlist"); ids sort by creation time.
 */
import type { SqliteMigration } from './index.ts'

const migration: SqliteMigration = `
  CREATE TABLE allowlist (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    reason TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT
  ) STRICT;
  CREATE INDEX allowlist_tenant ON allowlist (tenant, id);
  `

export default migration
