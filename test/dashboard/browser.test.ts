/**
 * The dashboard in headless Chromium (Debian's package, driven by playwright-core): an analyst made with the CLI
 * signs in through the form, looks up an indicator and reads a waterfall that adds up to the score shown, finds the
 * query in History (and nothing of another tenant), is returned to sign-in once its cookie is gone, and signs out.
 * Any console error or request to another host fails.
 */
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { chromium } from 'playwright-core'
import { request } from 'undici'
import { build, kTestIntelCache, serviceEnv } from '../helper.ts'

export const kChromium = process.env.IOC_TEST_CHROMIUM ?? '/usr/bin/chromium'
const kMain = join(import.meta.dirname, '..', '..', 'bin', 'ioc-verdict.js')

test('an analyst signs in, looks up an indicator, finds it in History, and signs out', {
  timeout: 120_000,
  skip: existsSync(kChromium) ? false : `no Chromium at ${kChromium} (apt-get install chromium)`
}, async (t) => {
  const svc = await build(t)
  const base = await svc.app.listen({ port: 0, host: '127.0.0.1' })
  // The user is made as an operator would, with the CLI, the password on standard input.
  execFileSync(process.execPath, [kMain, 'users', 'create', '--tenant', 't1', '--username', 'ana', '--role', 'analyst', '--password-stdin'], {
    input: 'correct horse battery staple\n',
    env: serviceEnv({ IOC_DATA_DIR: svc.config.dataDir, IOC_INTEL_CACHE_DIR: kTestIntelCache, IOC_LOG_LEVEL: 'silent' })
  })
  // Another tenant's query, which the analyst must never see.
  const other = await svc.makeKey(['verdict'], { tenant: 'other-tenant' })
  await (await request(`${base}/api/v2/ioc/verdict`, { method: 'POST', headers: { 'x-api-key': other, 'content-type': 'application/json' }, body: JSON.stringify({ indicator: { value: 'other-tenant-secret.example' } }) })).body.dump()

  const browser = await chromium.launch({ executablePath: kChromium, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'] })
  t.after(async () => { await browser.close() })
  const page = await browser.newPage()
  const problems: string[] = []
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`) })
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`))
  page.on('request', (r) => { if (!r.url().startsWith(base) && !r.url().startsWith('data:') && !r.url().startsWith('blob:')) problems.push(`request to ${r.url()}`) })

  await page.goto(`${base}/`)
  await page.getByLabel('Username', { exact: true }).fill('ana')
  await page.getByLabel('Password', { exact: true }).fill('wrong password, surely')
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByRole('alert').filter({ hasText: 'username or password is wrong' }).waitFor()
  problems.length = 0 // the refused sign-in's 401 is logged by the browser as a failed resource
  await page.getByLabel('Password', { exact: true }).fill('correct horse battery staple')
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByRole('button', { name: 'Sign out' }).waitFor()

  await page.getByLabel('Indicator', { exact: true }).fill('hxxp://malware-c2[.]example/x')
  await page.keyboard.press('Enter')
  await page.locator('#lookup-result:not([hidden])').waitFor()
  const shown = Number(await page.locator('#v-score').textContent())
  const steps = await page.locator('#waterfall [data-step]').evaluateAll((gs) => gs.map((g) => ({ step: g.getAttribute('data-step'), value: Number(g.getAttribute('data-value')) })))
  assert.equal(steps[0]?.step, 'start')
  assert.equal(steps[0]?.value, 50)
  const signals = steps.filter((s) => s.step === 'signal')
  assert.ok(signals.length > 0, 'the verdict has signals')
  const total = 50 + signals.reduce((a, s) => a + s.value, 0)
  assert.equal(Math.round(Math.min(100, Math.max(0, total))), shown, 'the waterfall adds up to the score shown')
  assert.equal(Number(await page.locator('#waterfall svg').getAttribute('data-final')), shown)
  assert.equal(await page.locator('#evidence tbody tr').count(), signals.length)

  await page.getByRole('button', { name: 'History' }).click()
  await page.locator('#history-table tbody tr').first().waitFor()
  const history = await page.locator('#history-table tbody').textContent()
  assert.match(history ?? '', /hxxp:\/\/malware-c2\[\.\]example\/x/)
  assert.match(history ?? '', /ana/)
  assert.doesNotMatch(history ?? '', /other-tenant-secret/)

  // Bulk from a CSV file: its first column, the header left out, quoted fields read whole; input order kept in `#`.
  await page.getByRole('button', { name: 'Bulk' }).click()
  await page.getByLabel(/Upload a file/).setInputFiles({
    name: 'iocs.csv',
    mimeType: 'text/csv',
    buffer: Buffer.from('indicator,type\r\n10.0.0.1,ip\r\n"evil,comma.example",domain\r\nmalware-c2.example,domain\r\n"quoted""x.example"\r\n')
  })
  assert.equal(await page.getByLabel('Indicators (one per line, up to 10,000)').inputValue(), '10.0.0.1\nevil,comma.example\nmalware-c2.example\nquoted"x.example\n')
  await page.getByRole('button', { name: 'Score' }).click()
  await page.locator('#bulk-result:not([hidden])').waitFor()
  await page.getByRole('button', { name: 'Input order' }).click()
  const cells = await page.locator('#bulk-table tbody tr').evaluateAll((rows) => rows.map((r) => [r.children[0]?.textContent, r.children[1]?.textContent]))
  assert.deepEqual(cells, [['1', '10.0.0.1'], ['2', 'evil,comma.example'], ['3', 'malware-c2.example'], ['4', 'quoted"x.example']])
  assert.equal(await page.locator('#bulk-table th[aria-sort]').getAttribute('aria-sort'), 'ascending')
  assert.deepEqual(problems, [])

  // An analyst's Intel page asks for nothing an analyst may not read (feed sources are an admin's).
  await page.getByRole('button', { name: 'Intel' }).click()
  await page.locator('#intel-snapshot dd').first().waitFor()
  assert.deepEqual(problems, [])
  assert.equal(await page.locator('#intel-sources').isHidden(), true)

  // The cookie gone (signed out in another tab, or past its Max-Age): the next call returns the page to sign-in.
  await page.context().clearCookies()
  await page.getByRole('button', { name: 'History' }).click()
  await page.getByRole('button', { name: 'Sign in' }).waitFor()
  assert.equal(await page.locator('#history-table tbody tr').count(), 0, 'nothing of the tenant left on the page')
  problems.length = 0 // that call's 401, logged by the browser as a failed resource
  await page.getByLabel('Password', { exact: true }).fill('correct horse battery staple')
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByRole('button', { name: 'Sign out' }).waitFor()

  await page.getByRole('button', { name: 'Sign out' }).click()
  await page.getByRole('button', { name: 'Sign in' }).waitFor()
  const cookies = await page.context().cookies()
  assert.equal(cookies.find((c) => c.name === 'iocv_session'), undefined)
  assert.deepEqual(problems, [])
})
