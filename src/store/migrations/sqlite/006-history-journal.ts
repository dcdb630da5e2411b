/**
 * SQLite schema version 6: how far each history journal (one per data directory) is written, updated in the batch's
 * transaction.
 */
import type { SqliteMigration } from './index.ts'

const migration: SqliteMigration = `
  CREATE TABLE history_journal (
    journal TEXT PRIMARY KEY,
    position INTEGER NOT NULL
  ) STRICT;
  `

export default migration
