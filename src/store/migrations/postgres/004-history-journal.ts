/**
 * PostgreSQL schema version 4: how far each history journal (one per data directory) is written, updated in the batch's
 * transaction.
 */
import type { PostgresMigration } from './index.ts'

const migration: PostgresMigration = (s) => `
  CREATE TABLE ${s}.history_journal (
    journal text PRIMARY KEY,
    position bigint NOT NULL
  );
  `

export default migration
