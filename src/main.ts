/**
 * CLI entry: `serve` (default), `keys create|list|revoke`, `intel check|build`, `score`.
 * The only place that listens or exits. Results go to stdout, everything else to stderr, so scripts can
 * capture a new key or a verdict.
 */
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { ConfigError, loadConfig, storeOptions, type Config } from './config.ts'
import { DEFAULT_PROFILE, score, selectProfile, Snapshot } from './engine/index.ts'
import { intelBuild, intelCheck, loadManifest, loadSnapshot, readStatusFile } from './intel/index.ts'
import { openStore, PERMISSIONS } from './store/index.ts'
import { intelSource, startService } from './service.ts'

const kUsage = `usage: ioc-verdict <command>

  serve                                  run the service (default)
  keys create --tenant T --permissions verdict,verdict_bulk[,mgmt,admin] [--quota N]
                                         create a key; prints the key alone on stdout
  keys list                              list keys (never secrets)
  keys revoke ID                         revoke a key
  intel check                            compile every source, report counts and rejected lines
  intel build [--force]                  compile (or load) the snapshot and write the disk cache
  intel status [--json]                  fetched feeds' status, read from the running service's
                                         <IOC_DATA_DIR>/feeds/status.json (exit 1 if one is stale/failed)
  score [--type T] [--scoring-version V] VALUE...
                                         score indicators with the engine, print verdicts as JSON lines

Configuration: IOC_* environment variables or a JSON file named by IOC_CONFIG (see docs/OPERATIONS.md).
`

function out (line: string): void {
  process.stdout.write(line + '\n')
}

function err (line: string): void {
  process.stderr.write(line + '\n')
}

async function serve (config: Readonly<Config>): Promise<void> {
  const svc = await startService(config)
  const { app, logger } = svc
  await app.listen({ host: config.host, port: config.port })
  const addr = app.server.address()
  const port = typeof addr === 'object' && addr !== null ? addr.port : config.port
  const base = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`
  err(`ioc-verdict listening on ${base}`)
  if (svc.bootstrapKey !== null) {
    err('')
    err('First start: created a bootstrap API key with every permission. It is shown only this once:')
    err(`  ${svc.bootstrapKey}`)
  }
  err('')
  err('Try it:')
  err(`  curl -s ${base}/api/v2/ioc/health`)
  err(`  curl -s -X POST ${base}/api/v2/ioc/verdict -H 'content-type: application/json' -H 'x-api-key: <KEY>' \\`)
  err('       -d \'{"indicator":{"value":"198.51.100.23"},"signal_details":"all"}\'')
  err(`  curl -s -X POST ${base}/api/v2/ioc/verdict/bulk -H 'content-type: application/json' -H 'x-api-key: <KEY>' \\`)
  err('       -d \'{"indicators":[{"type":"domain","value":"example[.]com"},{"value":"8.8.8.8"}]}\'')
  err('New keys: npx ioc-verdict keys create --tenant <T> --permissions verdict,verdict_bulk')

  let stopping = false
  const stop = (signal: string): void => {
    if (stopping) return
    stopping = true
    logger.info({ signal }, 'shutting down: draining requests, scoring and history')
    const timer = setTimeout(() => {
      logger.error('shutdown timed out; spooling pending history and exiting')
      // The writer puts whatever it could not write into its on-disk spool, replayed at the next start.
      const exit = (): never => process.exit(1)
      svc.history.close().then(exit, exit)
      setTimeout(exit, 5_000).unref()
    }, config.shutdownTimeoutMs)
    timer.unref()
    app.close().then(() => {
      logger.info('shutdown complete')
      process.exit(0)
    }, (e: unknown) => {
      logger.error({ err: e }, 'shutdown failed')
      process.exit(1)
    })
  }
  process.once('SIGTERM', () => stop('SIGTERM'))
  process.once('SIGINT', () => stop('SIGINT'))
  process.on('SIGHUP', () => {
    svc.intel.reload().then(
      (r) => logger.info({ intel: r }, 'intel snapshot reloaded (SIGHUP)'),
      (e: unknown) => logger.error({ err: e }, 'intel reload failed; still serving the previous snapshot')
    )
  })
}

async function keys (config: Readonly<Config>, args: string[]): Promise<number> {
  const [sub, ...rest] = args
  const { mkdirSync } = await import('node:fs')
  mkdirSync(config.dataDir, { recursive: true })
  const store = await openStore(storeOptions(config))
  try {
    if (sub === 'create') {
      const { values } = parseArgs({ args: rest, options: { tenant: { type: 'string' }, permissions: { type: 'string' }, quota: { type: 'string' } }, strict: true })
      if (values.tenant === undefined || values.permissions === undefined) {
        err('keys create needs --tenant and --permissions')
        return 2
      }
      const quota = values.quota === undefined ? null : Number(values.quota)
      if (quota !== null && (!Number.isSafeInteger(quota) || quota < 0)) {
        err('--quota must be a non-negative integer (indicators per UTC day)')
        return 2
      }
      const created = await store.createKey({ tenant: values.tenant, permissions: values.permissions.split(',').map((p) => p.trim()).filter(Boolean), quota })
      err(`created key ${created.record.id} for tenant ${created.record.tenant} (${created.record.permissions.join(',')}); it is shown only once:`)
      out(created.key)
      return 0
    }
    if (sub === 'list') {
      for (const k of await store.listKeys()) out(JSON.stringify(k))
      return 0
    }
    if (sub === 'revoke') {
      const id = rest[0]
      if (id === undefined) {
        err('keys revoke needs a key id')
        return 2
      }
      const ok = await store.revokeKey(id)
      err(ok ? `revoked ${id} (running services stop accepting it within 5 seconds)` : `no active key ${id}`)
      return ok ? 0 : 1
    }
    err(`unknown keys command; permissions are ${PERMISSIONS.join(', ')}`)
    return 2
  } finally {
    await store.close()
  }
}

/** `intel status`: the table GET /api/v2/mgmt/intel/sources answers, from the status file the service writes. */
async function intelStatus (config: Readonly<Config>, json: boolean): Promise<number> {
  const dir = intelSource(config).feedsDir
  let status
  try {
    status = await readStatusFile(dir)
  } catch {
    err(`no feed status in ${dir}: the service has not run with this IOC_DATA_DIR, or its manifest fetches no feed`)
    return 1
  }
  if (json) {
    out(JSON.stringify({ written_at: status.writtenAt, sources: status.sources, snapshot: status.snapshot }, null, 2))
  } else {
    const rows = [['NAME', 'STATUS', 'RECORDS', 'LAST SUCCESS', 'LAST ATTEMPT', 'ERROR']]
    for (const s of status.sources) rows.push([s.name, s.status, String(s.records), s.last_success_at ?? '-', s.last_attempt_at ?? '-', s.error ?? ''])
    const widths = rows[0]!.map((_c, i) => Math.max(...rows.map((r) => (r[i] as string).length)))
    for (const r of rows) out(r.map((c, i) => i === r.length - 1 ? c : c.padEnd(widths[i] as number)).join('  ').trimEnd())
    const snap = status.snapshot as { version?: string, data_timestamp?: string } | null
    if (snap !== null) out(`snapshot ${snap.version ?? '?'} built ${snap.data_timestamp ?? '?'} (status written ${status.writtenAt})`)
  }
  return status.sources.some((s) => s.status === 'stale' || s.status === 'failed') ? 1 : 0
}

async function intel (config: Readonly<Config>, args: string[]): Promise<number> {
  const [sub, ...rest] = args
  const { values } = parseArgs({ args: rest, options: { force: { type: 'boolean' }, json: { type: 'boolean' } }, strict: true })
  if (sub === 'status') return await intelStatus(config, values.json === true)
  const src = intelSource(config)
  const feeds = await loadManifest(src.manifest, { feedsDir: src.feedsDir })
  const opts = { feeds, ...(src.asnDir === null ? {} : { asnDir: src.asnDir }), ...(src.countryDir === null ? {} : { countryDir: src.countryDir }) }
  if (sub === 'check') {
    const r = await intelCheck(opts)
    out(JSON.stringify(r, null, 2))
    return 0
  }
  if (sub === 'build') {
    const r = await intelBuild({ ...opts, cacheDir: src.cacheDir ?? join(config.dataDir, 'intel'), force: values.force === true })
    out(JSON.stringify(r, null, 2))
    return 0
  }
  err('unknown intel command (check, build, status)')
  return 2
}

async function scoreCmd (config: Readonly<Config>, args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    options: { type: { type: 'string' }, 'scoring-version': { type: 'string' }, signals: { type: 'string' }, evidence: { type: 'string' } },
    allowPositionals: true,
    strict: true
  })
  const src = intelSource(config)
  const feeds = await loadManifest(src.manifest, { feedsDir: src.feedsDir })
  const { data } = await loadSnapshot({ feeds, cacheDir: src.cacheDir, ...(src.asnDir === null ? {} : { asnDir: src.asnDir }), ...(src.countryDir === null ? {} : { countryDir: src.countryDir }) })
  const snap = new Snapshot(data)
  const { profile, known } = selectProfile(values['scoring-version'])
  if (!known) err(`unknown scoring version; using ${DEFAULT_PROFILE.version}`)
  let failed = 0
  for (const value of positionals) {
    const r = score(value, values.type, { profile, signalDetails: (values.signals ?? 'all') as 'all', evidenceDetails: (values.evidence ?? 'full') as 'full' }, snap)
    if (!r.ok) failed++
    out(JSON.stringify(r.ok ? r.verdict : { indicator: { type: values.type ?? null, value }, errors: r.errors }))
  }
  return failed > 0 ? 1 : 0
}

async function main (argv: string[]): Promise<number> {
  const [command = 'serve', ...args] = argv
  if (command === '--help' || command === '-h' || command === 'help') {
    out(kUsage)
    return 0
  }
  let config: Readonly<Config>
  try {
    config = loadConfig()
  } catch (e) {
    if (e instanceof ConfigError) {
      err(`configuration error: ${e.message}`)
      return 2
    }
    throw e
  }
  switch (command) {
    case 'serve':
      await serve(config)
      return -1
    case 'keys': return await keys(config, args)
    case 'intel': return await intel(config, args)
    case 'score': return await scoreCmd(config, args)
    default:
      err(kUsage)
      return 2
  }
}

main(process.argv.slice(2)).then((code) => {
  if (code >= 0) process.exit(code)
}, (e: unknown) => {
  const code = (e as { code?: string }).code
  err(`ioc-verdict: ${(e as Error).message}${code === undefined ? '' : ` (${code})`}`)
  process.exit(1)
})
