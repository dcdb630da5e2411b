/**
 * The dashboard's Retro-hunt page in headless Chromium: an analyst sees the tenant's hits newest first (never another
 * tenant's), filters them by score and category, and goes from a hit to its Lookup with the explanation. The hits
 * are recorded through the store as a pass records them (test/e2e/retro-hunt.test.ts covers the pass itself). Any
 * console error or request to another host fails the test.
 */
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { test } from 'node:test'
import { chromium, type Page } from 'playwright-core'
import { newHit } from '../fixtures/retro-hits.ts'
import { build } from '../helper.ts'

const kChromium = process.env.IOC_TEST_CHROMIUM ?? '/usr/bin/chromium'
const kPassword = 'correct horse battery staple'

test('the Retro-hunt page lists the tenant\'s hits newest first, filters them and leads to their Lookup', {
  timeout: 180_000,
  skip: existsSync(kChromium) ? false : `no Chromium at ${kChromium} (apt-get install chromium)`
}, async (t) => {
  const svc = await build(t)
  const base = await svc.app.listen({ port: 0, host: '127.0.0.1' })
  await svc.store.accounts.createUser({ tenant: 'soc-a', username: 'ana', role: 'analyst', password: kPassword })
  const t0 = Date.now()
  await svc.store.retroHunt.addHits([newHit('soc-a', 'older-hit.example', 70, 'malware')], t0 - 60_000)
  await svc.store.retroHunt.addHits([newHit('soc-a', 'malware-c2.example', 90, 'botnet')], t0)
  await svc.store.retroHunt.addHits([newHit('soc-b', 'tenant-b-hit.example', 95, 'malware')], t0)

  const browser = await chromium.launch({ executablePath: kChromium, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'] })
  t.after(async () => { await browser.close() })
  const problems: string[] = []
  const page: Page = await (await browser.newContext()).newPage()
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`) })
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`))
  page.on('request', (r) => { if (!r.url().startsWith(base) && !r.url().startsWith('data:')) problems.push(`request to ${r.url()}`) })

  await page.goto(`${base}/dashboard/`)
  await page.getByLabel('Username', { exact: true }).fill('ana')
  await page.getByLabel('Password', { exact: true }).fill(kPassword)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByRole('button', { name: 'Sign out' }).waitFor()
  assert.deepEqual(problems.filter((p) => !p.includes('status of 401')), [])
  problems.length = 0

  await page.getByRole('button', { name: 'Retro-hunt' }).click()
  const rows = page.locator('#retro-table tbody tr')
  await rows.first().waitFor()
  const values = await page.locator('#retro-table tbody tr td:nth-child(2)').allTextContents()
  assert.deepEqual(values, ['malware-c2.example', 'older-hit.example'], 'newest first, only the tenant\'s')
  const first = (await rows.first().textContent()) ?? ''
  assert.match(first, /50 unknown/)
  assert.match(first, /botnet/)
  assert.match(first, /listed: malware-c2\.example \(feed\)/)
  assert.doesNotMatch((await page.locator('#page-retro').textContent()) ?? '', /tenant-b-hit/)

  await page.getByLabel('Minimum score').fill('80')
  await page.getByRole('button', { name: 'Filter' }).click()
  await page.locator('#retro-table tbody tr').nth(1).waitFor({ state: 'detached' })
  assert.deepEqual(await page.locator('#retro-table tbody tr td:nth-child(2)').allTextContents(), ['malware-c2.example'])
  await page.getByLabel('Minimum score').fill('')
  await page.locator('#page-retro').getByLabel('Category').fill('no-such-category')
  await page.getByRole('button', { name: 'Filter' }).click()
  await page.getByRole('status').filter({ hasText: 'No retro-hunt hits match.' }).waitFor()
  await page.locator('#page-retro').getByLabel('Category').fill('')
  await page.getByRole('button', { name: 'Filter' }).click()
  await page.locator('#retro-table tbody tr').nth(1).waitFor()

  const answer = page.waitForResponse((r) => r.url().endsWith('/dashboard/api/lookup'))
  await page.getByRole('button', { name: 'Look up malware-c2.example' }).click()
  const id = ((await (await answer).json()) as { meta: { request_id: string } }).meta.request_id
  await page.locator(`#lookup-result:not([hidden])[data-request-id="${id}"]`).waitFor()
  assert.equal(await page.getByLabel('Indicator', { exact: true }).inputValue(), 'malware-c2.example')
  assert.ok((await page.locator('#evidence tbody tr').count()) > 0, 'the lookup explains the verdict')
  assert.deepEqual(problems, [])
})
