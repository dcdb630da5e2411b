/**
 * JSON schemas of the answers, for the OpenAPI document (src/http/openapi.ts). They document; they never shape an
 * answer: the app serializes with JSON.stringify, so a member the schema does not name is still sent. The recorded
 * answers of every route are validated against them in test/http/openapi.test.ts.
 */
import { INDICATOR_TYPES } from '../engine/types.ts'

const kStrings = { type: 'array', items: { type: 'string' } } as const

/** Every error answer (docs/API.md "Errors"). */
export const errorSchema = {
  type: 'object',
  required: ['statusCode', 'code', 'error', 'message'],
  properties: {
    statusCode: { type: 'integer', example: 400 },
    code: { type: 'string', pattern: '^[A-Z_]+$', example: 'INVALID_ACTION_SOURCE' },
    error: { type: 'string', example: 'Bad Request' },
    message: { type: 'string' }
  }
} as const

const kSignal = {
  type: 'object',
  required: ['signal_id', 'direction', 'signal_subgroup', 'signal_group', 'signal_name'],
  properties: {
    signal_id: { type: 'string', example: 'sample_threatfox:exact' },
    direction: { type: 'string', enum: ['safe', 'malicious'] },
    signal_subgroup: { type: 'string' },
    signal_group: { type: 'string' },
    signal_name: { type: 'string' },
    evidence: {
      type: 'object',
      description: 'Omitted when evidence_details is none. `contribution` is the signed share of the score; source, match, ' +
        'age, decay and caps explain it (docs/API.md, docs/SCORING.md).',
      additionalProperties: true
    }
  }
} as const

const kGroupScore = {
  type: 'object',
  additionalProperties: {
    type: 'object',
    properties: { contribution: { type: 'number' }, signal_count: { type: 'integer' }, malicious: { type: 'integer' }, safe: { type: 'integer' } }
  }
} as const

const kRisk = {
  type: 'object',
  required: ['score', 'strength', 'category', 'evidence_saturation'],
  properties: {
    score: { type: 'integer', minimum: 0, maximum: 100, description: '0 no risk, 100 critical, 50 neutral' },
    strength: { type: 'string', enum: ['weak', 'medium', 'strong', 'very_strong'] },
    category: { type: 'string', example: 'malware' },
    evidence_saturation: { type: 'string', enum: ['none', 'sparse', 'limited', 'moderate', 'strong', 'full'] }
  }
} as const

const kIndicatorOut = {
  type: 'object',
  required: ['type', 'value'],
  properties: {
    type: { type: ['string', 'null'], description: `As sent or inferred: ${INDICATOR_TYPES.join(', ')}` },
    value: { type: 'string', description: 'Exactly as sent' },
    normalized: { type: 'string' }
  }
} as const

/**
 * A bulk item's indicator: type and value echo what was sent, which the bulk schema lets be any JSON value (such an
 * item is invalid and says why in its errors); the single route takes strings only.
 */
const kBulkIndicatorOut = {
  type: 'object',
  required: ['type', 'value'],
  properties: {
    type: { description: `As sent or inferred: ${INDICATOR_TYPES.join(', ')}, or null; any other value sent is echoed (an invalid item)` },
    value: { description: 'Exactly as sent: a string, or any other JSON value (an invalid item)' },
    normalized: { type: 'string' }
  }
} as const

const kActions = {
  type: 'array',
  items: { type: 'object', required: ['action', 'order'], properties: { action: { type: 'string', example: 'block' }, order: { type: 'integer' } } }
} as const

const kScores = {
  type: 'object',
  required: ['signal_groups', 'signal_subgroups'],
  properties: { signal_groups: kGroupScore, signal_subgroups: kGroupScore }
} as const

/** POST /api/v2/ioc/verdict 200 (docs/API.md "Verdicts"). */
export const verdictResultSchema = {
  type: 'object',
  required: ['indicator', 'risk', 'signals', 'signal_count', 'scores', 'threat_context', 'flags', 'recommended_actions', 'meta'],
  properties: {
    indicator: kIndicatorOut,
    risk: kRisk,
    signals: { type: 'array', items: kSignal },
    signal_count: { type: 'integer' },
    scores: kScores,
    threat_context: { type: 'object', additionalProperties: true },
    flags: kStrings,
    recommended_actions: kActions,
    meta: {
      type: 'object',
      required: ['engine_version', 'data_timestamp', 'cache_hit', 'query_time_ms', 'request_id', 'warnings', 'errors', 'detail_levels'],
      properties: {
        engine_version: { type: 'string', example: '0.1.0/2026-11' },
        data_timestamp: { type: 'string', format: 'date-time' },
        cache_hit: { type: 'boolean' },
        query_time_ms: { type: 'integer' },
        request_id: { type: 'string' },
        warnings: kStrings,
        errors: kStrings,
        detail_levels: {
          type: 'object',
          properties: { signal_details: { type: 'string' }, evidence_details: { type: 'string' } }
        }
      }
    }
  }
} as const

/** POST /api/v2/ioc/verdict/bulk 200 (docs/API.md "Bulk"): results[i] answers indicators[i]. */
export const bulkResultSchema = {
  type: 'object',
  required: ['meta', 'results'],
  properties: {
    meta: {
      type: 'object',
      required: ['engine_version', 'data_timestamp', 'bulk_request_id', 'signal_details', 'evidence_details', 'took_ms', 'record_count', 'warnings', 'errors'],
      properties: {
        engine_version: { type: 'string' },
        data_timestamp: { type: 'string', format: 'date-time' },
        bulk_request_id: { type: 'string' },
        signal_details: { type: 'string' },
        evidence_details: { type: 'string' },
        took_ms: { type: 'integer' },
        record_count: { type: 'integer' },
        warnings: kStrings,
        errors: kStrings
      }
    },
    results: {
      type: 'array',
      items: {
        type: 'object',
        required: ['indicator', 'risk', 'signals', 'signal_count', 'scores', 'threat_context', 'recommended_actions'],
        properties: {
          indicator: kBulkIndicatorOut,
          risk: { ...kRisk, type: ['object', 'null'], description: 'null for an invalid item (see errors)' },
          signals: { type: 'array', items: kSignal },
          signal_count: { type: 'integer' },
          scores: kScores,
          threat_context: { type: 'object', additionalProperties: true },
          recommended_actions: kActions,
          warnings: { ...kStrings, description: 'Present only when populated' },
          errors: { ...kStrings, description: 'Present only when populated (an invalid value)' }
        }
      }
    }
  }
} as const

/** GET /api/v2/ioc/health. */
export const healthSchema = {
  type: 'object',
  required: ['status', 'checks'],
  properties: {
    status: { type: 'string', enum: ['ok', 'degraded', 'unavailable'] },
    reasons: kStrings,
    checks: { type: 'object', additionalProperties: true }
  }
} as const

/** GET /livez and /readyz. */
export const probeSchema = {
  type: 'object',
  required: ['status'],
  properties: { status: { type: 'string', enum: ['ok', 'unavailable'] }, reasons: kStrings }
} as const

/** GET /api/v2/mgmt/enrich-logs/search-history. */
export const searchPageSchema = {
  type: 'object',
  required: ['results', 'next_cursor'],
  properties: {
    results: {
      type: 'array',
      items: {
        type: 'object',
        required: ['date', 'apikey', 'bulk_request_id', 'http_status', 'auth_type', 'indicator', 'evidence_details', 'label_details', 'risk', 'scores', 'labels', 'label_count'],
        properties: {
          date: { type: 'string', format: 'date-time' },
          request_id: { type: 'string' },
          bulk_request_id: { type: ['string', 'null'] },
          http_status: { type: 'integer' },
          auth_type: { type: 'string' },
          tenant: { type: 'string' },
          apikey: { type: 'string', description: 'The key id, never the key' },
          user_id: { type: ['string', 'null'] },
          indicator: { type: 'object', properties: { type: { type: ['string', 'null'] }, value: { type: 'string' }, normalized: { type: ['string', 'null'] } } },
          evidence_details: { type: 'string' },
          label_details: { type: 'string' },
          risk: { type: ['object', 'null'] },
          scores: { type: ['object', 'null'] },
          labels: { type: 'array', items: { type: 'object' } },
          label_count: { type: 'integer' },
          action_taken: { type: ['string', 'null'] },
          action_source: { type: ['string', 'null'] },
          source: { type: ['object', 'null'] },
          scoring_version: { type: ['string', 'null'] },
          query_type: { type: ['string', 'null'] },
          project_id: { type: ['string', 'null'] },
          project_name: { type: ['string', 'null'] }
        }
      }
    },
    next_cursor: { type: ['string', 'null'] }
  }
} as const

/** GET /api/v2/mgmt/usage. */
export const usageSchema = {
  type: 'object',
  required: ['tenant', 'day', 'keys', 'total', 'key'],
  properties: {
    tenant: { type: 'string' },
    day: { type: 'string', example: '2026-11-25' },
    keys: { type: 'array', items: { type: 'object', properties: { apikey: { type: 'string' }, count: { type: 'integer' } } } },
    total: { type: 'integer' },
    key: {
      type: 'object',
      properties: { apikey: { type: 'string' }, quota: { type: ['integer', 'null'] }, used: { type: 'integer' }, remaining: { type: ['integer', 'null'] } }
    }
  }
} as const

/** POST /api/v2/mgmt/intel/reload. */
export const reloadSchema = {
  type: 'object',
  required: ['version', 'data_timestamp', 'warm', 'build_ms'],
  properties: { version: { type: 'string' }, data_timestamp: { type: 'string', format: 'date-time' }, warm: { type: 'boolean' }, build_ms: { type: 'integer' } }
} as const

/** GET /api/v2/mgmt/intel/sources (docs/FEEDS.md). */
export const sourcesSchema = {
  type: 'object',
  required: ['sources', 'snapshot'],
  properties: {
    sources: {
      type: 'array',
      items: {
        type: 'object',
        required: ['name', 'status', 'records', 'last_attempt_at', 'last_success_at', 'error'],
        properties: {
          name: { type: 'string' },
          url: { type: 'string', description: 'Redacted: no credentials, no query values' },
          status: { type: 'string', enum: ['ok', 'stale', 'failed', 'pending'] },
          records: { type: 'integer' },
          bytes: { type: 'integer' },
          refresh_seconds: { type: 'integer' },
          last_attempt_at: { type: ['string', 'null'], format: 'date-time' },
          last_success_at: { type: ['string', 'null'], format: 'date-time' },
          last_change_at: { type: ['string', 'null'], format: 'date-time' },
          error: { type: ['string', 'null'] }
        }
      }
    },
    fleet: {
      type: 'object',
      description: 'With PostgreSQL: this instance, its role, the leader, the generation it serves and the instances seen in the last 30 s',
      properties: {
        instance: { type: 'string' },
        role: { type: 'string', enum: ['leader', 'follower'] },
        leader: { type: ['string', 'null'] },
        generation: { type: ['integer', 'null'] },
        published_generation: { type: ['integer', 'null'] },
        error: { type: ['string', 'null'] },
        instances: {
          type: 'array',
          items: {
            type: 'object',
            properties: {
              instance: { type: 'string' },
              leader: { type: 'boolean' },
              generation: { type: ['integer', 'null'] },
              version: { type: ['string', 'null'] },
              state: { type: 'string' },
              seen_at: { type: 'string', format: 'date-time' }
            }
          }
        }
      }
    },
    snapshot: {
      type: 'object',
      properties: {
        version: { type: 'string' },
        data_timestamp: { type: 'string' },
        build: {
          type: 'object',
          description: 'How the snapshot in use was obtained: whole from the disk cache (warm) or compiled; which sources that compile read and parsed, and how many it reused from the parts cache',
          properties: {
            warm: { type: 'boolean' },
            build_ms: { type: 'integer' },
            parsed: { type: 'array', items: { type: 'string' } },
            reused: { type: 'integer' }
          }
        },
        sources: {
          type: 'array',
          items: {
            type: 'object',
            properties: {
              name: { type: 'string' },
              kind: { type: 'string', enum: ['builtin', 'feed'] },
              indexed: { type: 'integer' },
              rejected: { type: 'integer' },
              parsed: { type: 'boolean', description: 'Read and parsed by the build that made this snapshot (false: its compiled part was reused)' },
              parse_ms: { type: 'integer' }
            }
          }
        }
      }
    }
  }
} as const

/** Error answers a route documents, by status. */
export function errorsOf (...statuses: number[]): Record<number, typeof errorSchema> {
  return Object.fromEntries(statuses.map((s) => [s, errorSchema]))
}
