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
import { dirname, resolve } from 'node:path'
import { FEED_FORMATS, type FeedParseResult, type FeedSpec } from '../engine/types.ts'
import { isFeedFormat, parseFeed } from './feeds/index.ts'

/** Keys that would reach Object.prototype if some consumer copied a feed object with spread or assign. */
const kForbiddenKeys = new Set(['__proto__', 'constructor', 'prototype'])
const kTopLevelKeys = new Set(['feeds'])
const kFeedKeys = [
  'name', 'format', 'path', 'direction', 'group', 'subgroup', 'category', 'confidence', 'half_life_days'
] as const
const kFeedKeySet = new Set<string>(kFeedKeys)
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
function checkFeed (feed: Json, baseDir: string): { problems: string[], spec?: FeedSpec } {
  const problems: string[] = []
  for (const key of Object.keys(feed)) {
    if (kForbiddenKeys.has(key)) problems.push(`forbidden key "${key}"`)
    else if (!kFeedKeySet.has(key)) problems.push(`unknown key "${key}" (allowed: ${kFeedKeys.join(', ')})`)
  }
  for (const key of kFeedKeys) {
    if (!Object.hasOwn(feed, key)) problems.push(`missing "${key}"`)
  }
  const { name, format, path, direction, group, subgroup, category, confidence } = feed
  const halfLife = feed.half_life_days
  if (Object.hasOwn(feed, 'name') && (typeof name !== 'string' || !kName.test(name))) {
    problems.push('"name" must be 1-64 characters of letters, digits, "_", "." or "-", starting with a letter or digit')
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
  return {
    problems,
    spec: {
      name: name as string,
      format: format as FeedSpec['format'],
      path: resolve(baseDir, path as string),
      direction: direction as FeedSpec['direction'],
      group: group as string,
      subgroup: subgroup as string,
      category: category as string,
      confidence: confidence as number,
      halfLifeDays: halfLife as number
    }
  }
}

/** How a feed is named in messages: its name when it has a usable one, else its index. */
function feedLabel (feed: unknown, index: number): string {
  const name = isObject(feed) ? feed.name : undefined
  return typeof name === 'string' && name !== '' ? `feeds[${index}] "${name.slice(0, 64)}"` : `feeds[${index}]`
}

/** Reads and validates a feed manifest; relative feed paths resolve against the manifest's folder. Throws on any problem. */
export async function loadManifest (path: string): Promise<FeedSpec[]> {
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
    const checked = checkFeed(feed, baseDir)
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
    throw new Error(`feed "${spec.name}": cannot read ${spec.path}: ${(err as Error).message}`, { cause: err })
  }
  return parseFeed(spec.format, text)
}
