/**
 * What SqliteStore and PostgresStore share: every Store method whose SQL is the same on both, each answered by the
 * module of its concern over the store's SQL port (sql-port.ts). The dialect classes add only what differs: opening
 * and migrating, history ingest, search and purge (docs/ARCHITECTURE.md, "Stores").
 */
import { Accounts } from './accounts.ts'
import { Allowlist } from './allowlist.ts'
import { ApiKeys } from './api-keys.ts'
import { Feedback } from './feedback.ts'
import type { SqlPort } from './sql-port.ts'
import type {
  AllowEntry, AllowPage, ApiKeyRecord, CreatedKey, CreateKeyOptions, FeedbackDeletion, FeedbackEntry, FeedbackFilters, FeedbackPage, FeedbackSummary,
  FeedbackSummaryFilters, NewAllowEntry, NewFeedback, UsageReport
} from './types.ts'
import { Usage } from './usage.ts'

/** The concern modules of one store, over its port. */
export abstract class SqlStore {
  /** Dashboard users and sessions. */
  readonly accounts: Accounts
  readonly #port: SqlPort
  readonly #keys: ApiKeys
  readonly #allowlist: Allowlist
  readonly #feedback: Feedback
  readonly #usage: Usage

  constructor (port: SqlPort) {
    this.#port = port
    this.accounts = new Accounts(port)
    this.#keys = new ApiKeys(port)
    this.#allowlist = new Allowlist(port)
    this.#feedback = new Feedback(port)
    this.#usage = new Usage(port)
  }

  /** Creates a key and returns the only copy of its secret. */
  async createKey (options: CreateKeyOptions): Promise<CreatedKey> {
    return await this.#keys.create(options)
  }

  /** Creates a key only when the store holds none, whatever starts at the same moment; null when one exists. */
  async createFirstKey (options: CreateKeyOptions): Promise<CreatedKey | null> {
    return await this.#keys.createFirst(options)
  }

  /** Every key, oldest first, without secrets. */
  async listKeys (): Promise<ApiKeyRecord[]> {
    return await this.#keys.list()
  }

  /** Revokes an active key; false for an unknown or already revoked id. */
  async revokeKey (id: string): Promise<boolean> {
    return await this.#keys.revoke(id)
  }

  /** Records a successful use of a key (never moves last_used_at back). */
  async touchKey (id: string, at: string): Promise<void> {
    await this.#keys.touch(id, at)
  }

  /** The active key matching `presented`, or null. */
  async verifyKey (presented: string): Promise<ApiKeyRecord | null> {
    return await this.#keys.verify(presented)
  }

  /** Number of keys ever created, revoked ones included. */
  async countKeys (): Promise<number> {
    return await this.#keys.count()
  }

  async addAllowEntry (entry: NewAllowEntry, most?: number): Promise<AllowEntry | null> {
    return await this.#allowlist.add(entry, most)
  }

  async listAllowEntries (tenant: string, limit: number, cursor: string | null, activeAt?: string): Promise<AllowPage> {
    return await this.#allowlist.list(tenant, limit, cursor, activeAt)
  }

  async deleteAllowEntry (tenant: string, id: string): Promise<boolean> {
    return await this.#allowlist.delete(tenant, id)
  }

  async addFeedback (entry: NewFeedback): Promise<FeedbackEntry> {
    return await this.#feedback.add(entry)
  }

  async listFeedback (tenant: string, filters: FeedbackFilters, limit: number, cursor: string | null): Promise<FeedbackPage> {
    return await this.#feedback.list(tenant, filters, limit, cursor)
  }

  async feedbackSummary (tenant: string, filters: FeedbackSummaryFilters): Promise<FeedbackSummary> {
    return await this.#feedback.summary(tenant, filters)
  }

  async deleteFeedback (tenant: string, id: string, onlyBy: string | null): Promise<FeedbackDeletion> {
    return await this.#feedback.delete(tenant, id, onlyBy)
  }

  /** Usage counters of a tenant, or of one of its keys, on one UTC day. */
  async usage (tenant: string, keyId: string | null, day: string): Promise<UsageReport> {
    return await this.#usage.report(tenant, keyId, day)
  }

  /** Counter of one key on one UTC day. */
  async usageForKey (keyId: string, day: string): Promise<number> {
    return await this.#usage.forKey(keyId, day)
  }

  /** How far a history journal is written into this store (saved in the history batch's transaction). */
  async journalPosition (journal: string): Promise<number> {
    const rows = await this.#port.all<{ position: number | string }>('SELECT position FROM {history_journal} WHERE journal = ?', [journal])
    return rows[0] === undefined ? 0 : Number(rows[0].position)
  }

  /** Throws when the database cannot answer. */
  async ping (): Promise<void> {
    await this.#port.all('SELECT 1', [])
  }
}
