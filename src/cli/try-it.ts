/**
 * Ready-to-paste commands: the `curl` lines `serve` prints on a start and `keys create` prints for the key it made.
 * With a key, each line carries it (single-quoted: a key is `iocv_` + letters, digits, `-` and `_`), and only the calls
 * its permissions allow are shown; without one (a later start), they read it from $IOCV_KEY.
 */

/** The URL of `host`:`port` (an IPv6 address in brackets). */
export function httpUrl (host: string, port: number): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`
}

/** The address a local client reaches a service listening on `host`:`port` at (a wildcard host means this host). */
export function localUrl (host: string, port: number): string {
  return httpUrl(host === '0.0.0.0' || host === '' ? '127.0.0.1' : host === '::' ? '::1' : host, port)
}

/** Example bodies: an address three sample feeds list, then a defanged domain and a public resolver. */
const kSingleBody = '{"indicator":{"value":"198.51.100.23"},"signal_details":"all"}'
const kBulkBody = '{"indicators":[{"type":"domain","value":"example[.]com"},{"value":"8.8.8.8"}]}'

/**
 * Lines to paste into a POSIX shell, each a command or a command continued with `\`, indented by two spaces.
 * `key` null: the header reads "$IOCV_KEY", and the first line (a shell comment) says how to set it.
 */
export function tryItLines (base: string, key: { key: string, permissions: readonly string[] } | null): string[] {
  const header = key === null ? '-H "x-api-key: $IOCV_KEY"' : `-H 'x-api-key: ${key.key}'`
  const allows = (p: string): boolean => key === null || key.permissions.includes(p) || key.permissions.includes('admin')
  const json = `-H 'content-type: application/json' ${header}`
  const lines: string[] = []
  if (key === null) lines.push('  # IOCV_KEY holds a key, e.g.: export IOCV_KEY=$(npx ioc-verdict keys create --tenant soc --permissions verdict,verdict_bulk)')
  lines.push(`  curl -s ${base}/api/v2/ioc/health`)
  if (allows('verdict')) lines.push(`  curl -s -X POST ${base}/api/v2/ioc/verdict ${json} \\`, `       -d '${kSingleBody}'`)
  if (allows('verdict_bulk')) lines.push(`  curl -s -X POST ${base}/api/v2/ioc/verdict/bulk ${json} \\`, `       -d '${kBulkBody}'`)
  lines.push(`  curl -s '${base}/api/v2/mgmt/enrich-logs/search-history?limit=5' ${header}`)
  return lines
}
