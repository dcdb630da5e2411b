/**
 * Address ranges that cloud and CDN providers publish about their own networks, one reader per provider's JSON
 * layout. Entries are `ip_block` (or `ip` for a bare address) labelled with the provider and, where the document says,
 * the service and region, so a verdict can name what the address belongs to. Items are the prefixes in document
 * order, numbered from 1; a prefix that is not an address or CIDR block is rejected with its item number, and a
 * document of the wrong shape gives one rejected item at line 1.
 *
 * These documents describe shared infrastructure, not threats: a manifest gives them `direction: "safe"` and
 * subgroup `cloud` or `cdn` (docs/SCORING.md says what that does to a verdict).
 * @see ../../../../data/feeds/README.md ("Provider range formats")
 */
import type { FeedParseResult } from '../../engine/types.ts'
import { cleanLabel } from './feed-label.ts'
import { FeedResultBuilder, wholeFileRejected, type EntrySink } from './feed-result.ts'
import { classifyIp } from './ip-literal.ts'
import { arrayMember, isRecord, parseJsonDocument, type JsonRecord } from './json-value.ts'

/** Collects prefixes with an item counter shared by the whole document. */
class PrefixReader {
  readonly out: FeedResultBuilder
  private item = 0

  constructor (sink: EntrySink | undefined) {
    this.out = new FeedResultBuilder(sink)
  }

  /** Checks one prefix value (a string); rejects it with its item number, or returns it with its type and number. */
  check (value: unknown): { type: 'ip' | 'ip_block', prefix: string, item: number } | null {
    const item = this.skip()
    if (typeof value !== 'string') {
      this.out.reject(item, 'prefix is not a string')
      return null
    }
    const prefix = value.trim()
    const type = classifyIp(prefix)
    if (type === null) {
      this.out.reject(item, `not an address or CIDR block: ${JSON.stringify(prefix.slice(0, 80))}`)
      return null
    }
    return { type, prefix, item }
  }

  /** Reads one prefix value (a string) under `label`. */
  add (value: unknown, label: string): void {
    const p = this.check(value)
    if (p !== null) this.out.add(p.type, p.prefix, p.item, { label })
  }

  /** Counts an item that could not be read at all (not an object, no prefix member). */
  reject (reason: string): void {
    this.out.reject(this.skip(), reason)
  }

  /** Counts an item without reading it; returns its number. */
  skip (): number {
    this.out.lines = ++this.item
    return this.item
  }

  result (): FeedParseResult {
    return this.out.result()
  }
}

/** The document as an object, or a whole-file rejection. */
function documentOf (text: string, what: string): JsonRecord | FeedParseResult {
  const doc = parseJsonDocument(text)
  if (!doc.ok) return wholeFileRejected(doc.reason)
  if (!isRecord(doc.value)) return wholeFileRejected(`expected ${what}`)
  return doc.value
}

function isResult (x: JsonRecord | FeedParseResult): x is FeedParseResult {
  return Array.isArray(x.entries) && Array.isArray(x.rejected)
}

/** "Provider detail detail" from the parts that are present. */
function labelOf (...parts: unknown[]): string {
  return parts.map((p) => cleanLabel(p)).filter((p) => p !== undefined).join(' ')
}

/**
 * AWS `ip-ranges.json`: `prefixes[].ip_prefix` and `ipv6_prefixes[].ipv6_prefix`, each with `service` and `region`.
 * AWS lists a prefix once per service (AMAZON, then EC2, S3 ...); the snapshot keeps one listing per prefix, so
 * the label names the first service other than the catch-all AMAZON.
 * @see https://docs.aws.amazon.com/vpc/latest/userguide/aws-ip-syntax.html
 */
export function parseAwsIpRanges (text: string, sink?: EntrySink): FeedParseResult {
  const doc = documentOf(text, 'an object with "prefixes" and "ipv6_prefixes"')
  if (isResult(doc)) return doc
  const v4 = arrayMember(doc, 'prefixes')
  const v6 = arrayMember(doc, 'ipv6_prefixes')
  if (v4 === null || v6 === null || (!Object.hasOwn(doc, 'prefixes') && !Object.hasOwn(doc, 'ipv6_prefixes'))) {
    return wholeFileRejected('expected an object with "prefixes" and "ipv6_prefixes" arrays')
  }
  // Prefix -> its entry, so a later, more specific service can relabel it; entries are handed on at the end.
  const seen = new Map<string, { type: 'ip' | 'ip_block', prefix: string, item: number, label: string, amazon: boolean }>()
  const r = new PrefixReader(sink)
  for (const [list, key] of [[v4, 'ip_prefix'], [v6, 'ipv6_prefix']] as const) {
    for (const p of list) {
      if (!isRecord(p)) {
        r.reject('prefix entry is not an object')
        continue
      }
      const label = labelOf('AWS', p.service, p.region)
      const value = typeof p[key] === 'string' ? (p[key] as string).trim() : p[key]
      const first = typeof value === 'string' ? seen.get(value) : undefined
      if (first !== undefined) {
        // Counted as an item, merged into the first listing of the same prefix.
        r.skip()
        if (first.amazon && p.service !== 'AMAZON') Object.assign(first, { label, amazon: false })
        continue
      }
      const checked = r.check(value)
      if (checked !== null) seen.set(checked.prefix, { ...checked, label, amazon: p.service === 'AMAZON' })
    }
  }
  for (const e of seen.values()) r.out.add(e.type, e.prefix, e.item, { label: e.label })
  return r.result()
}

/**
 * Google `goog.json` (every Google address range) and `cloud.json` (Google Cloud customer ranges):
 * `prefixes[]` with `ipv4Prefix` or `ipv6Prefix`; cloud.json adds `service` and `scope` (the region).
 * @see https://support.google.com/a/answer/10026322
 * @see https://cloud.google.com/compute/docs/faq#find_ip_range
 */
export function parseGoogleIpRanges (text: string, sink?: EntrySink): FeedParseResult {
  const doc = documentOf(text, 'an object with "prefixes"')
  if (isResult(doc)) return doc
  const list = arrayMember(doc, 'prefixes')
  if (list === null || !Object.hasOwn(doc, 'prefixes')) return wholeFileRejected('expected an object with a "prefixes" array')
  const r = new PrefixReader(sink)
  for (const p of list) {
    if (!isRecord(p)) {
      r.reject('prefix entry is not an object')
      continue
    }
    const value = p.ipv4Prefix ?? p.ipv6Prefix
    if (value === undefined) {
      r.reject('prefix entry has neither "ipv4Prefix" nor "ipv6Prefix"')
      continue
    }
    r.add(value, labelOf(typeof p.service === 'string' ? p.service : 'Google', p.scope))
  }
  return r.result()
}

/**
 * Azure service tags (`ServiceTags_Public_<date>.json`): `values[]`, each a tag with `name` and
 * `properties.addressPrefixes[]`. Tags overlap (AzureCloud holds the regional tags' prefixes); the snapshot keeps
 * one listing per prefix, labelled with the first tag that names it.
 * @see https://learn.microsoft.com/en-us/azure/virtual-network/service-tags-overview#discover-service-tags-by-using-downloadable-json-files
 */
export function parseAzureServiceTags (text: string, sink?: EntrySink): FeedParseResult {
  const doc = documentOf(text, 'an object with "values"')
  if (isResult(doc)) return doc
  const list = arrayMember(doc, 'values')
  if (list === null || !Object.hasOwn(doc, 'values')) return wholeFileRejected('expected an object with a "values" array')
  const r = new PrefixReader(sink)
  for (const tag of list) {
    const props = isRecord(tag) ? tag.properties : undefined
    const prefixes = isRecord(props) ? arrayMember(props, 'addressPrefixes') : null
    if (!isRecord(tag) || prefixes === null) {
      r.reject('service tag without "properties.addressPrefixes"')
      continue
    }
    const label = labelOf('Azure', tag.name)
    for (const p of prefixes) r.add(p, label)
  }
  return r.result()
}

/**
 * Oracle Cloud `public_ip_ranges.json`: `regions[]`, each with `region` and `cidrs[]` of `{cidr, tags}`.
 * @see https://docs.oracle.com/en-us/iaas/Content/General/Concepts/addressranges.htm
 */
export function parseOracleIpRanges (text: string, sink?: EntrySink): FeedParseResult {
  const doc = documentOf(text, 'an object with "regions"')
  if (isResult(doc)) return doc
  const list = arrayMember(doc, 'regions')
  if (list === null || !Object.hasOwn(doc, 'regions')) return wholeFileRejected('expected an object with a "regions" array')
  const r = new PrefixReader(sink)
  for (const region of list) {
    const cidrs = isRecord(region) ? arrayMember(region, 'cidrs') : null
    if (!isRecord(region) || cidrs === null) {
      r.reject('region without a "cidrs" array')
      continue
    }
    const label = labelOf('Oracle Cloud', region.region)
    for (const c of cidrs) {
      if (!isRecord(c)) r.reject('cidr entry is not an object')
      else r.add(c.cidr, label)
    }
  }
  return r.result()
}

/** Members of GitHub's meta document that are not address lists. */
const kGithubSkip = new Set(['ssh_keys', 'ssh_key_fingerprints', 'domains', 'verifiable_password_authentication'])

/**
 * GitHub `meta` (api.github.com/meta): top-level arrays of CIDR strings per service (`hooks`, `web`, `api`, `git`,
 * `pages`, `actions`, ...). Members that are not address lists (`ssh_keys`, `domains`, ...) are skipped.
 * @see https://docs.github.com/en/rest/meta/meta#get-github-meta-information
 */
export function parseGithubMeta (text: string, sink?: EntrySink): FeedParseResult {
  const doc = documentOf(text, 'the GitHub meta object')
  if (isResult(doc)) return doc
  const r = new PrefixReader(sink)
  let lists = 0
  for (const [key, value] of Object.entries(doc)) {
    if (kGithubSkip.has(key) || !Array.isArray(value)) continue
    lists++
    const label = labelOf('GitHub', key)
    for (const p of value) r.add(p, label)
  }
  if (lists === 0) return wholeFileRejected('expected the GitHub meta object with address lists such as "hooks" and "web"')
  return r.result()
}

/**
 * Fastly `public-ip-list` (api.fastly.com/public-ip-list): `addresses[]` and `ipv6_addresses[]`.
 * @see https://www.fastly.com/documentation/reference/api/utils/public-ip-list/
 */
export function parseFastlyIpList (text: string, sink?: EntrySink): FeedParseResult {
  const doc = documentOf(text, 'an object with "addresses"')
  if (isResult(doc)) return doc
  const v4 = arrayMember(doc, 'addresses')
  const v6 = arrayMember(doc, 'ipv6_addresses')
  if (v4 === null || v6 === null || (!Object.hasOwn(doc, 'addresses') && !Object.hasOwn(doc, 'ipv6_addresses'))) {
    return wholeFileRejected('expected an object with "addresses" and "ipv6_addresses" arrays')
  }
  const r = new PrefixReader(sink)
  for (const p of [...v4, ...v6]) r.add(p, 'Fastly')
  return r.result()
}
