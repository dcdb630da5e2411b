/**
 * Changes other instances must apply to their next request, announced by PostgreSQL itself: triggers on the tables
 * whose rows instances cache (api_keys, allowlist) call pg_notify on one channel, so every writer announces them, an
 * instance's routes, the CLI and a hand-written UPDATE alike. A notification is sent when its transaction commits,
 * never for one rolled back, and identical ones of one transaction are sent once.
 *
 * Payload (text): `<schema>|<table>|<id>` where id is the key id (api_keys) or the tenant (allowlist). Several
 * deployments may share a database and a channel is database-wide, so a listener keeps only its schema's.
 */

/** The channel every change is announced on. */
export const kChangesChannel = 'ioc_verdict_changes'

/** A change as a listener receives it. */
export interface StoreChange {
  table: 'api_keys' | 'allowlist'
  /** api_keys: the key id; allowlist: the tenant. */
  id: string
}

/** The change a notification payload names, or null when it belongs to another schema or is not one of ours. */
export function parseChange (payload: string | undefined, schema: string): StoreChange | null {
  if (payload === undefined) return null
  const first = payload.indexOf('|')
  const second = payload.indexOf('|', first + 1)
  if (first < 0 || second < 0 || payload.slice(0, first) !== schema) return null
  const table = payload.slice(first + 1, second)
  if (table !== 'api_keys' && table !== 'allowlist') return null
  return { table, id: payload.slice(second + 1) }
}

/**
 * The migration adding the triggers. api_keys announces the columns a verified key's record carries (last_used_at,
 * written once a minute per key, is left out: it changes nothing a request decides on); allowlist every write.
 */
export function changesSchema (s: string): string {
  return `
  CREATE FUNCTION ${s}.announce_change() RETURNS trigger LANGUAGE plpgsql AS $$
  DECLARE
    id text;
  BEGIN
    IF TG_TABLE_NAME = 'api_keys' THEN
      id := CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END;
    ELSE
      id := CASE WHEN TG_OP = 'DELETE' THEN OLD.tenant ELSE NEW.tenant END;
    END IF;
    PERFORM pg_notify('${kChangesChannel}', TG_TABLE_SCHEMA || '|' || TG_TABLE_NAME || '|' || id);
    RETURN NULL;
  END $$;
  CREATE TRIGGER api_keys_announce AFTER UPDATE OF revoked_at, expires_at, permissions, quota, rate_limit, allowed_cidrs, tenant, secret_hash OR DELETE
    ON ${s}.api_keys FOR EACH ROW EXECUTE FUNCTION ${s}.announce_change();
  CREATE TRIGGER allowlist_announce AFTER INSERT OR UPDATE OR DELETE
    ON ${s}.allowlist FOR EACH ROW EXECUTE FUNCTION ${s}.announce_change();
  `
}
