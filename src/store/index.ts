/**
 * Entry point of the persistence layer: opens the configured store (migrated, ready to use) and quota counter.
 */
import { PostgresStore } from './postgres.ts'
import { MemoryQuota, RedisQuota, type QuotaCounter, type UsageSource } from './quota.ts'
import { SqliteStore } from './sqlite.ts'
import { StoreError } from '../errors.ts'
import type { Store } from './types.ts'
import type { StoreOptions } from '../config.ts'

export { ROLES, type Role, type UserRecord, type SessionRecord, type SessionTimes } from './accounts.ts'
export { PERMISSIONS, addressAllowed, canonicalCidr, expired, withinCreator, type Permission } from './api-keys.ts'
export { DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT, column, optionalColumn, type HistoryRow } from '../history/rows.ts'
export { HistoryItems, partRows, type HistoryPart } from '../history/block.ts'
export { PostgresStore, type PostgresStoreOptions } from './postgres.ts'
export { kMaxDeliveryLimit, WebhookStore, type DeliveryStatus, type Webhook, type WebhookDelivery, type WebhookWithSecret } from './webhooks.ts'
export { kMaxRetroHitLimit, RetroHuntStore, type HuntedSnapshot, type NewRetroHit, type RetroHit, type RetroHitFilters, type RetroHitPage } from './retro-hunt.ts'
export { MemoryQuota, RedisQuota } from './quota.ts'
export type { QuotaCounter, ReserveResult, UsageSource, MemoryQuotaOptions, RedisQuotaOptions } from './quota.ts'
export { SqliteStore, type SqliteStoreOptions } from './sqlite.ts'
export { StoreError, type StoreErrorCode } from '../errors.ts'
export { parseDateTime, utcDayOf, secondsUntilNextUtcMidnight } from '../history/utc-day.ts'
export type * from './types.ts'

export type { StoreOptions } from '../config.ts'

/** Which quota counter to open; `store` seeds counters from durable usage. */
export type QuotaOptions =
  | { kind: 'memory', store: UsageSource }
  | { kind: 'redis', url: string, store: UsageSource, prefix?: string }

/** Opens the store and runs its migrations; closes it again if they fail. */
export async function openStore (options: StoreOptions): Promise<Store> {
  let store: Store
  if (options.kind === 'sqlite') {
    store = new SqliteStore({ path: options.path })
  } else if (options.kind === 'postgres') {
    store = new PostgresStore(options.schema === undefined ? { url: options.url } : { url: options.url, schema: options.schema })
  } else {
    throw new StoreError('INVALID_OPTIONS', 'store kind must be sqlite or postgres')
  }
  try {
    await store.migrate()
  } catch (err) {
    await store.close()
    throw err
  }
  return store
}

/** Opens the quota counter; a Redis counter is pinged so a wrong URL fails at startup, not on the first request. */
export async function openQuota (options: QuotaOptions): Promise<QuotaCounter> {
  if (options.kind === 'memory') return new MemoryQuota({ store: options.store })
  if (options.kind !== 'redis') throw new StoreError('INVALID_OPTIONS', 'quota kind must be memory or redis')
  const quota = new RedisQuota(options.prefix === undefined
    ? { url: options.url, store: options.store }
    : { url: options.url, store: options.store, prefix: options.prefix })
  try {
    await quota.ping()
  } catch (err) {
    await quota.close()
    throw err
  }
  return quota
}
