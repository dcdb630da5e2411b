/**
 * SQLite schema version 1: API keys, history as a request row and a row per indicator, and the usage counters.
 */
import { MAX_INDEXED_CHARS } from '../../../history/rows.ts'
import type { SqliteMigration } from './index.ts'

const migration: SqliteMigration = `
  CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    permissions TEXT NOT NULL,             -- JSON array, canonical order
    quota INTEGER,                         -- indicators per UTC day, NULL = unlimited
    secret_hash BLOB NOT NULL,             -- sha256(secret), 32 bytes
    created_at TEXT NOT NULL,              -- ISO 8601 UTC
    revoked_at TEXT
  ) STRICT;

  -- History is two tables: one row per request (its shared fields, stored once) and one row per indicator.
  -- A request's items are inserted together, so their ids form one contiguous range [first_item, last_item]:
  -- a request finds its items by primary-key range and an item its request by primary key, with no index on either
  -- link. Filters on request fields are served by the request indexes, filters on the indicator by the item indexes.
  CREATE TABLE history_requests (
    id INTEGER PRIMARY KEY,                -- see history.id
    uid TEXT NOT NULL,                     -- the writer's request identifier, unique per request
    ts INTEGER NOT NULL,                   -- epoch ms UTC of the request's date
    tenant TEXT NOT NULL,
    request_id TEXT NOT NULL,
    bulk_request_id TEXT,
    http_status INTEGER NOT NULL,
    auth_type TEXT NOT NULL,
    apikey TEXT NOT NULL,
    user_id TEXT,
    envelope TEXT NOT NULL,                -- JSON object of the request-level members of each record
    first_item INTEGER NOT NULL,           -- history.id range of the request's items (contiguous)
    last_item INTEGER NOT NULL
  ) STRICT;
  CREATE UNIQUE INDEX history_requests_uid ON history_requests (uid);
  -- Every search is tenant-scoped and ordered by (ts, id) descending: each index starts with tenant and ends with
  -- (ts, id), so a filter is an index range read backwards with no sort, and LIMIT stops it early.
  CREATE INDEX history_requests_tenant_date ON history_requests (tenant, ts, id);
  CREATE INDEX history_requests_tenant_apikey ON history_requests (tenant, apikey, ts, id);
  -- Partial: only requests with a user (dashboard sessions) enter it.
  CREATE INDEX history_requests_tenant_user ON history_requests (tenant, user_id, ts, id) WHERE user_id IS NOT NULL;
  -- Serves exclude_bulk_requests: a partial index of single calls only.
  CREATE INDEX history_requests_tenant_bulk ON history_requests (tenant, ts, id) WHERE bulk_request_id IS NULL;
  -- Serves purge, which is not tenant-scoped.
  CREATE INDEX history_requests_date ON history_requests (ts);

  CREATE TABLE history (
    -- Not AUTOINCREMENT (it costs a sqlite_sequence update per insert): a new id is max(id) + 1, so it can only
    -- reuse ids of rows purged from the top of the table, and is still above every row that exists. What ordering
    -- and item ranges need holds: ids increase with insertion among existing rows.
    id INTEGER PRIMARY KEY,
    req INTEGER NOT NULL,                  -- history_requests.id (no foreign key: it would cost a lookup per row)
    ts INTEGER NOT NULL,                   -- the request's, copied for the indexes below
    tenant TEXT NOT NULL,                  -- the request's, copied for the indexes below
    indicator_type TEXT,
    indicator_value TEXT NOT NULL,         -- as sent
    indicator_normalized TEXT,
    item TEXT NOT NULL                     -- JSON members (no braces) of the indicator-level fields; see recordJson
  ) STRICT;
  CREATE INDEX history_tenant_itype ON history (tenant, indicator_type, ts, id);
  -- A prefix expression: one over-long value must not bloat the index (and PostgreSQL refuses entries over ~2.7 kB).
  CREATE INDEX history_tenant_ivalue ON history (tenant, substr(indicator_value, 1, ${MAX_INDEXED_CHARS}), ts, id);

  -- Billing counters: one row per (tenant, key, UTC day), kept when history is purged.
  CREATE TABLE usage (
    tenant TEXT NOT NULL,
    day TEXT NOT NULL,                     -- YYYY-MM-DD UTC
    key_id TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (tenant, day, key_id)
  ) STRICT, WITHOUT ROWID;
  CREATE INDEX usage_key_day ON usage (key_id, day);
  `

export default migration
