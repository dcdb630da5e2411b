/**
 * Request fields shared by the single and bulk routes: log-only metadata, the history envelope, versions.
 */
import { createRequire } from 'node:module'
import type { FastifyRequest } from 'fastify'
import { InvalidActionSourceError } from '../errors.ts'
import type { HistoryEnvelope } from '../pool/history-types.ts'
import type { SourceBody } from './schemas.ts'

/** Longest action_source after trimming and lowercasing (spec 8). */
export const kMaxActionSource = 64

const kPackageVersion = (createRequire(import.meta.url)('../../package.json') as { version: string }).version

/** engine_version: the engine release and the scoring profile that produced the verdicts. */
export function engineVersion (profileVersion: string): string {
  return `${kPackageVersion}/${profileVersion}`
}

/**
 * Trimmed, lowercased action_source, or null when empty; throws INVALID_ACTION_SOURCE past 64 characters. `where`
 * prefixes the field's name in the error: a string, or a bulk item's index (`indicators[i].`), whose prefix is built
 * only when there is an error to name.
 */
export function normalizeActionSource (raw: string | null | undefined, where: string | number): string | null {
  if (raw === undefined || raw === null) return null
  const v = raw.trim().toLowerCase()
  if (v === '') return null
  // Length in characters (code points), as a user counts them. It is never more than the UTF-16 length, so it is
  // counted only when that is over the limit.
  if (v.length > kMaxActionSource) {
    const n = [...v].length
    if (n > kMaxActionSource) throw new InvalidActionSourceError(`${typeof where === 'number' ? `indicators[${where}].` : where}action_source is ${n} characters after trimming and lowercasing; the limit is ${kMaxActionSource}`)
  }
  return v
}

/** action_taken with empty meaning "not provided". */
export function normalizeActionTaken (raw: string | null | undefined): string | null {
  return raw === undefined || raw === null || raw === '' ? null : raw
}

/** The source object as recorded (only the documented string fields). */
export function sourceOf (body: SourceBody | undefined): HistoryEnvelope['source'] {
  if (body === undefined) return null
  const out: NonNullable<HistoryEnvelope['source']> = {}
  for (const k of ['channel', 'product', 'integration_id', 'event_type', 'severity_hint'] as const) {
    const v = body[k]
    if (typeof v === 'string') out[k] = v
  }
  return out
}

/** The envelope shared by a request's history records. */
export function envelopeOf (req: FastifyRequest, fields: Omit<HistoryEnvelope, 'request_id' | 'auth_type' | 'tenant' | 'apikey' | 'user_id'>): HistoryEnvelope {
  const key = req.apiKey
  if (key === null) throw new Error('envelopeOf called on an unauthenticated request')
  return { request_id: req.id, auth_type: 'api_key', tenant: key.tenant, apikey: key.id, user_id: null, ...fields }
}
