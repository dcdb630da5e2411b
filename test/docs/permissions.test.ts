/**
 * The docs state the permissions the routes apply. search-history and usage take any key of the tenant, not `mgmt`
 * (the interface contract says of the replacement of the retired history route: "the same API key or a dashboard
 * session ... not gated on the history permission"): a key with `verdict` alone reads them, and neither docs/API.md nor docs/OPERATIONS.md says otherwise.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { buildForFile } from '../helper.ts'

const svc = buildForFile()
const kDocs = join(import.meta.dirname, '..', '..', 'docs')

test('a key with only the verdict permission reads search-history and usage, as the contract says', async () => {
  const key = await svc.makeKey(['verdict'])
  for (const url of ['/api/v2/mgmt/enrich-logs/search-history', '/api/v2/mgmt/usage']) {
    const res = await svc.app.inject({ url, headers: { 'x-api-key': key } })
    assert.equal(res.statusCode, 200, `${url}: ${res.body}`)
  }
})

test('docs/API.md and docs/OPERATIONS.md agree: search-history and usage need any key of the tenant, not mgmt', () => {
  const api = readFileSync(join(kDocs, 'API.md'), 'utf8')
  assert.match(api, /^\| `GET \/api\/v2\/mgmt\/enrich-logs\/search-history` \| any key of the tenant \|/m)
  assert.match(api, /^\| `GET \/api\/v2\/mgmt\/usage` \| any key of the tenant \|/m)
  for (const [name, text] of [['API.md', api], ['OPERATIONS.md', readFileSync(join(kDocs, 'OPERATIONS.md'), 'utf8')], ['DASHBOARD.md', readFileSync(join(kDocs, 'DASHBOARD.md'), 'utf8')]] as const) {
    // A sentence giving `mgmt` the history search or usage.
    for (const sentence of text.split(/(?<=\.)\s/)) {
      assert.doesNotMatch(sentence, /`mgmt`[^.]*\((?:[^)]*\b(?:history|usage)\b)[^)]*\)/, `${name}: ${sentence.trim().slice(0, 200)}`)
    }
  }
})
