/**
 * PostgreSQL schema version 6: analysts' feedback on verdicts (docs/API.md "Feedback"); ids sort by creation time
 * (compared COLLATE "C"). Each entry has one row per signal of its verdict in feedback_signals (verdict and date
 * copied), so the per-signal summary and the signal filter read one tenant-prefixed index with no join.
 */
import type { PostgresMigration } from './index.ts'

const migration: PostgresMigration = (s) => `
  CREATE TABLE ${s}.feedback (
    id text PRIMARY KEY,
    tenant text NOT NULL,
    verdict text NOT NULL CHECK (verdict IN ('false_positive', 'true_positive')),
    indicator_type text NOT NULL,
    indicator_value text NOT NULL,        -- as sent
    indicator_normalized text NOT NULL,
    note text NOT NULL,
    score integer NOT NULL,               -- the verdict the service gave when the feedback was recorded
    category text NOT NULL,
    signal_ids text[] NOT NULL,           -- the verdict's order
    engine_version text NOT NULL,
    data_timestamp text NOT NULL,
    created_by text NOT NULL,             -- key id or user:<name>
    created_at timestamptz NOT NULL
  );
  CREATE INDEX feedback_tenant ON ${s}.feedback (tenant, id COLLATE "C");
  CREATE INDEX feedback_tenant_indicator ON ${s}.feedback (tenant, indicator_normalized, id COLLATE "C");
  CREATE TABLE ${s}.feedback_signals (
    tenant text NOT NULL,
    signal_id text NOT NULL,
    feedback_id text NOT NULL,
    verdict text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, signal_id, feedback_id)
  );
  CREATE INDEX feedback_signals_feedback ON ${s}.feedback_signals (feedback_id);
  `

export default migration
