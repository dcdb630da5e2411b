/**
 * PostgreSQL schema migrations, in order: the file NNN-name.ts upgrades the schema to version NNN (the store's
 * schema_version table). Never edit a released migration: add the next number, and list it here (the list is static so
 * the bundle carries it; test/store/migrations.test.ts checks that it holds every file of this folder, in order).
 */
import m001 from './001-keys-history-usage.ts'
import m002 from './002-key-lifecycle.ts'
import m003 from './003-accounts.ts'
import m004 from './004-history-journal.ts'
import m005 from './005-allowlist.ts'
import m006 from './006-feedback.ts'
import m007 from './007-sign-in-failures.ts'
import m008 from './008-history-parts.ts'
import m009 from './009-change-feed.ts'
import m010 from './010-fleet.ts'
import m011 from './011-retro-hunt.ts'
import m012 from './012-webhooks.ts'
import m013 from './013-retro-hunt-owed.ts'
import m014 from './014-retro-hits-handed.ts'
import m015 from './015-retro-hunt-seen.ts'

/** One step: the SQL script for the schema `s` (a quoted identifier), run inside the migration's transaction. */
export type PostgresMigration = (s: string) => string

/** Every migration, index i upgrading to version i + 1. */
export const kPostgresMigrations: readonly PostgresMigration[] = [m001, m002, m003, m004, m005, m006, m007, m008, m009, m010, m011, m012, m013, m014, m015]
