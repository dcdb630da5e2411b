/**
 * API key format, hashing and constant-time verification, shared by every store.
 *
 * A key is `iocv_<key id>_<secret>`: the id (12 base32 characters, 60 bits) is public and indexes the row;
 * the secret is 32 random bytes in base64url. Only sha256(secret) is stored. A slow KDF (scrypt, argon2) protects
 * low-entropy passwords against offline guessing; a 256-bit random secret cannot be guessed, so a fast hash is as
 * strong and keeps authentication off the CPU budget of the request path.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import { isIP } from 'node:net'
import ipaddr from 'ipaddr.js'
import { StoreError } from '../errors.ts'
import { parseDateTime } from '../history/utc-day.ts'
import { isoOf, isoOrNull, isUniqueViolation, listOf, type SqlPort } from './sql-port.ts'
import type { ApiKeyRecord, CreatedKey, CreateKeyOptions } from './types.ts'

/** Every permission a key may carry, in canonical order. */
export const PERMISSIONS = ['verdict', 'verdict_bulk', 'mgmt', 'admin'] as const
/** One of PERMISSIONS. */
export type Permission = typeof PERMISSIONS[number]

const kPrefix = 'iocv_'
const kIdAlphabet = 'abcdefghijklmnopqrstuvwxyz234567' // RFC 4648 base32, lowercase: no '_' so the key splits unambiguously
const kIdLength = 12
const kSecretBytes = 32
const kKeyPattern = /^iocv_([a-z2-7]{12})_([A-Za-z0-9_-]{43})$/
const kKeyLength = kPrefix.length + kIdLength + 1 + 43
const kHashBytes = 32
const kIdPattern = /^[a-z2-7]{12}$/
// Compared against when the id is unknown, so an unknown id costs the same work as a wrong secret.
const kDummyHash = createHash('sha256').update(randomBytes(kSecretBytes)).digest()
const kMaxTenantLength = 128
// Printable, no leading/trailing space: tenants appear in logs and CLI output.
const kTenantPattern = /^[^\s\p{Cc}](?:[^\p{Cc}]*[^\s\p{Cc}])?$/u

/** Parts of a well-formed key string. */
export interface ParsedKey {
  id: string
  secret: string
}

/** A new key and what the store keeps of it. */
export interface GeneratedKey {
  id: string
  key: string
  secretHash: Buffer
}

/** Validated options of a new key. */
export interface ValidKeyOptions {
  tenant: string
  permissions: Permission[]
  quota: number | null
  rateLimit: number | null
  expiresAt: string | null
  allowedCidrs: string[] | null
}

/** Most requests per minute a key's rate limit may name. */
export const kMaxRateLimit = 1_000_000
/** Most networks a key may be restricted to. */
export const kMaxAllowedCidrs = 64

/** Splits a presented key into id and secret, or returns null when it is not a well-formed key. */
export function parseKey (presented: unknown): ParsedKey | null {
  // The length check first keeps a huge header from reaching the regex.
  if (typeof presented !== 'string' || presented.length !== kKeyLength) return null
  const m = kKeyPattern.exec(presented)
  if (m === null) return null
  return { id: m[1] as string, secret: m[2] as string }
}

/** True when `id` has the shape of a key id. */
export function isKeyId (id: unknown): id is string {
  return typeof id === 'string' && kIdPattern.test(id)
}

/** sha256 of the secret's text, as stored. */
export function hashSecret (secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest()
}

/**
 * Compares the presented secret with the stored hash in constant time. With no stored hash (unknown id) it
 * compares against a dummy hash and returns false, so the response time does not tell which ids exist.
 */
export function secretMatches (storedHash: Uint8Array | null, secret: string): boolean {
  const presented = hashSecret(secret)
  const usable = storedHash !== null && storedHash.length === kHashBytes
  const expected = usable ? storedHash : kDummyHash
  const equal = timingSafeEqual(presented, expected)
  return equal && usable
}

/** Generates a key: random id, random secret, and the hash to store. */
export function generateKey (): GeneratedKey {
  const idBytes = randomBytes(kIdLength)
  let id = ''
  // 256 is a multiple of 32, so the low 5 bits of a uniform byte are uniform: no modulo bias.
  for (const b of idBytes) id += kIdAlphabet[b & 31]
  const secret = randomBytes(kSecretBytes).toString('base64url')
  return { id, key: `${kPrefix}${id}_${secret}`, secretHash: hashSecret(secret) }
}

/** Validates tenant, permissions and quota of a new key; throws INVALID_KEY_OPTIONS. */
export function validateKeyOptions (options: CreateKeyOptions): ValidKeyOptions {
  const { tenant, permissions, quota = null } = options
  if (typeof tenant !== 'string' || tenant.length === 0 || tenant.length > kMaxTenantLength || !kTenantPattern.test(tenant)) {
    throw new StoreError('INVALID_KEY_OPTIONS', `tenant must be 1 to ${kMaxTenantLength} printable characters without surrounding spaces`)
  }
  if (!Array.isArray(permissions) || permissions.length === 0) {
    throw new StoreError('INVALID_KEY_OPTIONS', `permissions must list at least one of ${PERMISSIONS.join(', ')}`)
  }
  const wanted = new Set<string>()
  for (const p of permissions) {
    if (typeof p !== 'string' || !(PERMISSIONS as readonly string[]).includes(p)) {
      throw new StoreError('INVALID_KEY_OPTIONS', `unknown permission ${JSON.stringify(String(p)).slice(0, 40)}; known: ${PERMISSIONS.join(', ')}`)
    }
    wanted.add(p)
  }
  if (quota !== null && (!Number.isSafeInteger(quota) || quota < 0)) {
    throw new StoreError('INVALID_KEY_OPTIONS', 'quota must be a non-negative integer (indicators per UTC day) or null')
  }
  const { rateLimit = null, expiresAt = null, allowedCidrs = null } = options
  if (rateLimit !== null && (!Number.isSafeInteger(rateLimit) || rateLimit < 1 || rateLimit > kMaxRateLimit)) {
    throw new StoreError('INVALID_KEY_OPTIONS', `rate_limit must be an integer from 1 to ${kMaxRateLimit} (requests per minute) or null`)
  }
  let expires: string | null = null
  if (expiresAt !== null) {
    const ms = parseDateTime(expiresAt) ?? NaN
    if (!Number.isFinite(ms)) throw new StoreError('INVALID_KEY_OPTIONS', 'expires_at must be an ISO 8601 date-time with a time zone, e.g. 2027-01-31T00:00:00Z')
    if (ms <= Date.now()) throw new StoreError('INVALID_KEY_OPTIONS', 'expires_at must be in the future')
    expires = new Date(ms).toISOString()
  }
  return { tenant, permissions: PERMISSIONS.filter((p) => wanted.has(p)), quota, rateLimit, expiresAt: expires, allowedCidrs: allowedCidrs === null ? null : canonicalCidrs(allowedCidrs) }
}

/**
 * An address or CIDR block as its canonical block (host bits cleared; a bare address is its /32 or /128), or null.
 * Dotted-decimal IPv4 and standard IPv6 only: ipaddr.js alone also reads inet_aton's forms, in which 010.0.0.0/8 is
 * 8.0.0.0/8 (octal) and 2130706433 is 127.0.0.1, and a zone (%eth0) means nothing for a peer address.
 */
export function canonicalCidr (text: unknown): string | null {
  if (typeof text !== 'string' || text.length > 64) return null
  const slash = text.indexOf('/')
  const ip = slash === -1 ? text : text.slice(0, slash)
  // A prefix length without leading zeros, as the address has none (10.0.0.0/00 would be every address).
  if (isIP(ip) === 0 || ip.includes('%') || (slash !== -1 && !/^(?:0|[1-9]\d{0,2})$/.test(text.slice(slash + 1)))) return null
  let addr: ipaddr.IPv4 | ipaddr.IPv6
  let bits: number
  try {
    [addr, bits] = slash === -1 ? [ipaddr.parse(ip), isIP(ip) === 4 ? 32 : 128] : ipaddr.parseCIDR(text)
  } catch {
    return null
  }
  const base = addr.kind() === 'ipv4'
    ? ipaddr.IPv4.networkAddressFromCIDR(`${addr.toString()}/${bits}`)
    : ipaddr.IPv6.networkAddressFromCIDR(`${addr.toString()}/${bits}`)
  return `${base.toString()}/${bits}`
}

/** Canonical CIDR strings of `allowed_cidrs` (canonicalCidr, duplicates once); throws INVALID_KEY_OPTIONS. */
export function canonicalCidrs (list: unknown): string[] {
  if (!Array.isArray(list) || list.length === 0 || list.length > kMaxAllowedCidrs) {
    throw new StoreError('INVALID_KEY_OPTIONS', `allowed_cidrs must list 1 to ${kMaxAllowedCidrs} networks, or be null`)
  }
  const out = new Set<string>()
  for (const item of list) {
    const cidr = canonicalCidr(item)
    if (cidr === null) throw new StoreError('INVALID_KEY_OPTIONS', `allowed_cidrs: ${JSON.stringify(String(item)).slice(0, 70)} is not an address or CIDR block`)
    out.add(cidr)
  }
  return [...out]
}

/** True when `ip` (as Node reports a peer, IPv4-mapped IPv6 included) lies in one of `cidrs`. */
export function addressAllowed (ip: string, cidrs: readonly string[]): boolean {
  let addr: ipaddr.IPv4 | ipaddr.IPv6
  try {
    addr = ipaddr.process(ip)
  } catch {
    return false
  }
  for (const c of cidrs) {
    const [net, bits] = ipaddr.parseCIDR(c)
    if (net.kind() === addr.kind() && addr.match(net, bits)) return true
  }
  return false
}

/** True when an expiry (ISO 8601, or null for never) has passed. */
export function expired (expiresAt: string | null, now = Date.now()): boolean {
  return expiresAt !== null && Date.parse(expiresAt) <= now
}

/** The record of a key just created from validated options. */
export function newKeyRecord (id: string, valid: ValidKeyOptions, createdAt: string): ApiKeyRecord {
  return {
    id,
    tenant: valid.tenant,
    permissions: valid.permissions,
    quota: valid.quota,
    createdAt,
    revokedAt: null,
    rateLimit: valid.rateLimit,
    expiresAt: valid.expiresAt,
    allowedCidrs: valid.allowedCidrs,
    lastUsedAt: null
  }
}

/** What a key asks for when it creates another key (POST /api/v2/mgmt/keys): a bound left out is undefined, null is "none". */
export interface KeyRequest {
  permissions: string[]
  quota?: number | null | undefined
  rateLimit?: number | null | undefined
  expiresAt?: string | null | undefined
  allowedCidrs?: string[] | null | undefined
}

function beyond (field: string, creator: string): StoreError {
  return new StoreError('INVALID_KEY_OPTIONS', `${field} must be within the creating key's own (${creator}): a key creates keys with at most its own bounds`)
}

/** A numeric bound (quota, rate limit) of a key created by a key with `own` (null: none). */
function atMost (field: string, own: number | null, wanted: number | null | undefined): number | null {
  if (own === null) return wanted ?? null
  if (wanted === undefined) return own
  if (wanted === null || wanted > own) throw beyond(field, String(own))
  return wanted
}

/** True when every network of `inner` lies inside one of `outer` (canonical CIDRs). */
function cidrsWithin (inner: readonly string[], outer: readonly string[]): boolean {
  return inner.every((c) => {
    const [net, bits] = ipaddr.parseCIDR(c)
    return outer.some((o) => {
      const [onet, obits] = ipaddr.parseCIDR(o)
      return onet.kind() === net.kind() && obits <= bits && net.match(onet, obits)
    })
  })
}

/**
 * The options of a key that `creator` creates, never more than its own: permissions it holds (`admin` holds all), a
 * quota and rate limit at most its own, an expiry no later, networks inside its own. A bound the request leaves out
 * is the creator's; one it names beyond the creator's (null, "none", included) throws INVALID_KEY_OPTIONS naming the
 * field. `defaultRateLimit` is the operator's limit for keys without one (null: none).
 */
export function withinCreator (creator: ApiKeyRecord, wanted: KeyRequest, defaultRateLimit: number | null): Omit<CreateKeyOptions, 'tenant'> {
  const all = creator.permissions.includes('admin')
  const missing = wanted.permissions.filter((p) => !all && !creator.permissions.includes(p))
  if (missing.length > 0) throw beyond('permissions', creator.permissions.join(', '))
  let expiresAt = wanted.expiresAt ?? null
  if (creator.expiresAt !== null) {
    if (wanted.expiresAt === undefined) expiresAt = creator.expiresAt
    else if (wanted.expiresAt === null || Date.parse(wanted.expiresAt) > Date.parse(creator.expiresAt)) throw beyond('expires_at', creator.expiresAt)
  }
  let allowedCidrs = wanted.allowedCidrs ?? null
  if (creator.allowedCidrs !== null) {
    if (wanted.allowedCidrs === undefined) allowedCidrs = creator.allowedCidrs
    else if (wanted.allowedCidrs === null || !cidrsWithin(canonicalCidrs(wanted.allowedCidrs), creator.allowedCidrs)) throw beyond('allowed_cidrs', creator.allowedCidrs.join(', '))
  }
  return {
    permissions: wanted.permissions,
    quota: atMost('quota', creator.quota, wanted.quota),
    rateLimit: atMost('rate_limit', creator.rateLimit ?? defaultRateLimit, wanted.rateLimit),
    expiresAt,
    allowedCidrs
  }
}

const kMaxKeyIdAttempts = 3 // 60-bit ids collide with negligible probability; retrying is cheaper than reasoning

/** A key row as either store returns it (sql-port.ts: lists and times in either form, bigint quota as text). */
interface KeyRow {
  id: string
  tenant: string
  permissions: unknown
  quota: string | number | null
  secret_hash: Buffer
  created_at: unknown
  revoked_at: unknown
  rate_limit: number | null
  expires_at: unknown
  allowed_cidrs: unknown
  last_used_at: unknown
}

function keyRecord (row: KeyRow): ApiKeyRecord {
  return {
    id: row.id,
    tenant: row.tenant,
    permissions: listOf(row.permissions),
    quota: row.quota === null ? null : Number(row.quota),
    createdAt: isoOf(row.created_at),
    revokedAt: isoOrNull(row.revoked_at),
    rateLimit: row.rate_limit,
    expiresAt: isoOrNull(row.expires_at),
    allowedCidrs: row.allowed_cidrs === null ? null : listOf(row.allowed_cidrs),
    lastUsedAt: isoOrNull(row.last_used_at)
  }
}

/** API keys over one store's SQL port (the Store methods of the same names). */
export class ApiKeys {
  readonly #db: SqlPort

  constructor (db: SqlPort) {
    this.#db = db
  }

  /** Creates a key and returns the only copy of its secret. */
  async create (options: CreateKeyOptions): Promise<CreatedKey> {
    const valid = validateKeyOptions(options)
    const createdAt = new Date().toISOString()
    for (let attempt = 1; ; attempt++) {
      const { id, key, secretHash } = generateKey()
      try {
        await this.#db.run('INSERT INTO {api_keys} (id, tenant, permissions, quota, secret_hash, created_at, rate_limit, expires_at, allowed_cidrs) ' +
          'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
        [id, valid.tenant, this.#db.list(valid.permissions), valid.quota, secretHash, createdAt, valid.rateLimit, valid.expiresAt, this.#db.list(valid.allowedCidrs)])
        return { key, record: newKeyRecord(id, valid, createdAt) }
      } catch (err) {
        if (!isUniqueViolation(err) || attempt >= kMaxKeyIdAttempts) throw err
      }
    }
  }

  /**
   * Creates a key only when the store holds none (the bootstrap key of a first start), in one transaction in which
   * callers take turns: instances starting together on an empty store make one key between them. Null when a key
   * exists.
   */
  async createFirst (options: CreateKeyOptions): Promise<CreatedKey | null> {
    return await this.#db.transaction(async (tx) => {
      await tx.turns('api-keys:first')
      const keys = new ApiKeys(tx)
      return await keys.count() > 0 ? null : await keys.create(options)
    })
  }

  /** Every key, oldest first, without secrets. */
  async list (): Promise<ApiKeyRecord[]> {
    return (await this.#db.all<KeyRow>('SELECT * FROM {api_keys} ORDER BY created_at, id COLLATE {bytes}', [])).map(keyRecord)
  }

  /** Revokes an active key; false for an unknown or already revoked id. */
  async revoke (id: string): Promise<boolean> {
    this.#db.assertOpen()
    if (!isKeyId(id)) return false
    return await this.#db.run('UPDATE {api_keys} SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL', [new Date().toISOString(), id]) === 1
  }

  /** Records a successful use of a key (never moves last_used_at back). */
  async touch (id: string, at: string): Promise<void> {
    await this.#db.run('UPDATE {api_keys} SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)', [at, id, at])
  }

  /** The active key matching `presented`, or null. */
  async verify (presented: string): Promise<ApiKeyRecord | null> {
    this.#db.assertOpen()
    const parsed = parseKey(presented)
    // The key format is public, so rejecting a malformed string early reveals nothing about stored keys.
    if (parsed === null) return null
    const row = (await this.#db.all<KeyRow>('SELECT * FROM {api_keys} WHERE id = ?', [parsed.id]))[0]
    const ok = secretMatches(row?.secret_hash ?? null, parsed.secret)
    if (!ok || row === undefined) return null
    const record = keyRecord(row)
    return record.revokedAt !== null || expired(record.expiresAt) ? null : record
  }

  /** Number of keys ever created, revoked ones included. */
  async count (): Promise<number> {
    const rows = await this.#db.all<{ n: number | string }>('SELECT count(*) AS n FROM {api_keys}', [])
    return Number(rows[0]?.n ?? 0)
  }
}
