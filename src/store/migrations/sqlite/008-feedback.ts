/**
 * SQLite schema version 8: analysts' feedback on verdicts (docs/API.md "Feedback"); ids sort by creation time. Each
 * entry has one row per signal of its verdict in feedback_signals (verdict and date copied), so the per-signal summary
 * and the signal filter read one tenant-prefixed index with no join.
 */
import type { SqliteMigration } from './index.ts'

const migration: SqliteMigration = `
  CREATE TABLE feedback (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    verdict TEXT NOT NULL CHECK (verdict IN ('false_positive', 'true_positive')),
    indicator_type TEXT NOT NULL,
    indicator_value TEXT NOT NULL,         -- as sent
    indicator_normalized TEXT NOT NULL,
    note TEXT NOT NULL,
    score INTEGER NOT NULL,                -- the verdict the service gave when the feedback was recorded
    category TEXT NOT NULL,
    signal_ids TEXT NOT NULL,              -- JSON array, the verdict's order
    engine_version TEXT NOT NULL,
    data_timestamp TEXT NOT NULL,
    created_by TEXT NOT NULL,              -- key id or user:<name>
    created_at TEXT NOT NULL               -- ISO 8601 UTC
  ) STRICT;
  CREATE INDEX feedback_tenant ON feedback (tenant, id);
  CREATE INDEX feedback_tenant_indicator ON feedback (tenant, indicator_normalized, id);
  CREATE TABLE feedback_signals (
    tenant TEXT NOT NULL,
    signal_id TEXT NOT NULL,
    feedback_id TEXT NOT NULL,
    verdict TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (tenant, signal_id, feedback_id)
  ) STRICT, WITHOUT ROWID;
  CREATE INDEX feedback_signals_feedback ON feedback_signals (feedback_id);
  `

export default migration
