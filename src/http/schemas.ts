/**
 * JSON schemas of the request bodies (docs/API.md "Request bodies"). Structure errors are 400 INVALID_REQUEST;
 * an indicator whose value is wrong is the single endpoint's INVALID_INDICATOR or a bulk item's `errors`,
 * so `type` and `value` are checked by the normalizer, not here.
 */
import type { FromSchema } from 'json-schema-to-ts'
import { kMaxValueChars } from '../bulk/chunk.ts'

/** Path parameters of a route on one stored entry (`/:id`: a key, allowlist or feedback id). */
export const kIdParams = {
  type: 'object',
  additionalProperties: false,
  required: ['id'],
  properties: { id: { type: 'string', minLength: 1, maxLength: 64 } }
} as const

const kDetail = {
  signal_details: { type: 'string', enum: ['none', 'top', 'all'] },
  evidence_details: { type: 'string', enum: ['none', 'summary', 'full'] }
} as const

const kLogOnly = {
  action_taken: { enum: ['block', 'allow', '', null] },
  action_source: { type: ['string', 'null'] }
} as const

/** Longest `source.*` string, in characters: each is stored in every history record of the request. */
const kMaxSourceString = 256

const kSourceString = { type: 'string', maxLength: kMaxSourceString } as const

const kSource = {
  type: 'object',
  additionalProperties: false,
  properties: {
    channel: kSourceString,
    product: kSourceString,
    integration_id: kSourceString,
    event_type: kSourceString,
    severity_hint: kSourceString
  }
} as const

const kContext = {
  type: 'object',
  properties: { flags: {} }
} as const

/** POST /api/v2/ioc/verdict body. */
export const singleBodySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['indicator'],
  properties: {
    indicator: {
      type: 'object',
      additionalProperties: false,
      required: ['value'],
      properties: { type: { type: ['string', 'null'] }, value: { type: 'string', maxLength: kMaxValueChars }, ...kLogOnly }
    },
    context: kContext,
    source: kSource,
    ...kDetail,
    ...kLogOnly
  }
} as const

/** POST /api/v2/ioc/verdict/bulk body. The 10,000 limit is checked by the handler to give TOO_MANY_INDICATORS. */
export const bulkBodySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['indicators'],
  properties: {
    indicators: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        properties: { type: {}, value: {}, ...kLogOnly }
      }
    },
    context: kContext,
    source: kSource,
    ...kDetail,
    scoring_version: { type: 'string', maxLength: 64 },
    query_type: { type: 'string', maxLength: 256 },
    project_id: { type: 'string', maxLength: 256 },
    project_name: { type: 'string', maxLength: 256 }
  }
} as const

/**
 * Body types after validation, derived from the schemas above: the schema is the one statement of a body's shape, for
 * validation, for the OpenAPI document and for the handlers' types.
 */
export type SingleBody = FromSchema<typeof singleBodySchema>
export type BulkBody = FromSchema<typeof bulkBodySchema>
export type SourceBody = FromSchema<typeof kSource>
