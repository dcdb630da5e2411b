/**
 * Request fields shared by the single and bulk routes: log-only metadata, the history envelope, versions.
 */
import { createRequire } from 'node:module'
import type { FastifyRequest } from 'fastify'
import type { HistoryEnvelope } from '../history/types.ts'
import type { SourceBody } from './schemas.ts'

/** The package's version, the first half of engine_version. */
export const kPackageVersion = (createRequire(import.meta.url)('../../package.json') as { version: string }).version

/** engine_version: the engine release and the scoring profile that produced the verdicts. */
export function engineVersion (profileVersion: string): string {
  return `${kPackageVersion}/${profileVersion}`
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
  // A dashboard session stands in for a key (session.ts): its principal id is `user:<username>`.
  const session = req.session
  return { request_id: req.id, auth_type: session === null ? 'api_key' : 'session', tenant: key.tenant, apikey: key.id, user_id: session?.username ?? null, ...fields }
}
