/**
 * SQLite schema migrations, in order: the file NNN-name.ts upgrades the schema to version NNN (the store's
 * schema_version table). Never edit a released migration: add the next number, and list it here (the list is static so
 * the bundle carries it; test/store/migrations.test.ts checks that it holds every file of this folder, in order).
 */
import type Database from 'better-sqlite3'
import m001 from './001-keys-history-usage.ts'
import m002 from './002-value-index-segments.ts'
import m003 from './003-history-parts.ts'
import m004 from './004-key-lifecycle.ts'
import m005 from './005-accounts.ts'
import m006 from './006-history-journal.ts'
import m007 from './007-allowlist.ts'
import m008 from './008-feedback.ts'
import m009 from './009-sign-in-failures.ts'
import m010 from './010-retro-hunt.ts'
import m011 from './011-webhooks.ts'
import m012 from './012-retro-hunt-owed.ts'
import m013 from './013-retro-hits-handed.ts'
import m014 from './014-retro-hunt-seen.ts'

/** One step: SQL run as one script, or a function over the connection; it runs inside the migration's transaction. */
export type SqliteMigration = string | ((db: Database.Database) => void)

/** Every migration, index i upgrading to version i + 1. */
export const kSqliteMigrations: readonly SqliteMigration[] = [m001, m002, m003, m004, m005, m006, m007, m008, m009, m010, m011, m012, m013, m014]
