/**
 * CLI entry: `serve` (default), `keys create|list|revoke`, `intel check|build`, `score`, `retro-hunt run`.
 * The only place that listens or exits. Results go to stdout, everything else to stderr, so scripts can
 * capture a new key or a verdict. Each command imports what it runs when it runs (the service, the store, the intel
 * compiler), so `keys list` or `--help` does not load Fastify and the engine first.
 */
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { loadConfig, storeOptions, type Config } from './config.ts'
import { ConfigError } from './errors.ts'
import { mkdirSync, statSync } from 'node:fs'
import type { InputFormat, OutputFormat } from './cli/score-file.ts'
import type { SignalDetails } from './engine/index.ts'
import type { Role } from './store/index.ts'
import type { FleetStatus } from './fleet/fleet.ts'

const kUsage = `usage: ioc-verdict <command>

  serve                                  run the service (default)
  keys create --tenant T --permissions verdict,verdict_bulk[,mgmt,admin] [--quota N]
              [--rate-limit N] [--expires-at ISO-8601] [--allowed-cidrs CIDR,...]
                                         create a key; prints the key alone on stdout, and
                                         ready-to-paste curl commands with it on stderr
  keys list                              list keys (never secrets)
  users create --tenant T --username U [--role analyst|admin] --password-stdin
                                         create a dashboard user; the password is read from stdin
  users list | users disable U           list dashboard users; disable one (ends their sessions)
  keys revoke ID                         revoke a key
  intel check                            compile every source, report counts and rejected lines
  intel build [--force]                  compile (or load) the snapshot and write the disk cache
  intel status [--json]                  fetched feeds' status, read from the running service's
                                         <IOC_DATA_DIR>/feeds/status.json (exit 1 if one is stale/failed)
  score [--type T] [--scoring-version V] VALUE...
                                         score indicators with the engine, print verdicts as JSON lines
  score FILE | -  [--input lines|csv|ndjson] [--format ndjson|csv] [--signals none|top|all]
                                         score a file (or stdin) of indicators, streaming: one line per
                                         indicator, CSV with a value (and type) column, or NDJSON objects
  retro-hunt run [--since ISO-8601]      match the tenants' history of the lookback window (IOC_RETRO_HUNT_DAYS, or
                                         from --since) against every listing of the current snapshot, record
                                         and print the hits (JSON lines) found now

Configuration: IOC_* environment variables or a JSON file named by IOC_CONFIG (see docs/OPERATIONS.md).
`

/** A command line the CLI cannot run: printed with the usage, exit 2. */
class UsageError extends Error {}

/** True when `path` names a regular file (so `score FILE` reads it rather than scoring the name). */
function isFile (path: string): boolean {
  try {
    return statSync(path).isFile()
  } catch {
    return false
  }
}

function out (line: string): void {
  process.stdout.write(line + '\n')
}

function err (line: string): void {
  process.stderr.write(line + '\n')
}

async function serve (config: Readonly<Config>): Promise<void> {
  const { startService } = await import('./service.ts')
  const svc = await startService(config)
  const { app, logger } = svc
  try {
    await app.listen({ host: config.host, port: config.port })
  } catch (e) {
    // The port is taken (or the host is not ours): every part started is closed before the error ends the process.
    await app.close().catch(() => {})
    // A key made by this start is in the store: shown here, or it would never be (the next start finds a key).
    if (svc.bootstrapKey !== null) {
      err('The service did not start, but its first start created a bootstrap API key with every permission. It is')
      err('shown only this once (it works once the service runs):')
      err(`  ${svc.bootstrapKey}`)
    }
    throw e
  }
  let stopping = false
  // A signal drains and exits 0; a fault (an exception or rejection nothing caught) drains the same way, then exits 1,
  // so a supervisor restarts the service with every acknowledged request recorded. Written by hand rather than with
  // close-with-grace, which treats SIGHUP as a shutdown: here SIGHUP reloads the intel.
  let exitCode = 0
  // Stops everything now and exits 1. Every answered request's history is in the journal already; the next start
  // writes what the store lacks. The store and the history writer's database are closed before the exit.
  const abort = (reason: Error): void => {
    const exit = (): never => process.exit(1)
    svc.destroy(reason).then(exit, exit)
    setTimeout(exit, 10_000).unref()
  }
  const stop = (signal: string): void => {
    if (stopping) return
    stopping = true
    logger.info({ signal }, 'shutting down: draining requests, scoring and history')
    const timer = setTimeout(() => {
      logger.error('shutdown timed out; exiting now (history not yet in the store stays in the journal for the next start)')
      abort(new Error('shutdown timed out'))
    }, config.shutdownTimeoutMs)
    timer.unref()
    app.close().then(() => {
      logger.info({ exit_code: exitCode }, 'shutdown complete')
      process.exit(exitCode)
    }, (e: unknown) => {
      logger.error({ err: e }, 'shutdown failed')
      process.exit(1)
    })
  }
  process.once('SIGTERM', () => stop('SIGTERM'))
  process.once('SIGINT', () => stop('SIGINT'))
  const fault = (kind: string) => (err: unknown): void => {
    logger.fatal({ err }, `${kind}: draining and exiting with code 1`)
    exitCode = 1
    // A second fault while draining ends the drain: the service stops now and the process exits 1 (the journal keeps
    // what the store lacks).
    if (stopping) abort(err instanceof Error ? err : new Error(String(err)))
    else stop(kind)
  }
  process.on('uncaughtException', fault('uncaughtException'))
  process.on('unhandledRejection', fault('unhandledRejection'))
  process.on('SIGHUP', () => {
    // As POST /api/v2/mgmt/intel/reload: on PostgreSQL the leader rebuilds and publishes, a follower adopts the
    // newest published generation; a reload of this instance's own would split the fleet's answers.
    svc.fleet.reload().then(
      (r) => logger.info({ intel: r }, 'intel snapshot reloaded (SIGHUP)'),
      (e: unknown) => logger.error({ err: e }, 'intel reload failed; still serving the previous snapshot')
    )
  })

  // The banner comes last: whoever reads it (a supervisor, a test) may signal at once, and a signal that arrives before
  // its handler is registered ends the process without a drain.
  const addr = app.server.address()
  const port = typeof addr === 'object' && addr !== null ? addr.port : config.port
  const [{ httpUrl, tryItLines, localUrl }, { PERMISSIONS }] = await Promise.all([import('./cli/try-it.ts'), import('./store/index.ts')])
  err(`ioc-verdict listening on ${httpUrl(config.host, port)}`)
  const key = svc.bootstrapKey === null ? null : { key: svc.bootstrapKey, permissions: PERMISSIONS }
  if (key !== null) {
    err('')
    err('First start: created a bootstrap API key with every permission. It is shown only this once:')
    err(`  ${key.key}`)
  }
  err('')
  err(key === null ? 'Try it (ready to paste, with a key in IOCV_KEY):' : 'Try it (ready to paste, with that key):')
  for (const line of tryItLines(localUrl(config.host, port), key)) err(line)
  err('New keys: npx ioc-verdict keys create --tenant <T> --permissions verdict,verdict_bulk')
}

async function keys (config: Readonly<Config>, args: string[]): Promise<number> {
  const [sub, ...rest] = args
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 })
  const { openStore, PERMISSIONS } = await import('./store/index.ts')
  const store = await openStore(storeOptions(config))
  try {
    if (sub === 'create') {
      const { values } = parseArgs({
        args: rest,
        options: {
          tenant: { type: 'string' },
          permissions: { type: 'string' },
          quota: { type: 'string' },
          'rate-limit': { type: 'string' },
          'expires-at': { type: 'string' },
          'allowed-cidrs': { type: 'string' }
        },
        strict: true
      })
      if (values.tenant === undefined || values.permissions === undefined) {
        err('keys create needs --tenant and --permissions')
        return 2
      }
      const quota = values.quota === undefined ? null : Number(values.quota)
      if (quota !== null && (!Number.isSafeInteger(quota) || quota < 0)) {
        err('--quota must be a non-negative integer (indicators per UTC day)')
        return 2
      }
      const rateLimit = values['rate-limit'] === undefined ? null : Number(values['rate-limit'])
      if (rateLimit !== null && !Number.isSafeInteger(rateLimit)) {
        err('--rate-limit must be an integer (requests per minute)')
        return 2
      }
      const list = (v: string): string[] => v.split(',').map((p) => p.trim()).filter(Boolean)
      // The store validates every option again (the API shares it) and says what is wrong.
      const created = await store.createKey({
        tenant: values.tenant,
        permissions: list(values.permissions),
        quota,
        rateLimit,
        expiresAt: values['expires-at'] ?? null,
        allowedCidrs: values['allowed-cidrs'] === undefined ? null : list(values['allowed-cidrs'])
      })
      err(`created key ${created.record.id} for tenant ${created.record.tenant} (${created.record.permissions.join(',')}); it is shown only once:`)
      out(created.key)
      // The key alone is on stdout (scripts capture it); these lines on stderr carry it too, for a person to paste.
      const { tryItLines, localUrl } = await import('./cli/try-it.ts')
      const url = localUrl(config.host, config.port)
      err('')
      err(`Try it (ready to paste, for the service at ${url}):`)
      for (const line of tryItLines(url, { key: created.key, permissions: created.record.permissions })) err(line)
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

/** Reads all of standard input (a password given with --password-stdin; one trailing line break is dropped). */
async function readStdin (): Promise<string> {
  const parts: Buffer[] = []
  for await (const chunk of process.stdin) parts.push(chunk as Buffer)
  return Buffer.concat(parts).toString('utf8').replace(/\r?\n$/, '')
}

async function users (config: Readonly<Config>, args: string[]): Promise<number> {
  const [sub, ...rest] = args
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 })
  const { openStore, ROLES } = await import('./store/index.ts')
  const store = await openStore(storeOptions(config))
  try {
    if (sub === 'create') {
      const { values } = parseArgs({
        args: rest,
        options: { tenant: { type: 'string' }, username: { type: 'string' }, role: { type: 'string' }, 'password-stdin': { type: 'boolean' } },
        strict: true
      })
      if (values.tenant === undefined || values.username === undefined || values['password-stdin'] !== true) {
        throw new UsageError('users create needs --tenant, --username and --password-stdin (the password is read from standard input, never from the command line)')
      }
      const user = await store.accounts.createUser({ tenant: values.tenant, username: values.username, role: (values.role ?? 'analyst') as Role, password: await readStdin() })
      err(`created ${user.role} ${user.username} of tenant ${user.tenant}`)
      return 0
    }
    if (sub === 'list') {
      for (const u of await store.accounts.listUsers()) out(JSON.stringify(u))
      return 0
    }
    if (sub === 'disable') {
      const name = rest[0]
      if (name === undefined) throw new UsageError('users disable needs a username')
      const ok = await store.accounts.disableUser(name)
      err(ok ? `disabled ${name} and ended their sessions` : `no active user ${name}`)
      return ok ? 0 : 1
    }
    throw new UsageError(`unknown users command; roles are ${ROLES.join(', ')}`)
  } finally {
    await store.close()
  }
}

/** `intel status`: the table GET /api/v2/mgmt/intel/sources answers, from the status file the service writes. */
async function intelStatus (config: Readonly<Config>, json: boolean): Promise<number> {
  const [{ intelSource }, { readStatusFile }] = await Promise.all([import('./service.ts'), import('./intel/index.ts')])
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
    const snap = status.snapshot as { version?: string, data_timestamp?: string, build?: { warm: boolean, parsed: string[], reused: number } } | null
    if (snap !== null) out(`snapshot ${snap.version ?? '?'} built ${snap.data_timestamp ?? '?'} (status written ${status.writtenAt})`)
    if (snap?.build !== undefined) {
      out(snap.build.warm ? 'loaded whole from the snapshot cache' : `parsed: ${snap.build.parsed.join(', ') || 'none'}; reused from the parts cache: ${snap.build.reused}`)
    }
    const fleet = (snap as { fleet?: FleetStatus } | null)?.fleet
    if (fleet !== undefined) {
      out(`fleet: this instance ${fleet.instance} is the ${fleet.role}; leader ${fleet.leader ?? 'unknown'}; serving generation ${fleet.generation ?? 'none'} of ${fleet.published_generation ?? 'none'} published${fleet.error === null ? '' : `; degraded: ${fleet.error}`}`)
      for (const i of fleet.instances) out(`  ${i.instance}${i.leader ? ' (leader)' : ''}: generation ${i.generation ?? 'none'}, ${i.state}, seen ${i.seen_at}`)
    }
  }
  return status.sources.some((s) => s.status === 'stale' || s.status === 'failed') ? 1 : 0
}

async function intel (config: Readonly<Config>, args: string[]): Promise<number> {
  const [sub, ...rest] = args
  const { values } = parseArgs({ args: rest, options: { force: { type: 'boolean' }, json: { type: 'boolean' } }, strict: true })
  if (sub === 'status') return await intelStatus(config, values.json === true)
  const [{ intelSource }, { compileInputs, intelBuild, intelCheck }] = await Promise.all([import('./service.ts'), import('./intel/index.ts')])
  const src = intelSource(config)
  const opts = await compileInputs(src)
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
    options: {
      type: { type: 'string' },
      'scoring-version': { type: 'string' },
      signals: { type: 'string' },
      evidence: { type: 'string' },
      input: { type: 'string' },
      format: { type: 'string' }
    },
    allowPositionals: true,
    strict: true
  })
  const file = positionals.length === 1 && (positionals[0] === '-' || isFile(positionals[0] as string)) ? positionals[0] as string : null
  if (values.input !== undefined && !['lines', 'csv', 'ndjson'].includes(values.input)) throw new UsageError('--input must be lines, csv or ndjson')
  if (values.format !== undefined && !['ndjson', 'csv'].includes(values.format)) throw new UsageError('--format must be ndjson or csv')
  if (values.signals !== undefined && !['none', 'top', 'all'].includes(values.signals)) throw new UsageError('--signals must be none, top or all')
  if (file === null && (values.input !== undefined || values.format !== undefined)) throw new UsageError('--input and --format apply to a file or - (stdin)')
  const [{ intelSource }, { compileInputs, loadSnapshot }, { DEFAULT_PROFILE, score, selectProfile, Snapshot }, { openInput, scoreFile }] =
    await Promise.all([import('./service.ts'), import('./intel/index.ts'), import('./engine/index.ts'), import('./cli/score-file.ts')])
  const src = intelSource(config)
  const { data } = await loadSnapshot({ ...await compileInputs(src), cacheDir: src.cacheDir })
  const snap = new Snapshot(data)
  const { profile, known } = selectProfile(values['scoring-version'])
  if (!known) err(`unknown scoring version; using ${DEFAULT_PROFILE.version}`)
  if (file !== null) {
    const summary = await scoreFile({
      input: openInput(file),
      output: process.stdout,
      snapshot: snap,
      profile,
      signalDetails: (values.signals ?? 'top') as SignalDetails,
      ...(values.input === undefined ? {} : { inputFormat: values.input as InputFormat }),
      outputFormat: (values.format ?? 'ndjson') as OutputFormat,
      progress: process.stderr.isTTY ? process.stderr : null
    })
    err(`scored ${summary.scored} indicators, ${summary.invalid} invalid, ${summary.skipped} lines skipped`)
    return 0
  }
  let failed = 0
  for (const value of positionals) {
    const r = score(value, values.type, { profile, signalDetails: (values.signals ?? 'all') as 'all', evidenceDetails: (values.evidence ?? 'full') as 'full' }, snap)
    if (!r.ok) failed++
    out(JSON.stringify(r.ok ? r.verdict : { indicator: { type: values.type ?? null, value }, errors: r.errors }))
  }
  return failed > 0 ? 1 : 0
}

/** `retro-hunt run`: one pass by hand against the current snapshot, every malicious listing counting as raised. */
async function retroHunt (config: Readonly<Config>, args: string[]): Promise<number> {
  const [sub, ...rest] = args
  if (sub !== 'run') throw new UsageError('unknown retro-hunt command (run)')
  const { values } = parseArgs({ args: rest, options: { since: { type: 'string' } }, strict: true })
  const [{ parseTimestamp }, { lookbackStart }] = await Promise.all([import('./history/utc-day.ts'), import('./pool/retro-hunt.ts')])
  const now = Date.now()
  let sinceMs: number
  if (values.since !== undefined) {
    const ms = parseTimestamp(values.since)
    if (ms === null) throw new UsageError('--since must be an ISO 8601 date-time with an offset, or a date')
    sinceMs = lookbackStart(now, Math.max(0, (now - ms) / 86_400_000), config.retentionDays)
  } else if (config.retroHuntDays > 0) {
    sinceMs = lookbackStart(now, config.retroHuntDays, config.retentionDays)
  } else {
    err('the retro-hunt is off (IOC_RETRO_HUNT_DAYS=0): give --since to run a pass anyway')
    return 2
  }
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 })
  const [{ intelSource }, { compileInputs, loadSnapshot }, { openStore }, { runRetroPass }] =
    await Promise.all([import('./service.ts'), import('./intel/index.ts'), import('./store/index.ts'), import('./pool/retro-pass.ts')])
  const store = await openStore(storeOptions(config))
  try {
    // In a fleet the current snapshot is the newest published generation (the leader's, built from the feeds it
    // fetched); this data directory may hold none of those feeds' copies.
    const published = config.store === 'postgres' ? await (await import('./fleet/snapshots.ts')).readLatestPublished(config.databaseUrl as string, config.databaseSchema) : null
    const src = intelSource(config)
    const data = published?.data ?? (await loadSnapshot({ ...await compileInputs(src), cacheDir: src.cacheDir })).data
    err(`retro-hunt: history since ${new Date(sinceMs).toISOString()} against snapshot ${data.header.version}` +
      (published === null ? '' : ` (the fleet's generation ${published.generation})`))
    const r = await runRetroPass(store, { prev: null, next: data, sinceMs })
    for (const hit of r.hits) out(JSON.stringify(hit))
    err(`retro-hunt: ${r.hits.length} new hits; ${r.tenants} tenants, ${r.blocks} blocks, ${r.items} history records, ${r.matched} indicators matched against ` +
      `${r.raised} listings in ${Math.round(r.ms)} ms`)
    if (r.raisedDropped > 0 || r.matchedDropped > 0) err(`retro-hunt: bounds reached: ${r.raisedDropped} listings and ${r.matchedDropped} indicators left out`)
    return 0
  } finally {
    await store.close()
  }
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
    case 'users': return await users(config, args)
    case 'intel': return await intel(config, args)
    case 'score': return await scoreCmd(config, args)
    case 'retro-hunt': return await retroHunt(config, args)
    default:
      err(kUsage)
      return 2
  }
}

/**
 * Exits once everything written to stdout and stderr has left the process. Writes to a pipe are asynchronous on
 * Linux, so an exit right after the last write dropped the tail of a piped `score -` (1,925 of 2,001 answers in one
 * run); a write's callback runs once it and every write before it are out.
 */
function exitFlushed (code: number): void {
  const flushed = (stream: NodeJS.WriteStream): Promise<void> => new Promise((resolve) => {
    if (stream.destroyed || stream.writableEnded) resolve()
    else stream.write('', () => resolve())
  })
  void Promise.all([flushed(process.stdout), flushed(process.stderr)]).then(() => process.exit(code))
}

main(process.argv.slice(2)).then((code) => {
  if (code >= 0) exitFlushed(code)
}, (e: unknown) => {
  if (e instanceof UsageError) {
    err(`ioc-verdict: ${e.message}`)
    err(kUsage)
    exitFlushed(2)
    return
  }
  const code = (e as { code?: string }).code
  err(`ioc-verdict: ${(e as Error).message}${code === undefined ? '' : ` (${code})`}`)
  // A flag parseArgs refuses (unknown, or a value missing) is a usage error like the others.
  exitFlushed(code?.startsWith('ERR_PARSE_ARGS_') === true ? 2 : 1)
})
