/** The request envelope of the history benches' records: one bulk request of `count` items by a bench key. */
import { randomUUID } from 'node:crypto'
import type { HistoryEnvelope } from '../src/history/types.ts'

export function benchEnvelope (count: number): HistoryEnvelope {
  return {
    date: new Date().toISOString(),
    request_id: randomUUID(),
    bulk_request_id: randomUUID(),
    http_status: 200,
    auth_type: 'api_key',
    tenant: 'bench',
    apikey: 'benchkeyaaaa',
    user_id: null,
    evidence_details: 'none',
    label_details: 'top',
    source: { channel: 'siem', product: 'bench' },
    scoring_version: null,
    query_type: 'bench',
    project_id: null,
    project_name: null,
    count
  }
}
