/**
 * The operator's feed manifest: which feed files to load, in which format, and what a listing in each one means.
 *
 * ```json
 * {"feeds": [{"name": "feodo", "format": "feodo_csv", "path": "feodo.csv", "direction": "malicious",
 *   "group": "threat_feed", "subgroup": "botnet_c2", "category": "botnet", "confidence": 0.9, "half_life_days": 30}]}
 * ```
 * Validation is strict (unknown keys are errors, so a typo such as `half_life` cannot silently fall back to a
 * default) and every problem is reported at once, each naming the manifest and the feed.
 * @see ../../../data/feeds/README.md
 */
import { readFile, stat } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import { FEED_FORMATS, type FeedParseResult, type FeedSpec, type RemoteFeed } from '../engine/types.ts'
import { isFeedFormat, parseFeed } from './feeds/index.ts'

/** Keys that would reach Object.prototype if some consumer copied a feed object with spread or assign. */
const kForbiddenKeys = new Set(['__proto__', 'constructor', 'prototype'])
const kTopLevelKeys = new Set(['feeds'])
const kFeedKeys = [
  'name', 'format', 'path', 'direction', 'group', 'subgroup', 'category', 'confidence', 'half_life_days'
] as const
/** Optional keys of any feed: `origin` names the upstream data a feed is a copy or a view of. */
const kOptionalKeys = ['origin'] as const
/** Keys of a fetched feed (with `url` in place of `path`). */
const kRemoteKeys = ['url', 'refresh_seconds', 'headers', 'max_bytes', 'timeout_seconds', 'zip_member'] as const
const kFeedKeySet = new Set<string>([...kFeedKeys, ...kOptionalKeys, ...kRemoteKeys])
export const kDefaultRefreshSeconds = 3600
export const kDefaultMaxBytes = 64 * 1024 * 1024
export const kDefaultTimeoutSeconds = 60
/** An HTTP header name (RFC 9110 token). */
const kHeaderName = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/
/** `${NAME}`: an environment variable named in a header value. */
export const kEnvReference = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g
/** Feed names appear in signal ids and evidence; keep them to a character set every consumer can carry. */
const kName = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/
/** group / subgroup / category become keys of the verdict's `scores` objects: snake_case identifiers. */
const kIdentifier = /^[a-z][a-z0-9_]{0,63}$/

type Json = Record<string, unknown>

/** Whether a parsed JSON value is an object. */
function isObject (value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** The feed's problems (empty when valid) and, when valid, its spec with the path resolved against `baseDir`. */
function checkFeed (feed: Json, baseDir: string, feedsDir: string | null): { problems: string[], spec?: FeedSpec } {
  const problems: string[] = []
  const isRemote = Object.hasOwn(feed, 'url')
  const allowed = [...kFeedKeys, ...kOptionalKeys, ...(isRemote ? kRemoteKeys : [])].filter((k) => !(isRemote && k === 'path'))
  for (const key of Object.keys(feed)) {
    if (kForbiddenKeys.has(key)) problems.push(`forbidden key "${key}"`)
    else if (!kFeedKeySet.has(key)) problems.push(`unknown key "${key}" (allowed: ${allowed.join(', ')})`)
  }
  if (isRemote && Object.hasOwn(feed, 'path')) problems.push('give either "path" or "url", not both')
  for (const key of kFeedKeys) {
    if (key === 'path' && isRemote) continue
    if (!Object.hasOwn(feed, key)) problems.push(key === 'path' ? 'missing "path" (or "url")' : `missing "${key}"`)
  }
  if (!isRemote) {
    for (const key of kRemoteKeys) if (Object.hasOwn(feed, key)) problems.push(`"${key}" applies only to a feed with a "url"`)
  }
  const remote = isRemote ? checkRemote(feed, problems) : undefined
  const { name, format, path, direction, group, subgroup, category, confidence } = feed
  const halfLife = feed.half_life_days
  for (const key of ['name', 'origin'] as const) {
    const v = feed[key]
    if (Object.hasOwn(feed, key) && (typeof v !== 'string' || !kName.test(v))) {
      problems.push(`"${key}" must be 1-64 characters of letters, digits, "_", "." or "-", starting with a letter or digit`)
    }
  }
  if (Object.hasOwn(feed, 'format') && !isFeedFormat(format)) {
    problems.push(`"format" must be one of ${FEED_FORMATS.join(', ')}`)
  }
  if (Object.hasOwn(feed, 'path') && (typeof path !== 'string' || path.trim() === '')) {
    problems.push('"path" must be a non-empty string')
  }
  if (Object.hasOwn(feed, 'direction') && direction !== 'safe' && direction !== 'malicious') {
    problems.push('"direction" must be "safe" or "malicious"')
  }
  for (const [key, value] of [['group', group], ['subgroup', subgroup], ['category', category]] as const) {
    if (Object.hasOwn(feed, key) && (typeof value !== 'string' || !kIdentifier.test(value))) {
      problems.push(`"${key}" must be a snake_case identifier (a-z, 0-9, "_", at most 64 characters)`)
    }
  }
  if (Object.hasOwn(feed, 'confidence') &&
    (typeof confidence !== 'number' || !Number.isFinite(confidence) || confidence < 0 || confidence > 1)) {
    problems.push('"confidence" must be a number from 0 to 1')
  }
  if (Object.hasOwn(feed, 'half_life_days') &&
    (typeof halfLife !== 'number' || !Number.isFinite(halfLife) || halfLife < 0)) {
    problems.push('"half_life_days" must be a number >= 0 (0 = no decay)')
  }
  if (problems.length > 0) return { problems }
  if (remote !== undefined && feedsDir === null) return { problems: ['a feed with a "url" needs a data directory for its last good copy'] }
  const spec: FeedSpec = {
    name: name as string,
    format: format as FeedSpec['format'],
    path: remote === undefined ? resolve(baseDir, path as string) : join(feedsDir as string, `${name as string}.feed`),
    direction: direction as FeedSpec['direction'],
    group: group as string,
    subgroup: subgroup as string,
    category: category as string,
    confidence: confidence as number,
    halfLifeDays: halfLife as number
  }
  if (typeof feed.origin === 'string' && feed.origin !== spec.name) spec.origin = feed.origin
  if (remote !== undefined) spec.remote = remote
  return { problems, spec }
}

/** Whether `value` is an integer from `min` to `max`. */
function isIntegerIn (value: unknown, min: number, max: number): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= min && value <= max
}

/** Checks the keys of a fetched feed; pushes problems and returns the settings (meaningful only without problems). */
function checkRemote (feed: Json, problems: string[]): RemoteFeed {
  const { url, headers } = feed
  const refresh = feed.refresh_seconds ?? kDefaultRefreshSeconds
  const maxBytes = feed.max_bytes ?? kDefaultMaxBytes
  const timeout = feed.timeout_seconds ?? kDefaultTimeoutSeconds
  let parsed: URL | null = null
  if (typeof url === 'string') {
    try {
      parsed = new URL(url)
    } catch {
      parsed = null
    }
  }
  // The message never repeats the URL: it may carry credentials.
  if (parsed === null || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) problems.push('"url" must be an absolute http:// or https:// URL')
  if (!isIntegerIn(refresh, 1, 31_536_000)) problems.push('"refresh_seconds" must be an integer from 1 to 31536000 (default 3600)')
  if (!isIntegerIn(maxBytes, 1, 2 ** 32)) problems.push('"max_bytes" must be an integer from 1 to 4294967296 (default 64 MiB)')
  if (!isIntegerIn(timeout, 1, 3600)) problems.push('"timeout_seconds" must be an integer from 1 to 3600 (default 60)')
  const zipMember = feed.zip_member
  if (zipMember !== undefined && (typeof zipMember !== 'string' || zipMember === '' || zipMember.length > 1024 || /\p{Cc}/u.test(zipMember))) {
    problems.push('"zip_member" must be a file name inside the zip archive (1-1024 characters, no control characters)')
  }
  const headerMap: Record<string, string> = Object.create(null) as Record<string, string>
  if (headers !== undefined) {
    if (!isObject(headers)) {
      problems.push('"headers" must be an object of header names to string values')
    } else {
      for (const [k, v] of Object.entries(headers)) {
        if (kForbiddenKeys.has(k)) problems.push(`"headers": forbidden key "${k}"`)
        else if (!kHeaderName.test(k)) problems.push(`"headers": "${k.slice(0, 64)}" is not a header name`)
        else if (typeof v !== 'string' || /[\r\n\0]/.test(v)) problems.push(`"headers.${k}" must be a string without line breaks`)
        // IOC_* settings hold the service's own secrets (a database URL): never sent to a feed host.
        else if (/\$\{IOC_/.test(v)) problems.push(`"headers.${k}" names an IOC_* setting; feed headers may name any other environment variable`)
        else headerMap[k.toLowerCase()] = v
      }
    }
  }
  return {
    url: typeof url === 'string' ? url : '',
    refreshSeconds: refresh as number,
    headers: headerMap,
    maxBytes: maxBytes as number,
    timeoutSeconds: timeout as number,
    zipMember: typeof zipMember === 'string' ? zipMember : null
  }
}

/** The environment variables a feed's headers name (`${NAME}`). */
export function headerVariables (remote: RemoteFeed): string[] {
  const names = new Set<string>()
  for (const v of Object.values(remote.headers)) for (const m of v.matchAll(kEnvReference)) names.add(m[1] as string)
  return [...names]
}

/** How a feed is named in messages: its name when it has a usable one, else its index. */
function feedLabel (feed: unknown, index: number): string {
  const name = isObject(feed) ? feed.name : undefined
  return typeof name === 'string' && name !== '' ? `feeds[${index}] "${name.slice(0, 64)}"` : `feeds[${index}]`
}

/**
 * Reads and validates a feed manifest; relative feed paths resolve against the manifest's folder. Throws on any problem.
 * `feedsDir` holds the last good copies of fetched (`url`) feeds; a manifest with one needs it.
 */
export async function loadManifest (path: string, options: { feedsDir?: string | null } = {}): Promise<FeedSpec[]> {
  const feedsDir = options.feedsDir ?? null
  const manifestPath = resolve(path)
  const fail = (problems: string[], cause?: unknown): never => {
    const message = `invalid feed manifest ${manifestPath}:\n  - ${problems.join('\n  - ')}`
    throw cause === undefined ? new Error(message) : new Error(message, { cause })
  }
  let text: string
  try {
    text = await readFile(manifestPath, 'utf8')
  } catch (err) {
    return fail([`cannot read the manifest: ${(err as Error).message}`], err)
  }
  let doc: unknown
  try {
    doc = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text)
  } catch (err) {
    return fail([`not valid JSON: ${(err as Error).message}`], err)
  }
  if (!isObject(doc)) return fail(['expected an object {"feeds": [...]}'])
  const problems: string[] = []
  for (const key of Object.keys(doc)) {
    if (kForbiddenKeys.has(key)) problems.push(`forbidden top-level key "${key}"`)
    else if (!kTopLevelKeys.has(key)) problems.push(`unknown top-level key "${key}" (allowed: feeds)`)
  }
  if (!Array.isArray(doc.feeds)) return fail([...problems, '"feeds" must be an array'])
  const baseDir = dirname(manifestPath)
  const specs: FeedSpec[] = []
  const seen = new Map<string, number>()
  doc.feeds.forEach((feed: unknown, index: number) => {
    const label = feedLabel(feed, index)
    if (!isObject(feed)) {
      problems.push(`${label}: must be an object`)
      return
    }
    const checked = checkFeed(feed, baseDir, feedsDir)
    for (const problem of checked.problems) problems.push(`${label}: ${problem}`)
    if (typeof feed.name === 'string') {
      const first = seen.get(feed.name)
      if (first !== undefined) problems.push(`${label}: duplicate name (also feeds[${first}])`)
      else seen.set(feed.name, index)
    }
    if (checked.spec !== undefined) specs.push(checked.spec)
  })
  // Existence is checked only for otherwise valid feeds, all at once: a missing feed file is a startup error.
  const missing = await Promise.all(specs.map(async (spec) => {
    // A fetched feed has no file until its first good download.
    if (spec.remote !== undefined) return null
    try {
      return (await stat(spec.path)).isFile() ? null : `feed "${spec.name}": ${spec.path} is not a file`
    } catch {
      return `feed "${spec.name}": feed file not found: ${spec.path}`
    }
  }))
  for (const problem of missing) if (problem !== null) problems.push(problem)
  if (problems.length > 0) return fail(problems)
  return specs
}

/** Reads one feed file and parses it in the feed's format. */
export async function readFeed (spec: FeedSpec): Promise<FeedParseResult> {
  let text: string
  try {
    text = await readFile(spec.path, 'utf8')
  } catch (err) {
    // A fetched feed not yet downloaded contributes nothing until its first good copy arrives.
    if (spec.remote !== undefined && (err as NodeJS.ErrnoException).code === 'ENOENT') return { entries: [], rejected: [], lines: 0 }
    throw new Error(`feed "${spec.name}": cannot read ${spec.path}: ${(err as Error).message}`, { cause: err })
  }
  return parseFeed(spec.format, text)
}
