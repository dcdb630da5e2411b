/**
 * A deterministic, SIEM-like mix of indicators for the engine and capacity benches (and tests that want volume).
 *
 * Mix (approximate): 45% IPv4, 5% IPv6, 30% domains, 8% ip_block, 8% sha256, 4% asn; about 3% of items omit `type`
 * (the service infers it). Most values are random public ones (no intel about them), with a realistic sprinkling of
 * known ones: sample-feed listings, special-purpose and documentation addresses, public resolvers, CDN edges,
 * domains from eth-phishing-detect's block and allow lists, DGA-like and punycode names, and defanged forms.
 *
 * Same (n, seed) -> same array, on every platform: a small seeded PRNG (mulberry32), no dependency.
 */
import { createRequire } from 'node:module'

/** One corpus item, shaped as a bulk request item. */
export interface CorpusItem { type?: string, value: string }

const kRequire = createRequire(import.meta.url)
const kPhishing = kRequire('eth-phishing-detect/src/config.json') as { blacklist: string[], whitelist: string[] }

/** mulberry32: a 32-bit seeded PRNG, good enough for test data. Returns floats in [0, 1). */
export function mulberry32 (seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

class Rng {
  readonly next: () => number
  constructor (seed: number) { this.next = mulberry32(seed) }
  /** Integer in [0, n). */
  int (n: number): number { return Math.floor(this.next() * n) }
  /** Integer in [lo, hi]. */
  range (lo: number, hi: number): number { return lo + this.int(hi - lo + 1) }
  pick<T> (list: readonly T[]): T { return list[this.int(list.length)] as T }
  chance (p: number): boolean { return this.next() < p }
}

const kKnownListedV4 = ['198.51.100.23', '203.0.113.9', '203.0.113.45', '192.0.2.44', '198.51.100.201', '192.0.2.99']
const kResolversV4 = ['8.8.8.8', '8.8.4.4', '1.1.1.1', '1.0.0.1', '9.9.9.9', '149.112.112.112', '208.67.222.222']
const kKnownV6 = ['2001:4860:4860::8888', '2606:4700:4700::1111', '2620:fe::fe', 'fe80::1', '::1', '2001:db8::5', '2001:db8:bad::10']
const kKnownDomains = ['malware-c2.example', 'payload-drop.test', 'cdn.xiaoduoai.com', 'ct3-24.ru', 'dns.google',
  'one.one.one.one', 'xn--80ak6aa92e.com', 'google.com', 'wikipedia.org', 'mailinator.com']
const kKnownBlocks = ['203.0.113.0/24', '10.0.0.0/8', '192.168.0.0/16', '104.16.0.0/13', '1.1.1.0/24', '198.51.100.64/26', '2001:db8:bad::/48']
const kKnownAsns = ['AS13335', 'AS15169', 'AS16509', 'AS64511', 'AS64500', '13335', 'as8075', 'AS112']
const kEicar = '275a021bbfb6489e54d471899f7db9d1663fc695ec2fe2a2c4538aabf651fd0f'
const kKnownHashes = [kEicar, 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
  '29492effae46d6d4977c7d3e21b40985673b4243e39c5c2622357ffea4593b82']

const kSyllables = ['ka', 'lo', 'mi', 'ne', 'sta', 'ver', 'tor', 'lin', 'ban', 'co', 'net', 'ser', 'pro', 'gra', 'fi',
  'mar', 'ket', 'shop', 'blog', 'data', 'cloud', 'web', 'tech', 'ho', 'me', 'tri', 'plex', 'sol', 'no', 'va', 'ar', 'is']
const kTlds = ['com', 'com', 'com', 'net', 'org', 'io', 'de', 'ru', 'cn', 'co.uk', 'info', 'xyz', 'top', 'online', 'fr', 'com.br']
const kSubs = ['www', 'mail', 'cdn', 'api', 'login', 'static', 'secure', 'portal']
const kDgaChars = 'bcdfghjklmnpqrstvwxz0123456789'
const kHex = '0123456789abcdef'

/** A random public IPv4 address (outside the special-purpose ranges). */
function publicV4 (r: Rng): string {
  for (;;) {
    const a = r.range(1, 223)
    const b = r.int(256)
    if (a === 10 || a === 127 || (a === 100 && b >= 64 && b < 128) || (a === 169 && b === 254) ||
      (a === 172 && b >= 16 && b < 32) || (a === 192 && b === 168) || (a === 198 && (b === 18 || b === 19))) continue
    return `${a}.${b}.${r.int(256)}.${r.range(1, 254)}`
  }
}

function specialV4 (r: Rng): string {
  switch (r.int(5)) {
    case 0: return `10.${r.int(256)}.${r.int(256)}.${r.range(1, 254)}`
    case 1: return `192.168.${r.int(256)}.${r.range(1, 254)}`
    case 2: return `172.${r.range(16, 31)}.${r.int(256)}.${r.range(1, 254)}`
    case 3: return `169.254.${r.int(256)}.${r.range(1, 254)}`
    default: return '127.0.0.1'
  }
}

function ipv4 (r: Rng): string {
  const x = r.next()
  if (x < 0.82) return publicV4(r)
  if (x < 0.87) return r.pick(kKnownListedV4)
  if (x < 0.93) return specialV4(r)
  if (x < 0.97) return r.pick(kResolversV4)
  return `104.${r.range(16, 23)}.${r.int(256)}.${r.range(1, 254)}`
}

function hex16 (r: Rng): string {
  return r.int(0x10000).toString(16)
}

function ipv6 (r: Rng): string {
  if (r.chance(0.2)) return r.pick(kKnownV6)
  const top = r.pick(['2001', '2a00', '2a01', '2a02', '2a03', '2400', '2600', '2607', '2804', '240e'])
  return r.chance(0.5)
    ? `${top}:${hex16(r)}:${hex16(r)}::${hex16(r)}`
    : `${top}:${hex16(r)}:${hex16(r)}:${hex16(r)}:${hex16(r)}:${hex16(r)}:${hex16(r)}:${hex16(r)}`
}

function wordName (r: Rng): string {
  let s = ''
  const n = r.range(2, 4)
  for (let i = 0; i < n; i++) s += r.pick(kSyllables)
  if (r.chance(0.15)) s += String(r.int(100))
  if (r.chance(0.1)) s = `${s}-${r.pick(kSyllables)}${r.pick(kSyllables)}`
  return s
}

function dgaName (r: Rng): string {
  let s = ''
  const n = r.range(13, 22)
  for (let i = 0; i < n; i++) s += kDgaChars[r.int(kDgaChars.length)]
  return s
}

function domain (r: Rng): string {
  const x = r.next()
  let name: string
  if (x < 0.62) {
    name = `${wordName(r)}.${r.pick(kTlds)}`
    if (r.chance(0.25)) name = `${r.pick(kSubs)}.${name}`
  } else if (x < 0.72) {
    name = `${dgaName(r)}.${r.pick(['com', 'net', 'info', 'biz', 'xyz', 'top'])}`
  } else if (x < 0.84) {
    name = r.pick(kPhishing.blacklist)
    if (r.chance(0.2)) name = `${r.pick(kSubs)}.${name}`
  } else if (x < 0.9) {
    name = r.pick(kPhishing.whitelist)
  } else {
    name = r.pick(kKnownDomains)
  }
  if (r.chance(0.05)) name = name.toUpperCase()
  if (r.chance(0.05)) name = name.replace('.', r.chance(0.5) ? '[.]' : '(.)')
  return name
}

function ipBlock (r: Rng): string {
  if (r.chance(0.15)) return r.pick(kKnownBlocks)
  const prefix = r.pick([8, 12, 16, 20, 22, 24, 24, 24, 28])
  const ip = publicV4(r)
  if (r.chance(0.1)) return `${ip}/${prefix}` // host bits set: normalizes with a warning
  const word = ip.split('.').reduce((acc, o) => (acc * 256) + Number(o), 0)
  const masked = (word & (prefix === 0 ? 0 : (0xffffffff << (32 - prefix)))) >>> 0
  return `${masked >>> 24}.${(masked >>> 16) & 255}.${(masked >>> 8) & 255}.${masked & 255}/${prefix}`
}

function sha256 (r: Rng): string {
  if (r.chance(0.03)) return r.pick(kKnownHashes)
  let s = ''
  for (let i = 0; i < 64; i++) s += kHex[r.int(16)]
  return r.chance(0.05) ? s.toUpperCase() : s
}

function asn (r: Rng): string {
  if (r.chance(0.3)) return r.pick(kKnownAsns)
  const n = r.chance(0.8) ? r.range(1, 65000) : r.range(131072, 400000)
  return r.chance(0.8) ? `AS${n}` : String(n)
}

/** `n` indicators, deterministic for `seed`. */
export function mixedCorpus (n: number, seed: number): CorpusItem[] {
  const r = new Rng(seed)
  const out: CorpusItem[] = []
  for (let i = 0; i < n; i++) {
    const x = r.next()
    let type: string
    let value: string
    if (x < 0.45) {
      type = 'ip'
      value = ipv4(r)
      if (r.chance(0.02)) value = value.replace(/\.(?=\d+$)/, '[.]')
    } else if (x < 0.5) {
      type = 'ip'
      value = ipv6(r)
    } else if (x < 0.8) {
      type = 'domain'
      value = domain(r)
    } else if (x < 0.88) {
      type = 'ip_block'
      value = ipBlock(r)
    } else if (x < 0.96) {
      type = 'file_hash_sha256'
      value = sha256(r)
    } else {
      type = 'asn'
      value = asn(r)
    }
    // A bare number is an AS number only when typed as one; keep it typed so inference stays unambiguous.
    out.push(r.chance(0.03) && !/^\d+$/.test(value) ? { value } : { type, value })
  }
  return out
}

/** Indicator types a bench mix may name (the service's types). */
export const kMixTypes = ['ip', 'domain', 'ip_block', 'file_hash_sha256', 'asn'] as const
export type MixType = typeof kMixTypes[number]

/**
 * `n` typed indicators drawn with the given weights per type (`{ ip: 40, domain: 30 }`; weights need not sum to 100),
 * deterministic for `seed`. Values come from the same generators as mixedCorpus (IPv6 is 10% of `ip`).
 */
export function weightedCorpus (n: number, seed: number, weights: Partial<Record<MixType, number>>): CorpusItem[] {
  const r = new Rng(seed)
  const entries = kMixTypes.map((t) => [t, weights[t] ?? 0] as const).filter(([, w]) => w > 0)
  const total = entries.reduce((s, [, w]) => s + w, 0)
  const out: CorpusItem[] = []
  for (let i = 0; i < n; i++) {
    let x = r.next() * total
    let type: MixType = entries[entries.length - 1]?.[0] ?? 'ip'
    for (const [t, w] of entries) {
      if (x < w) { type = t; break }
      x -= w
    }
    const value = type === 'ip'
      ? (r.chance(0.1) ? ipv6(r) : ipv4(r))
      : type === 'domain' ? domain(r) : type === 'ip_block' ? ipBlock(r) : type === 'file_hash_sha256' ? sha256(r) : asn(r)
    out.push({ type, value })
  }
  return out
}
