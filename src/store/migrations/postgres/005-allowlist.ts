/**
 * PostgreSQL schema version 5: tenant allowlists (docs/API.md "Tenant allowlist"); ids sort by creation time.
 */
import type { PostgresMigration } from './index.ts'

const migration: PostgresMigration = (s) => `
  CREATE TABLE ${s}.allowlist (
    id text PRIMARY KEY,
    tenant text NOT NULL,
    kind text NOT NULL,
    value text NOT NULL,
    reason text NOT NULL,
    created_by text NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz
  );
  CREATE INDEX allowlist_tenant ON ${s}.allowlist (tenant, id);
  `

export default migration
