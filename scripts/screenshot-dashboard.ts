/**
 * Makes docs/images/dashboard-lookup.png, the README's picture of the Lookup page: starts the service on 127.0.0.1
 * with a temporary data directory and the shipped sample feeds, creates a user, signs in with headless Chromium
 * (Debian's package) and looks up an indicator.
 *   node --import tsx scripts/screenshot-dashboard.ts [indicator]
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium } from 'playwright-core'
import { loadConfig } from '../src/config.ts'
import { startService } from '../src/service.ts'

const kOut = join(import.meta.dirname, '..', 'docs', 'images', 'dashboard-lookup.png')
const indicator = process.argv[2] ?? 'hxxp://malware-c2[.]example/x'
const dataDir = mkdtempSync(join(tmpdir(), 'ioc-verdict-screenshot-'))
const svc = await startService(loadConfig({ ...process.env, IOC_DATA_DIR: dataDir, IOC_LOG_LEVEL: 'warn', IOC_BOOTSTRAP_KEY: '0', IOC_POOL_SIZE: '0' }))
try {
  await svc.store.accounts.createUser({ tenant: 'soc', username: 'analyst', role: 'analyst', password: 'screenshot password' })
  const base = await svc.app.listen({ port: 0, host: '127.0.0.1' })
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] })
  const page = await browser.newPage({ viewport: { width: 1100, height: 1000 } })
  await page.goto(`${base}/dashboard/`)
  await page.getByLabel('Username', { exact: true }).fill('analyst')
  await page.getByLabel('Password', { exact: true }).fill('screenshot password')
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByLabel('Indicator', { exact: true }).fill(indicator)
  await page.keyboard.press('Enter')
  await page.locator('#lookup-result:not([hidden])').waitFor()
  await page.screenshot({ path: kOut, fullPage: true })
  await browser.close()
  process.stderr.write(`wrote ${kOut}\n`)
} finally {
  await svc.app.close()
  rmSync(dataDir, { recursive: true, force: true })
}
