/**
 * The dashboard's feedback and allowlist pages in headless Chromium (Debian's package, driven by playwright-core): an
 * analyst marks a lookup a false positive (keyboard only), takes the allowlist offer and sees the next lookup get the
 * tenant_allowlist signal; finds the entry and the per-signal summary on the Feedback page; adds and removes an entry
 * on the Allowlist page and sees lookups follow; and a user of another tenant sees none of it. Any console error or
 * request to another host fails the test.
 */
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { test } from 'node:test'
import { chromium, type Page } from 'playwright-core'
import { build } from '../helper.ts'

type Json = Record<string, any>

const kChromium = process.env.IOC_TEST_CHROMIUM ?? '/usr/bin/chromium'

const kPassword = 'correct horse battery staple'

async function signIn (page: Page, base: string, username: string): Promise<void> {
  await page.goto(`${base}/dashboard/`)
  await page.getByLabel('Username', { exact: true }).fill(username)
  await page.getByLabel('Password', { exact: true }).fill(kPassword)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByRole('button', { name: 'Sign out' }).waitFor()
}

async function lookUp (page: Page, value: string): Promise<{ category: string, signals: string[] }> {
  await page.getByRole('button', { name: 'Lookup' }).click()
  const field = page.getByLabel('Indicator', { exact: true })
  await field.fill(value)
  const answer = page.waitForResponse((r) => r.url().endsWith('/dashboard/api/lookup'))
  await field.press('Enter')
  const id = ((await (await answer).json()) as Json).meta.request_id as string
  await page.locator(`#lookup-result:not([hidden])[data-request-id="${id}"]`).waitFor()
  return {
    category: (await page.locator('#v-category').textContent()) ?? '',
    signals: await page.locator('#evidence tbody tr td:first-child').allTextContents()
  }
}

test('an analyst marks a false positive, allowlists it from the lookup, reviews feedback and manages the allowlist; another tenant sees none of it', {
  timeout: 180_000,
  skip: existsSync(kChromium) ? false : `no Chromium at ${kChromium} (apt-get install chromium)`
}, async (t) => {
  const svc = await build(t)
  const base = await svc.app.listen({ port: 0, host: '127.0.0.1' })
  await svc.store.accounts.createUser({ tenant: 'soc-a', username: 'ana', role: 'analyst', password: kPassword })
  await svc.store.accounts.createUser({ tenant: 'soc-b', username: 'bo', role: 'analyst', password: kPassword })
  // Tenant B's own feedback and allowlist entry, made with its key: ana must never see them.
  const keyB = await svc.makeKey(['mgmt', 'verdict'], { tenant: 'soc-b' })
  const headersB = { 'x-api-key': keyB }
  assert.equal((await svc.app.inject({ method: 'POST', url: '/api/v2/mgmt/feedback', headers: headersB, payload: { indicator: { value: '198.51.100.23' }, verdict: 'true_positive', note: 'tenant-b-note' } })).statusCode, 201)
  assert.equal((await svc.app.inject({ method: 'POST', url: '/api/v2/mgmt/allowlist', headers: headersB, payload: { kind: 'domain', value: 'tenant-b-only.example', reason: `tenant-b-reason \u202Egnp.exe ${'w'.repeat(400)}` } })).statusCode, 201)

  const browser = await chromium.launch({ executablePath: kChromium, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'] })
  t.after(async () => { await browser.close() })
  const problems: string[] = []
  const watch = (page: Page): Page => {
    page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`) })
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`))
    page.on('request', (r) => { if (!r.url().startsWith(base) && !r.url().startsWith('data:') && !r.url().startsWith('blob:')) problems.push(`request to ${r.url()}`) })
    return page
  }
  /** Before sign-in the page asks for a session and gets 401, which the browser logs: the only problem allowed. */
  const signedIn = (): void => {
    assert.deepEqual(problems.filter((p) => !p.includes('status of 401')), [])
    problems.length = 0
  }
  const page = watch(await (await browser.newContext()).newPage())
  await signIn(page, base, 'ana')
  signedIn()

  // ---- Lookup: False positive, by keyboard, then the allowlist offer
  const before = await lookUp(page, 'malware-c2.example')
  assert.notEqual(before.category, 'allowlisted')
  assert.ok(before.signals.length > 0)
  await page.getByLabel('Note', { exact: true }).fill('our sinkhole')
  await page.getByLabel('Note', { exact: true }).press('Tab')
  assert.equal(await page.locator(':focus').textContent(), 'False positive', 'Tab reaches the labelled button')
  await page.keyboard.press('Enter')
  await page.getByRole('status').filter({ hasText: 'Recorded as a false positive' }).waitFor()
  const offer = page.locator('#offer-form')
  await offer.waitFor()
  assert.equal(await offer.getByLabel('Allowlist entry').inputValue(), 'domain_suffix')
  assert.equal(await offer.getByLabel('Entry value').inputValue(), 'malware-c2.example')
  assert.equal(await offer.getByLabel('Reason').inputValue(), 'false positive: our sinkhole')
  await offer.getByLabel('Allowlist entry').selectOption('domain')
  assert.equal(await offer.getByLabel('Entry value').inputValue(), 'malware-c2.example')
  await offer.getByRole('button', { name: 'Add to allowlist' }).click()
  await page.getByRole('status').filter({ hasText: 'Added to the allowlist' }).waitFor()
  assert.ok(await offer.isHidden())

  const after = await lookUp(page, 'malware-c2.example')
  assert.equal(after.category, 'allowlisted')
  assert.deepEqual(after.signals, ['Tenant allowlist'])
  assert.equal(await page.locator('#v-score').textContent(), '0')

  // The entry was recorded through the API with the session as its author.
  const fb = (await svc.store.listFeedback('soc-a', {}, 10, null)).entries
  assert.equal(fb.length, 1)
  assert.deepEqual([fb[0]?.verdict, fb[0]?.note, fb[0]?.createdBy, fb[0]?.indicatorNormalized], ['false_positive', 'our sinkhole', 'user:ana', 'malware-c2.example'])

  // ---- Feedback page: the entry and the per-signal summary
  await page.getByRole('button', { name: 'Feedback' }).click()
  const fbRows = page.locator('#fbl-table tbody tr')
  await fbRows.first().waitFor()
  assert.equal(await fbRows.count(), 1)
  const row = (await fbRows.first().textContent()) ?? ''
  assert.match(row, /malware-c2\.example/)
  assert.match(row, /false positive/)
  assert.match(row, /our sinkhole/)
  assert.match(row, /user:ana/)
  assert.doesNotMatch((await page.locator('#page-feedback').textContent()) ?? '', /tenant-b-note/)
  const summary = await page.locator('#summary-table tbody tr').evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)))
  assert.deepEqual(summary.map((r) => r[0]).sort(), [...(fb[0]?.signalIds ?? [])].sort())
  for (const r of summary) assert.deepEqual(r.slice(1), ['1', '0', '100%'])
  assert.match((await page.locator('#summary-totals').textContent()) ?? '', /^1 false positives and 0 true positives/)
  // Filters: a true-positive search finds nothing; the signal filter finds the entry.
  await page.locator('#page-feedback').getByLabel('Verdict').selectOption('true_positive')
  await page.locator('#page-feedback').getByRole('button', { name: 'Search' }).click()
  await page.getByRole('status').filter({ hasText: 'No feedback matches.' }).waitFor()
  await page.locator('#page-feedback').getByLabel('Verdict').selectOption('')
  await page.locator('#page-feedback').getByLabel('Signal id').fill(summary[0]?.[0] ?? '')
  await page.locator('#page-feedback').getByRole('button', { name: 'Search' }).click()
  await fbRows.first().waitFor()
  assert.equal(await fbRows.count(), 1)

  // ---- Allowlist page: the lookup's entry, one added here (and seen by the next lookup), then removed
  await page.getByRole('button', { name: 'Allowlist' }).click()
  const alRows = page.locator('#allow-table tbody tr')
  await alRows.first().waitFor()
  assert.equal(await alRows.count(), 1)
  assert.match((await alRows.first().textContent()) ?? '', /malware-c2\.example.*false positive: our sinkhole.*user:ana.*never/)
  assert.doesNotMatch((await page.locator('#page-allowlist').textContent()) ?? '', /tenant-b/)
  const form = page.locator('#allow-form')
  await form.getByLabel('Kind').selectOption('ip_block')
  await form.getByLabel('Value').fill('198.51.100.0/24')
  await form.getByLabel('Reason').fill('lab range')
  await form.getByLabel('Expires on (UTC, optional)').fill(new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 10))
  await form.getByLabel('Reason').press('Enter')
  await page.getByRole('status').filter({ hasText: 'Added 198.51.100.0/24' }).waitFor()
  // The status is shown as the list is read again: wait for the new row rather than count at once.
  await alRows.nth(1).waitFor()
  assert.equal(await alRows.count(), 2)
  assert.match((await alRows.nth(1).textContent()) ?? '', /CIDR block.*198\.51\.100\.0\/24.*lab range/)

  const listed = await lookUp(page, '198.51.100.23')
  assert.equal(listed.category, 'allowlisted')
  assert.deepEqual(listed.signals, ['Tenant allowlist'])

  await page.getByRole('button', { name: 'Allowlist' }).click()
  await alRows.nth(1).waitFor()
  await page.getByRole('button', { name: 'Remove 198.51.100.0/24' }).click()
  await page.getByRole('status').filter({ hasText: 'Removed 198.51.100.0/24' }).waitFor()
  await page.getByRole('button', { name: 'Remove 198.51.100.0/24' }).waitFor({ state: 'detached' })
  assert.equal(await alRows.count(), 1)
  const unlisted = await lookUp(page, '198.51.100.23')
  assert.notEqual(unlisted.category, 'allowlisted')
  assert.ok(!unlisted.signals.includes('Tenant allowlist'))

  // ---- Another tenant's analyst: only tenant B's own entries
  await page.getByRole('button', { name: 'Sign out' }).click()
  await page.getByRole('button', { name: 'Sign in' }).waitFor()
  assert.deepEqual(problems, [])
  const pageB = watch(await (await browser.newContext()).newPage())
  await signIn(pageB, base, 'bo')
  signedIn()
  await pageB.getByRole('button', { name: 'Feedback' }).click()
  await pageB.locator('#fbl-table tbody tr').first().waitFor()
  const feedbackB = (await pageB.locator('#page-feedback').textContent()) ?? ''
  assert.match(feedbackB, /tenant-b-note/)
  assert.doesNotMatch(feedbackB, /our sinkhole|malware-c2/)
  // B's analyst did not write B's key's entry: no Delete button on it.
  assert.equal(await pageB.locator('#fbl-table tbody button').count(), 0)
  await pageB.getByRole('button', { name: 'Allowlist' }).click()
  await pageB.locator('#allow-table tbody tr').first().waitFor()
  const allowB = (await pageB.locator('#allow-table tbody').textContent()) ?? ''
  assert.match(allowB, /tenant-b-only\.example/)
  assert.doesNotMatch(allowB, /malware-c2|sinkhole/)
  // A right-to-left override in the reason is shown as its code point, not obeyed; a 400-character word wraps.
  assert.ok(allowB.includes('tenant-b-reason [U+202E]gnp.exe'), allowB.slice(0, 200))
  assert.ok(!allowB.includes('\u202E'))
  const [wide, window] = await pageB.evaluate<number[]>('[document.documentElement.scrollWidth, document.documentElement.clientWidth]')
  assert.ok((wide as number) <= (window as number), `page ${wide as number} px wide in a ${window as number} px window`)
  const lookupB = await lookUp(pageB, 'malware-c2.example')
  assert.notEqual(lookupB.category, 'allowlisted', 'tenant A\'s entry never reaches tenant B')
  assert.deepEqual(problems, [])
})

test('feedback entries are deleted from the Feedback page by their author, and the summary follows', {
  timeout: 120_000,
  skip: existsSync(kChromium) ? false : `no Chromium at ${kChromium} (apt-get install chromium)`
}, async (t) => {
  const svc = await build(t)
  const base = await svc.app.listen({ port: 0, host: '127.0.0.1' })
  await svc.store.accounts.createUser({ tenant: 'soc-c', username: 'cy', role: 'analyst', password: kPassword })
  const browser = await chromium.launch({ executablePath: kChromium, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'] })
  t.after(async () => { await browser.close() })
  const page = await browser.newPage()
  const problems: string[] = []
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`) })
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`))
  await signIn(page, base, 'cy')
  // Before sign-in the page asks for a session and gets 401, which the browser logs: the only problem allowed.
  assert.deepEqual(problems.filter((p) => !p.includes('status of 401')), [])
  problems.length = 0
  await lookUp(page, 'AS64500')
  await page.getByRole('button', { name: 'True positive' }).click()
  await page.getByRole('status').filter({ hasText: 'Recorded as a true positive' }).waitFor()
  assert.ok(await page.locator('#offer-form').isHidden(), 'a true positive offers no allowlist entry')
  await lookUp(page, '198.51.100.23')
  await page.getByRole('button', { name: 'False positive' }).click()
  await page.getByRole('status').filter({ hasText: 'Recorded as a false positive' }).waitFor()
  await page.getByRole('button', { name: 'Not now' }).click()
  assert.ok(await page.locator('#offer-form').isHidden())

  await page.getByRole('button', { name: 'Feedback' }).click()
  const rows = page.locator('#fbl-table tbody tr')
  await rows.nth(1).waitFor()
  assert.match((await rows.first().textContent()) ?? '', /198\.51\.100\.23/, 'newest first')
  await page.getByRole('button', { name: 'Delete feedback on 198.51.100.23' }).click()
  await page.getByRole('status').filter({ hasText: 'Deleted the feedback on 198.51.100.23' }).waitFor()
  assert.equal(await rows.count(), 1)
  await page.locator('#summary-totals:text-matches("^0 false positives and 1 true positives")').waitFor()
  const left = (await svc.store.listFeedback('soc-c', {}, 10, null)).entries as Json[]
  assert.deepEqual(left.map((e) => e.indicatorNormalized), ['AS64500'])
  assert.deepEqual(problems, [])
})
