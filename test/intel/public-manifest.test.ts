import assert from 'node:assert/strict'
import { join } from 'node:path'
import { test } from 'node:test'
import { loadManifest } from '../../src/intel/index.ts'

const kPublic = join(import.meta.dirname, '..', '..', 'data', 'feeds', 'public-manifest.json')

test('the shipped public manifest is valid and fetches every feed over https into the data directory', async () => {
  const specs = await loadManifest(kPublic, { feedsDir: '/data/feeds' })
  assert.ok(specs.length >= 8)
  for (const spec of specs) {
    assert.ok(spec.remote !== undefined, spec.name)
    assert.match(spec.remote.url, /^https:\/\//)
    assert.equal(spec.path, `/data/feeds/${spec.name}.feed`)
  }
  // abuse.ch keys come from the environment, never from the file.
  const abusech = specs.filter((s) => s.remote?.url.includes('abuse.ch'))
  assert.equal(abusech.length, 4)
  for (const s of abusech) assert.equal(s.remote?.headers['auth-key'], '$' + '{ABUSECH_AUTH_KEY}')
})

test('a manifest with fetched feeds but no data directory is refused', async () => {
  await assert.rejects(loadManifest(kPublic), /needs a data directory/)
})
