/**
 * Tables of the fleet (src/fleet/): the intel snapshot the leader publishes, in generations, the last good copies of
 * fetched feeds it shares with the next leader, and each instance's state. Only PostgreSQL has them: with SQLite
 * one instance serves alone.
 *
 * - intel_generations: one row per published snapshot: its number (increasing), the sha256 of its bytes (the snapshot
 *   file format of src/intel/cache.ts), their length and chunk count, its identity and who published it.
 * - intel_chunks: the bytes, in chunks of at most 4 MiB (bytea, stored uncompressed: a compiled snapshot hardly
 *   compresses and compressing 30 MB costs the leader a second of CPU per generation).
 * - fleet_feeds: per fetched feed, the leader's last good copy and its metadata (ETag, digest).
 * - fleet_instances: per instance, whether it leads, which generation it serves, its state, when last seen; the
 *   leader's row carries the sources' state it fetched (what followers show).
 */
export function fleetSchema (s: string): string {
  return `
  CREATE TABLE ${s}.intel_generations (
    generation bigint PRIMARY KEY,
    digest bytea NOT NULL,
    bytes bigint NOT NULL,
    chunks integer NOT NULL,
    version text NOT NULL,
    data_timestamp text NOT NULL,
    published_by text NOT NULL,
    published_at timestamptz NOT NULL
  );
  CREATE TABLE ${s}.intel_chunks (
    generation bigint NOT NULL REFERENCES ${s}.intel_generations (generation) ON DELETE CASCADE,
    seq integer NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (generation, seq)
  );
  ALTER TABLE ${s}.intel_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
  CREATE TABLE ${s}.fleet_feeds (
    name text PRIMARY KEY,
    meta jsonb NOT NULL,
    body bytea NOT NULL
  );
  ALTER TABLE ${s}.fleet_feeds ALTER COLUMN body SET STORAGE EXTERNAL;
  CREATE TABLE ${s}.fleet_instances (
    instance text PRIMARY KEY,
    leader boolean NOT NULL DEFAULT false,
    generation bigint,
    version text,
    state text NOT NULL,
    sources jsonb,
    started_at timestamptz NOT NULL,
    seen_at timestamptz NOT NULL
  );
  `
}
