/**
 * The main thread's view of tenant allowlists: each tenant's entries as loaded from the store, with a version that
 * changes whenever the list is reloaded. A write through this instance invalidates the tenant at once (the next request
 * reloads); on PostgreSQL a write by another instance reaches invalidate() through the fleet's change notifications
 * (src/fleet/changes.ts), and kAllowlistTtlMs stays as the backstop for a notification that never arrives. Expired entries
 * drop out at request time. A tenant with no entries costs scoring nothing: its chunks carry no allowlist.
 */
import type { AllowKind, AllowRule } from '../engine/index.ts'
import type { AllowEntry, Store } from '../store/index.ts'

/** How long a loaded list is trusted before it is read again (backstop for a lost change notification). */
export const kAllowlistTtlMs = 2_000
/** Most entries a tenant may hold (they travel with every chunk of its requests). */
export const kMaxAllowEntries = 1_000

interface Loaded { version: number, at: number, rules: AllowRule[], expiring: boolean }

/** An entry as the scoring threads receive it. */
export function ruleOf (e: AllowEntry): AllowRule {
  return { id: e.id, kind: e.kind as AllowKind, value: e.value, reason: e.reason, created_by: e.createdBy, created_at: e.createdAt, expires_at: e.expiresAt }
}

/** Per-tenant allowlists, loaded on demand. */
export class TenantAllowlists {
  private readonly store: Pick<Store, 'listAllowEntries'>
  private readonly loaded = new Map<string, Loaded>()
  private readonly loading = new Map<string, Promise<Loaded>>()
  private version = 0

  constructor (store: Pick<Store, 'listAllowEntries'>) {
    this.store = store
  }

  /**
   * A tenant's entries active now, up to kMaxAllowEntries + 1. Expired ones are left out in the store: however many a
   * tenant holds, they neither count nor push newer entries past the bound.
   */
  async entries (tenant: string): Promise<AllowEntry[]> {
    const out: AllowEntry[] = []
    const now = new Date().toISOString()
    let cursor: string | null = null
    do {
      const page = await this.store.listAllowEntries(tenant, 500, cursor, now)
      out.push(...page.entries)
      cursor = page.nextCursor
    } while (cursor !== null && out.length <= kMaxAllowEntries)
    return out
  }

  private async load (tenant: string): Promise<Loaded> {
    const pending = this.loading.get(tenant)
    if (pending !== undefined) return await pending
    const p = this.read(tenant)
    this.loading.set(tenant, p)
    try {
      const l = await p
      // A write while this load ran invalidated it: its result serves only the requests that were waiting on it.
      if (this.loading.get(tenant) === p) this.loaded.set(tenant, l)
      return l
    } finally {
      if (this.loading.get(tenant) === p) this.loading.delete(tenant)
    }
  }

  private async read (tenant: string): Promise<Loaded> {
    const rules = (await this.entries(tenant)).map(ruleOf)
    return { version: ++this.version, at: Date.now(), rules, expiring: rules.some((r) => r.expires_at !== null) }
  }

  /** The tenant's active entries and the key naming this version of them, or undefined when it has none. */
  async forRequest (tenant: string): Promise<{ key: string, rules: AllowRule[] } | undefined> {
    const now = Date.now()
    let l = this.loaded.get(tenant)
    if (l === undefined || now - l.at >= kAllowlistTtlMs) l = await this.load(tenant)
    if (l.rules.length === 0) return undefined
    if (!l.expiring) return { key: `${tenant}|${l.version}`, rules: l.rules }
    const rules = l.rules.filter((r) => r.expires_at === null || Date.parse(r.expires_at) > now)
    if (rules.length === 0) return undefined
    // Entries only ever expire within a version, so the count of active ones tells the versions' states apart.
    return { key: `${tenant}|${l.version}|${rules.length}`, rules }
  }

  /** Forgets every tenant's list (change notifications may have been missed). */
  invalidateAll (): void {
    this.loaded.clear()
    this.loading.clear()
  }

  /** Forgets a tenant's list (after a write): the next request reloads it. */
  invalidate (tenant: string): void {
    this.loaded.delete(tenant)
    this.loading.delete(tenant)
  }
}
