import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { formatIp, inferType, normalize, parseIPv4, parseIp, parseIpBlock, refang } from '../../src/engine/normalize/index.ts'
import type { IndicatorType, ParsedIp } from '../../src/engine/types.ts'

/** A row that must normalize. `type` undefined means "call without a type" (inference). */
interface OkCase {
  why: string
  value: string
  type?: IndicatorType
  normalized: string
  warnings?: string[]
  ip?: ParsedIp
  prefix?: number
  asn?: number
}

/** A row that must fail with exactly one error. */
interface BadCase {
  why: string
  value: unknown
  type?: unknown
  error: string
  warnings?: string[]
}

const kInferIp = 'type inferred as ip'
const kInferBlock = 'type inferred as ip_block'
const kInferAsn = 'type inferred as asn'
const kInferHash = 'type inferred as file_hash_sha256'
const kInferDomain = 'type inferred as domain'
const kRefanged = 'refanged defanged input'
const kMapped = 'IPv4-mapped IPv6 address converted to IPv4'
const kMappedBlock = 'IPv4-mapped IPv6 block converted to IPv4'
const kHostBits = 'host bits cleared'
const kUrlHost = 'host extracted from URL'
const kAsdot = 'asdot notation converted to asplain'
const kShaPrefix = 'removed sha256: prefix'

const kSha = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'
const kMd5 = 'd41d8cd98f00b204e9800998ecf8427e'
const kSha1 = 'da39a3ee5e6b4b0d3255bfef95601890afd80709'
const kSha384 = '38b060a751ac96384cd9327eb1b1e36a21fdb71114be07434c0cc7bf63f6e1da274edebfe76f65fbd51ad2f14898b95b'
const kSha512 = 'cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e'
const kTypes = ['ip', 'domain', 'ip_block', 'file_hash_sha256', 'asn']
const k1234 = 0x01020304
const k2001db8 = 0x20010db8

/** Short printable form of a test value for titles. */
function show (v: unknown): string {
  if (typeof v === 'string') return v.length > 48 ? `<${v.length}-char string>` : JSON.stringify(v)
  if (typeof v === 'bigint') return `${v}n`
  if (typeof v === 'symbol' || typeof v === 'function') return typeof v
  return JSON.stringify(v) ?? String(v)
}

/** Runs the ok rows; typed rows default to no warnings. */
function okCases (rows: OkCase[]): void {
  for (const c of rows) {
    const how = c.type === undefined ? 'untyped' : c.type
    it(`${c.why}: ${how} ${show(c.value)} -> ${JSON.stringify(c.normalized)}`, () => {
      const r = normalize(c.value, c.type)
      assert.ok(r.ok, `expected ok, got ${JSON.stringify(r)}`)
      const ind = r.indicator
      assert.equal(ind.normalized, c.normalized)
      assert.deepEqual(ind.warnings, c.warnings ?? [])
      assert.equal(ind.inferred, c.type === undefined)
      if (c.type !== undefined) assert.equal(ind.type, c.type)
      if (c.ip !== undefined) assert.deepEqual(ind.ip, c.ip)
      if (c.prefix !== undefined) assert.equal(ind.prefix, c.prefix)
      if (c.asn !== undefined) assert.equal(ind.asn, c.asn)
    })
  }
}

/** Runs the failing rows; the error's type is the given type, or null when none (or a bad one) was given. */
function badCases (rows: BadCase[]): void {
  for (const c of rows) {
    const how = c.type === undefined ? 'untyped' : typeof c.type === 'string' ? c.type : `type ${show(c.type)}`
    it(`${c.why}: ${how} ${show(c.value)} is rejected`, () => {
      const r = normalize(c.value, c.type)
      assert.equal(r.ok, false, `expected an error, got ${JSON.stringify(r)}`)
      if (r.ok) return
      assert.deepEqual(r.errors, [c.error])
      assert.deepEqual(r.warnings, c.warnings ?? [])
      const validType = typeof c.type === 'string' && kTypes.includes(c.type)
      assert.equal(r.type, validType ? c.type : null)
    })
  }
}

describe('normalize: ip', () => {
  okCases([
    { why: 'keeps a canonical dotted quad as is', value: '1.2.3.4', type: 'ip', normalized: '1.2.3.4', ip: { version: 4, words: [k1234] } },
    { why: 'accepts the all-zero address', value: '0.0.0.0', type: 'ip', normalized: '0.0.0.0', ip: { version: 4, words: [0] } },
    { why: 'accepts the broadcast address as one unsigned word', value: '255.255.255.255', type: 'ip', normalized: '255.255.255.255', ip: { version: 4, words: [4294967295] } },
    { why: 'accepts single zero octets', value: '10.0.0.1', type: 'ip', normalized: '10.0.0.1' },
    { why: 'trims surrounding whitespace', value: ' \t8.8.8.8\n', type: 'ip', normalized: '8.8.8.8' },
    { why: 'suppresses leading zeros in IPv6 groups (RFC 5952 4.1)', value: '2001:0db8::0001', type: 'ip', normalized: '2001:db8::1', ip: { version: 6, words: [k2001db8, 0, 0, 1] } },
    { why: 'uses :: to its maximum capability (RFC 5952 4.2.1)', value: '2001:db8:0:0:0:0:2:1', type: 'ip', normalized: '2001:db8::2:1' },
    { why: 'compresses a trailing zero group into :: (RFC 5952 4.2.1)', value: '2001:db8::0:1', type: 'ip', normalized: '2001:db8::1' },
    { why: 'does not compress a single zero group (RFC 5952 4.2.2)', value: '2001:db8:0:1:1:1:1:1', type: 'ip', normalized: '2001:db8:0:1:1:1:1:1' },
    { why: 'expands a :: that stands for one group (RFC 5952 4.2.2)', value: '2001:db8::1:1:1:1:1', type: 'ip', normalized: '2001:db8:0:1:1:1:1:1' },
    { why: 'compresses the longest zero run (RFC 5952 4.2.3)', value: '2001:0:0:1:0:0:0:1', type: 'ip', normalized: '2001:0:0:1::1' },
    { why: 'compresses the first of equal zero runs (RFC 5952 4.2.3)', value: '2001:db8:0:0:1:0:0:1', type: 'ip', normalized: '2001:db8::1:0:0:1' },
    { why: 'lowercases hex digits (RFC 5952 4.3)', value: '2001:DB8::1', type: 'ip', normalized: '2001:db8::1' },
    { why: 'canonicalizes an RFC 5952 section 2 variant', value: '2001:db8::0:1:0:0:1', type: 'ip', normalized: '2001:db8::1:0:0:1' },
    { why: 'canonicalizes another RFC 5952 section 2 variant', value: '2001:db8:0000:0:1::1', type: 'ip', normalized: '2001:db8::1:0:0:1' },
    { why: 'canonicalizes an uppercase RFC 5952 section 2 variant', value: '2001:DB8:0:0:1::1', type: 'ip', normalized: '2001:db8::1:0:0:1' },
    { why: 'writes the loopback as ::1', value: '0:0:0:0:0:0:0:1', type: 'ip', normalized: '::1', ip: { version: 6, words: [0, 0, 0, 1] } },
    { why: 'writes the unspecified address as ::', value: '0:0:0:0:0:0:0:0', type: 'ip', normalized: '::' },
    { why: 'compresses a trailing zero run', value: '2001:db8:0:0:0:0:0:0', type: 'ip', normalized: '2001:db8::' },
    { why: 'expands a trailing :: standing for one group', value: '1:2:3:4:5:6:7::', type: 'ip', normalized: '1:2:3:4:5:6:7:0' },
    { why: 'expands a leading :: standing for one group', value: '::2:3:4:5:6:7:8', type: 'ip', normalized: '0:2:3:4:5:6:7:8' },
    { why: 'compresses an inner zero run', value: '2001:db8:85a3:0:0:8a2e:370:7334', type: 'ip', normalized: '2001:db8:85a3::8a2e:370:7334' },
    { why: 'packs IPv6 into four big-endian unsigned words', value: 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe', type: 'ip', normalized: 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe', ip: { version: 6, words: [4294967295, 4294967295, 4294967295, 4294967294] } },
    { why: 'parses an embedded IPv4 tail and prints it as hex', value: '::1.2.3.4', type: 'ip', normalized: '::102:304', ip: { version: 6, words: [0, 0, 0, k1234] } },
    { why: 'parses the NAT64 prefix with an IPv4 tail', value: '64:ff9b::1.2.3.4', type: 'ip', normalized: '64:ff9b::102:304' },
    { why: 'keeps IPv4-translated (not mapped) addresses as IPv6', value: '::ffff:0:1.2.3.4', type: 'ip', normalized: '::ffff:0:102:304' },
    { why: 'maps IPv4-mapped IPv6 to IPv4 with a warning', value: '::ffff:1.2.3.4', type: 'ip', normalized: '1.2.3.4', warnings: [kMapped], ip: { version: 4, words: [k1234] } },
    { why: 'maps the hex form of IPv4-mapped IPv6 too', value: '::FFFF:102:304', type: 'ip', normalized: '1.2.3.4', warnings: [kMapped] },
    { why: 'maps the fully written IPv4-mapped form', value: '0:0:0:0:0:ffff:1.2.3.4', type: 'ip', normalized: '1.2.3.4', warnings: [kMapped] },
    { why: 'accepts a bracketed IPv6 literal without a warning', value: '[2001:db8::1]', type: 'ip', normalized: '2001:db8::1' },
    { why: 'takes the host of a URL', value: 'http://1.2.3.4/malware.exe', type: 'ip', normalized: '1.2.3.4', warnings: [kUrlHost] },
    { why: 'takes a bracketed IPv6 host with a port from a URL', value: 'https://[2001:DB8::1]:8443/x', type: 'ip', normalized: '2001:db8::1', warnings: [kUrlHost] },
    { why: 'refangs [.] in an address', value: '1.2.3[.]4', type: 'ip', normalized: '1.2.3.4', warnings: [kRefanged] },
    { why: 'refangs every [.] with one warning', value: '1[.]2[.]3[.]4', type: 'ip', normalized: '1.2.3.4', warnings: [kRefanged] },
    { why: 'refangs (.) in an address', value: '8(.)8(.)8(.)8', type: 'ip', normalized: '8.8.8.8', warnings: [kRefanged] },
    { why: 'refangs [:] in IPv6', value: '2001[:]db8[:][:]1', type: 'ip', normalized: '2001:db8::1', warnings: [kRefanged] }
  ])
  badCases([
    { why: 'rejects an octal-looking first octet', value: '010.1.1.1', type: 'ip', error: 'invalid IPv4 address: leading zeros are ambiguous' },
    { why: 'rejects a leading zero in the last octet', value: '1.2.3.04', type: 'ip', error: 'invalid IPv4 address: leading zeros are ambiguous' },
    { why: 'rejects a double zero octet', value: '00.1.1.1', type: 'ip', error: 'invalid IPv4 address: leading zeros are ambiguous' },
    { why: 'rejects hex octets', value: '0x7f.1.1.1', type: 'ip', error: 'invalid IPv4 address: hex octets are not accepted' },
    { why: 'rejects uppercase hex octets', value: '0X7F.0.0.1', type: 'ip', error: 'invalid IPv4 address: hex octets are not accepted' },
    { why: 'rejects three-part shorthand', value: '1.2.3', type: 'ip', error: 'invalid IPv4 address: expected four decimal octets' },
    { why: 'rejects two-part shorthand', value: '127.1', type: 'ip', error: 'invalid IPv4 address: expected four decimal octets' },
    { why: 'rejects five parts', value: '1.2.3.4.5', type: 'ip', error: 'invalid IPv4 address: expected four decimal octets' },
    { why: 'rejects the integer form', value: '3232235777', type: 'ip', error: 'invalid IPv4 address: expected four decimal octets' },
    { why: 'rejects an empty octet', value: '1.2..4', type: 'ip', error: 'invalid IPv4 address: expected four decimal octets' },
    { why: 'rejects a trailing dot', value: '1.2.3.4.', type: 'ip', error: 'invalid IPv4 address: expected four decimal octets' },
    { why: 'rejects an octet over 255', value: '256.1.1.1', type: 'ip', error: 'invalid IPv4 address: octet out of range' },
    { why: 'rejects a large last octet', value: '1.2.3.999', type: 'ip', error: 'invalid IPv4 address: octet out of range' },
    { why: 'rejects a signed octet', value: '-1.2.3.4', type: 'ip', error: 'invalid IP address: not an IPv4 or IPv6 address' },
    { why: 'rejects a domain', value: 'example.com', type: 'ip', error: 'invalid IP address: not an IPv4 or IPv6 address' },
    { why: 'rejects two addresses in one value', value: '1.2.3.4 5.6.7.8', type: 'ip', error: 'invalid IP address: not an IPv4 or IPv6 address' },
    { why: 'says a CIDR is a block, not an address', value: '1.2.3.0/24', type: 'ip', error: 'invalid IP address: a CIDR block is not an address (use type ip_block)' },
    { why: 'says an IPv6 CIDR is a block', value: '2001:db8::/32', type: 'ip', error: 'invalid IP address: a CIDR block is not an address (use type ip_block)' },
    { why: 'rejects an address with a port', value: '1.2.3.4:80', type: 'ip', error: 'invalid IP address: ports are not accepted' },
    { why: 'rejects a bracketed IPv6 with a port', value: '[::1]:443', type: 'ip', error: 'invalid IP address: ports are not accepted' },
    { why: 'rejects brackets around IPv4', value: '[1.2.3.4]', type: 'ip', error: 'invalid IP address: brackets are only for IPv6' },
    { why: 'rejects an unclosed bracket', value: '[::1', type: 'ip', error: 'invalid IP address: unbalanced brackets' },
    { why: 'rejects a stray closing bracket', value: '::1]', type: 'ip', error: 'invalid IP address: unbalanced brackets' },
    { why: 'rejects zone ids', value: 'fe80::1%eth0', type: 'ip', error: 'invalid IPv6 address: zone ids are not accepted' },
    { why: 'rejects a zone id after ::', value: 'fe80::%25eth0', type: 'ip', error: 'invalid IPv6 address: zone ids are not accepted' },
    { why: 'rejects nine groups', value: '1:2:3:4:5:6:7:8:9', type: 'ip', error: 'invalid IPv6 address: wrong number of groups' },
    { why: 'rejects seven groups without ::', value: '1:2:3:4:5:6:7', type: 'ip', error: 'invalid IPv6 address: wrong number of groups' },
    { why: 'rejects eight groups plus ::', value: '1:2:3:4:5:6:7:8::', type: 'ip', error: 'invalid IPv6 address: wrong number of groups' },
    { why: 'rejects an IPv4 tail after seven groups', value: '1:2:3:4:5:6:7:1.2.3.4', type: 'ip', error: 'invalid IPv6 address: wrong number of groups' },
    { why: 'rejects two ::', value: '1::2::3', type: 'ip', error: 'invalid IPv6 address: more than one \'::\'' },
    { why: 'rejects a five-digit group', value: '12345::1', type: 'ip', error: 'invalid IPv6 address: group longer than four hex digits' },
    { why: 'rejects three colons in a row', value: '2001:db8:::1', type: 'ip', error: 'invalid IPv6 address: malformed' },
    { why: 'rejects a single leading colon', value: ':1:2:3:4:5:6:7', type: 'ip', error: 'invalid IPv6 address: malformed' },
    { why: 'rejects a single trailing colon', value: '1:2:3:4:5:6:7:', type: 'ip', error: 'invalid IPv6 address: malformed' },
    { why: 'rejects non-hex digits', value: 'g::1', type: 'ip', error: 'invalid IPv6 address: unexpected character' },
    { why: 'rejects an out-of-range embedded IPv4', value: '::ffff:1.2.3.256', type: 'ip', error: 'invalid IPv6 address: bad embedded IPv4 address' },
    { why: 'rejects a short embedded IPv4', value: '::1.2.3', type: 'ip', error: 'invalid IPv6 address: bad embedded IPv4 address' },
    { why: 'rejects leading zeros in an embedded IPv4', value: '::ffff:01.2.3.4', type: 'ip', error: 'invalid IPv6 address: bad embedded IPv4 address' },
    { why: 'rejects a URL whose host is a domain', value: 'http://evil.com/', type: 'ip', error: 'invalid IP address: not an IPv4 or IPv6 address', warnings: [kUrlHost] }
  ])
})

describe('normalize: domain', () => {
  const label63 = 'a'.repeat(63)
  const name253 = `${label63}.${label63}.${label63}.${'b'.repeat(61)}`
  okCases([
    { why: 'keeps a lowercase domain as is', value: 'example.com', type: 'domain', normalized: 'example.com' },
    { why: 'lowercases', value: 'EXAMPLE.COM', type: 'domain', normalized: 'example.com' },
    { why: 'removes one trailing dot', value: 'Example.Com.', type: 'domain', normalized: 'example.com' },
    { why: 'trims surrounding whitespace', value: '  example.org  ', type: 'domain', normalized: 'example.org' },
    { why: 'converts IDN to a punycode A-label', value: 'bücher.de', type: 'domain', normalized: 'xn--bcher-kva.de' },
    { why: 'case-folds IDN before converting', value: 'BÜCHER.DE', type: 'domain', normalized: 'xn--bcher-kva.de' },
    { why: 'converts a Cyrillic name and TLD', value: 'ПРИМЕР.рф', type: 'domain', normalized: 'xn--e1afmkfd.xn--p1ai' },
    { why: 'treats the ideographic full stop as a dot', value: '例え。テスト', type: 'domain', normalized: 'xn--r8jz45g.xn--zckzah' },
    { why: 'treats the fullwidth full stop as a dot', value: 'example．com', type: 'domain', normalized: 'example.com' },
    { why: 'treats the halfwidth ideographic full stop as a dot', value: 'example｡com', type: 'domain', normalized: 'example.com' },
    { why: 'maps sharp s per UTS 46 nontransitional processing', value: 'faß.de', type: 'domain', normalized: 'xn--fa-hia.de' },
    { why: 'keeps a valid A-label', value: 'xn--bcher-kva.de', type: 'domain', normalized: 'xn--bcher-kva.de' },
    { why: 'lowercases an uppercase A-label', value: 'XN--E1AFMKFD.XN--P1AI.', type: 'domain', normalized: 'xn--e1afmkfd.xn--p1ai' },
    { why: 'allows underscores for service records', value: '_dmarc.example.com', type: 'domain', normalized: '_dmarc.example.com' },
    { why: 'allows inner hyphens', value: 'sub-domain.example.co.uk', type: 'domain', normalized: 'sub-domain.example.co.uk' },
    { why: 'allows double hyphens inside a label', value: 'ab--cd.com', type: 'domain', normalized: 'ab--cd.com' },
    { why: 'allows numeric labels below the TLD', value: '123.example.com', type: 'domain', normalized: '123.example.com' },
    { why: 'allows a TLD that mixes letters and digits', value: 'example.a1', type: 'domain', normalized: 'example.a1' },
    { why: 'accepts two one-letter labels', value: 'a.b', type: 'domain', normalized: 'a.b' },
    { why: 'accepts a 63-character label', value: `${label63}.com`, type: 'domain', normalized: `${label63}.com` },
    { why: 'accepts a 253-character name', value: name253, type: 'domain', normalized: name253 },
    { why: 'accepts a 253-character name with a trailing dot', value: `${name253}.`, type: 'domain', normalized: name253 },
    { why: 'extracts the host from a URL with a warning', value: 'http://evil.com/path', type: 'domain', normalized: 'evil.com', warnings: [kUrlHost] },
    { why: 'drops userinfo, port, query and fragment from a URL', value: 'https://user:pw@Evil.COM:8443/a?b#c', type: 'domain', normalized: 'evil.com', warnings: [kUrlHost] },
    { why: 'accepts any URL scheme', value: 'ftp://files.example.net', type: 'domain', normalized: 'files.example.net', warnings: [kUrlHost] },
    { why: 'refangs a defanged URL and extracts its host', value: 'hxxps://evil[.]com:8080/x', type: 'domain', normalized: 'evil.com', warnings: [kRefanged, kUrlHost] },
    { why: 'refangs hxxp[://]', value: 'hxxp[://]example[.]com', type: 'domain', normalized: 'example.com', warnings: [kRefanged, kUrlHost] },
    { why: 'refangs an uppercase HXXP scheme', value: 'HXXP://example.com', type: 'domain', normalized: 'example.com', warnings: [kRefanged, kUrlHost] },
    { why: 'refangs [.]', value: 'example[.]com', type: 'domain', normalized: 'example.com', warnings: [kRefanged] },
    { why: 'refangs (.)', value: 'example(.)com', type: 'domain', normalized: 'example.com', warnings: [kRefanged] },
    { why: 'refangs {.}', value: 'example{.}com', type: 'domain', normalized: 'example.com', warnings: [kRefanged] },
    { why: 'refangs [dot]', value: 'example[dot]com', type: 'domain', normalized: 'example.com', warnings: [kRefanged] },
    { why: 'refangs (DOT) in any case', value: 'example(DOT)com', type: 'domain', normalized: 'example.com', warnings: [kRefanged] }
  ])
  badCases([
    { why: 'rejects an email address', value: 'user@example.com', type: 'domain', error: 'invalid domain: looks like an email address' },
    { why: 'rejects a wildcard', value: '*.example.com', type: 'domain', error: 'invalid domain: wildcards are not accepted' },
    { why: 'rejects a leading hyphen', value: '-example.com', type: 'domain', error: 'invalid domain: label starts or ends with a hyphen' },
    { why: 'rejects a trailing hyphen', value: 'example-.com', type: 'domain', error: 'invalid domain: label starts or ends with a hyphen' },
    { why: 'rejects an empty inner label', value: 'example..com', type: 'domain', error: 'invalid domain: empty label' },
    { why: 'rejects a leading dot', value: '.example.com', type: 'domain', error: 'invalid domain: empty label' },
    { why: 'rejects two trailing dots', value: 'example.com..', type: 'domain', error: 'invalid domain: empty label' },
    { why: 'rejects a single label', value: 'localhost', type: 'domain', error: 'invalid domain: needs at least two labels' },
    { why: 'rejects a numeric TLD', value: 'example.123', type: 'domain', error: 'invalid domain: top-level label is numeric' },
    { why: 'rejects a 64-character label', value: `${'a'.repeat(64)}.com`, type: 'domain', error: 'invalid domain: label longer than 63 characters' },
    { why: 'rejects a 254-character name', value: `a${name253}`, type: 'domain', error: 'invalid domain: longer than 253 characters' },
    { why: 'rejects inner spaces', value: 'exa mple.com', type: 'domain', error: 'invalid domain: invalid character U+0020' },
    { why: 'rejects a path without a scheme', value: 'example.com/path', type: 'domain', error: 'invalid domain: invalid character \'/\'' },
    { why: 'rejects host:port without a scheme', value: 'example.com:80', type: 'domain', error: 'invalid domain: invalid character \':\'' },
    { why: 'rejects percent-encoding', value: 'ex%41mple.com', type: 'domain', error: 'invalid domain: invalid character \'%\'' },
    { why: 'rejects control characters', value: 'exa\u0000mple.com', type: 'domain', error: 'invalid domain: invalid character U+0000' },
    { why: 'rejects undecodable punycode', value: 'xn--zz.com', type: 'domain', error: 'invalid domain: invalid punycode label' },
    { why: 'rejects names IDNA cannot convert', value: 'a\u200db.com', type: 'domain', error: 'invalid domain: IDN conversion failed' },
    { why: 'says an IPv4 address is not a domain', value: '1.2.3.4', type: 'domain', error: 'invalid domain: value is an IP address (use type ip)' },
    { why: 'says an IPv6 address is not a domain', value: '2001:db8::1', type: 'domain', error: 'invalid domain: value is an IP address (use type ip)' },
    { why: 'says a bracketed IPv6 address is not a domain', value: '[::1]', type: 'domain', error: 'invalid domain: value is an IP address (use type ip)' },
    { why: 'says a CIDR is not a domain', value: '1.2.3.0/24', type: 'domain', error: 'invalid domain: value is an IP block (use type ip_block)' },
    { why: 'says a URL with an IPv4 host is not a domain', value: 'http://1.2.3.4/x', type: 'domain', error: 'invalid domain: URL host is an IP address (use type ip)', warnings: [kUrlHost] },
    { why: 'says a URL with an IPv6 host is not a domain', value: 'http://[::1]:80/', type: 'domain', error: 'invalid domain: URL host is an IP address (use type ip)', warnings: [kUrlHost] },
    { why: 'rejects a URL without a host', value: 'http:///path', type: 'domain', error: 'invalid URL: missing host' },
    { why: 'rejects a URL with a non-numeric port', value: 'http://evil.com:80a/', type: 'domain', error: 'invalid URL: bad port' },
    { why: 'rejects a URL with a port over 65535', value: 'http://evil.com:65536/', type: 'domain', error: 'invalid URL: bad port' },
    { why: 'rejects a URL with a bad scheme', value: '1http://evil.com', type: 'domain', error: 'invalid URL: bad scheme' }
  ])
})

describe('normalize: ip_block', () => {
  okCases([
    { why: 'keeps a canonical IPv4 block as is', value: '1.2.3.0/24', type: 'ip_block', normalized: '1.2.3.0/24', ip: { version: 4, words: [0x01020300] }, prefix: 24 },
    { why: 'clears host bits with a warning', value: '1.2.3.4/24', type: 'ip_block', normalized: '1.2.3.0/24', warnings: [kHostBits], ip: { version: 4, words: [0x01020300] }, prefix: 24 },
    { why: 'accepts a /0', value: '0.0.0.0/0', type: 'ip_block', normalized: '0.0.0.0/0', prefix: 0 },
    { why: 'clears every bit for a /0', value: '255.255.255.255/0', type: 'ip_block', normalized: '0.0.0.0/0', warnings: [kHostBits] },
    { why: 'accepts a /32', value: '1.2.3.4/32', type: 'ip_block', normalized: '1.2.3.4/32', prefix: 32 },
    { why: 'accepts a /8', value: '10.0.0.0/8', type: 'ip_block', normalized: '10.0.0.0/8' },
    { why: 'clears host bits in the middle of an octet', value: '192.168.1.130/25', type: 'ip_block', normalized: '192.168.1.128/25', warnings: [kHostBits] },
    { why: 'keeps a canonical IPv6 block', value: '2001:db8::/32', type: 'ip_block', normalized: '2001:db8::/32', ip: { version: 6, words: [k2001db8, 0, 0, 0] }, prefix: 32 },
    { why: 'canonicalizes IPv6 text and clears host bits', value: '2001:DB8:0:0::1/32', type: 'ip_block', normalized: '2001:db8::/32', warnings: [kHostBits] },
    { why: 'clears IPv6 host bits across words', value: '2001:db8:1:2:3:4:5:6/64', type: 'ip_block', normalized: '2001:db8:1:2::/64', warnings: [kHostBits] },
    { why: 'accepts the IPv6 /0', value: '::/0', type: 'ip_block', normalized: '::/0', prefix: 0 },
    { why: 'accepts an IPv6 /128', value: '::1/128', type: 'ip_block', normalized: '::1/128', prefix: 128 },
    { why: 'maps an IPv4-mapped /120 to an IPv4 /24', value: '::ffff:1.2.3.0/120', type: 'ip_block', normalized: '1.2.3.0/24', warnings: [kMappedBlock], ip: { version: 4, words: [0x01020300] }, prefix: 24 },
    { why: 'maps an IPv4-mapped /128 to an IPv4 /32', value: '::ffff:1.2.3.4/128', type: 'ip_block', normalized: '1.2.3.4/32', warnings: [kMappedBlock] },
    { why: 'maps and then clears host bits', value: '::ffff:1.2.3.5/120', type: 'ip_block', normalized: '1.2.3.0/24', warnings: [kMappedBlock, kHostBits] },
    { why: 'keeps a block wider than the mapped range as IPv6', value: '::ffff:0:0/95', type: 'ip_block', normalized: '::fffe:0:0/95', warnings: [kHostBits] },
    { why: 'refangs a defanged block', value: '1.2.3[.]0/24', type: 'ip_block', normalized: '1.2.3.0/24', warnings: [kRefanged] },
    { why: 'trims surrounding whitespace', value: ' 10.0.0.0/8\t', type: 'ip_block', normalized: '10.0.0.0/8' }
  ])
  badCases([
    { why: 'says a bare IPv4 address is not a block', value: '1.2.3.4', type: 'ip_block', error: 'invalid IP block: a bare address is not a block' },
    { why: 'says a bare IPv6 address is not a block', value: '2001:db8::1', type: 'ip_block', error: 'invalid IP block: a bare address is not a block' },
    { why: 'rejects a value with no slash that is not an address', value: 'example.com', type: 'ip_block', error: 'invalid IP block: expected address/prefix' },
    { why: 'rejects an IPv4 prefix over 32', value: '1.2.3.0/33', type: 'ip_block', error: 'invalid IP block: prefix length out of range' },
    { why: 'rejects an IPv6 prefix over 128', value: '::/129', type: 'ip_block', error: 'invalid IP block: prefix length out of range' },
    { why: 'rejects an empty prefix', value: '1.2.3.0/', type: 'ip_block', error: 'invalid IP block: malformed prefix length' },
    { why: 'rejects a prefix with a leading zero', value: '1.2.3.0/024', type: 'ip_block', error: 'invalid IP block: malformed prefix length' },
    { why: 'rejects a signed prefix', value: '1.2.3.0/+24', type: 'ip_block', error: 'invalid IP block: malformed prefix length' },
    { why: 'rejects a hex prefix', value: '1.2.3.0/0x18', type: 'ip_block', error: 'invalid IP block: malformed prefix length' },
    { why: 'rejects two slashes', value: '1.2.3.0/24/8', type: 'ip_block', error: 'invalid IP block: malformed prefix length' },
    { why: 'rejects a dotted netmask', value: '1.2.3.0/255.255.255.0', type: 'ip_block', error: 'invalid IP block: malformed prefix length' },
    { why: 'rejects a leading-zero network address', value: '010.1.2.0/24', type: 'ip_block', error: 'invalid IPv4 address: leading zeros are ambiguous' },
    { why: 'rejects a shorthand network address', value: '10.1/16', type: 'ip_block', error: 'invalid IPv4 address: expected four decimal octets' },
    { why: 'rejects a zone id in the network address', value: 'fe80::%eth0/64', type: 'ip_block', error: 'invalid IPv6 address: zone ids are not accepted' },
    { why: 'rejects a domain before the slash', value: 'example.com/24', type: 'ip_block', error: 'invalid IP address: not an IPv4 or IPv6 address' }
  ])
})

describe('normalize: file_hash_sha256', () => {
  okCases([
    { why: 'keeps lowercase hex as is', value: kSha, type: 'file_hash_sha256', normalized: kSha },
    { why: 'lowercases uppercase hex', value: kSha.toUpperCase(), type: 'file_hash_sha256', normalized: kSha },
    { why: 'lowercases mixed-case hex', value: `${kSha.slice(0, 32).toUpperCase()}${kSha.slice(32)}`, type: 'file_hash_sha256', normalized: kSha },
    { why: 'removes a sha256: prefix with a warning', value: `sha256:${kSha}`, type: 'file_hash_sha256', normalized: kSha, warnings: [kShaPrefix] },
    { why: 'removes an uppercase SHA256: prefix and lowercases', value: `SHA256:${kSha.toUpperCase()}`, type: 'file_hash_sha256', normalized: kSha, warnings: [kShaPrefix] },
    { why: 'trims surrounding whitespace', value: `\t${kSha} `, type: 'file_hash_sha256', normalized: kSha }
  ])
  badCases([
    { why: 'names an MD5 by its length', value: kMd5, type: 'file_hash_sha256', error: 'invalid SHA-256 hash: 32 hex digits look like an MD5 hash' },
    { why: 'names a SHA-1 by its length', value: kSha1, type: 'file_hash_sha256', error: 'invalid SHA-256 hash: 40 hex digits look like a SHA-1 hash' },
    { why: 'names a SHA-384 by its length', value: kSha384, type: 'file_hash_sha256', error: 'invalid SHA-256 hash: 96 hex digits look like a SHA-384 hash' },
    { why: 'names a SHA-512 by its length', value: kSha512, type: 'file_hash_sha256', error: 'invalid SHA-256 hash: 128 hex digits look like a SHA-512 hash' },
    { why: 'names an MD5 behind a sha256: prefix', value: `sha256:${kMd5}`, type: 'file_hash_sha256', error: 'invalid SHA-256 hash: 32 hex digits look like an MD5 hash' },
    { why: 'rejects 63 hex digits', value: kSha.slice(1), type: 'file_hash_sha256', error: 'invalid SHA-256 hash: expected 64 hex digits' },
    { why: 'rejects 65 hex digits', value: `${kSha}0`, type: 'file_hash_sha256', error: 'invalid SHA-256 hash: expected 64 hex digits' },
    { why: 'rejects a non-hex digit', value: `g${kSha.slice(1)}`, type: 'file_hash_sha256', error: 'invalid SHA-256 hash: expected 64 hex digits' },
    { why: 'rejects a 0x prefix', value: `0x${kSha}`, type: 'file_hash_sha256', error: 'invalid SHA-256 hash: expected 64 hex digits' },
    { why: 'rejects other algorithm prefixes', value: `md5:${kSha}`, type: 'file_hash_sha256', error: 'invalid SHA-256 hash: expected 64 hex digits' },
    { why: 'rejects a 32-character non-hex value without naming MD5', value: 'z'.repeat(32), type: 'file_hash_sha256', error: 'invalid SHA-256 hash: expected 64 hex digits' }
  ])
})

describe('normalize: asn', () => {
  okCases([
    { why: 'keeps AS<n> as is', value: 'AS13335', type: 'asn', normalized: 'AS13335', asn: 13335 },
    { why: 'uppercases a lowercase prefix', value: 'as13335', type: 'asn', normalized: 'AS13335', asn: 13335 },
    { why: 'accepts a mixed-case prefix', value: 'As13335', type: 'asn', normalized: 'AS13335', asn: 13335 },
    { why: 'accepts an ASN prefix', value: 'ASN13335', type: 'asn', normalized: 'AS13335', asn: 13335 },
    { why: 'accepts a lowercase asn prefix', value: 'asn13335', type: 'asn', normalized: 'AS13335', asn: 13335 },
    { why: 'accepts one space after AS', value: 'AS 13335', type: 'asn', normalized: 'AS13335', asn: 13335 },
    { why: 'accepts one space after ASN', value: 'ASN 13335', type: 'asn', normalized: 'AS13335', asn: 13335 },
    { why: 'accepts a bare number', value: '13335', type: 'asn', normalized: 'AS13335', asn: 13335 },
    { why: 'accepts AS0', value: 'AS0', type: 'asn', normalized: 'AS0', asn: 0 },
    { why: 'accepts a bare zero', value: '0', type: 'asn', normalized: 'AS0', asn: 0 },
    { why: 'accepts the largest 32-bit ASN', value: 'AS4294967295', type: 'asn', normalized: 'AS4294967295', asn: 4294967295 },
    { why: 'accepts the largest 32-bit ASN without prefix', value: '4294967295', type: 'asn', normalized: 'AS4294967295', asn: 4294967295 },
    { why: 'converts asdot to asplain with a warning', value: 'AS1.10', type: 'asn', normalized: 'AS65546', warnings: [kAsdot], asn: 65546 },
    { why: 'converts bare asdot when the type is asn', value: '1.10', type: 'asn', normalized: 'AS65546', warnings: [kAsdot], asn: 65546 },
    { why: 'converts asdot+ with a zero high part', value: 'AS0.5', type: 'asn', normalized: 'AS5', warnings: [kAsdot], asn: 5 },
    { why: 'converts the largest asdot value', value: 'AS65535.65535', type: 'asn', normalized: 'AS4294967295', warnings: [kAsdot], asn: 4294967295 },
    { why: 'trims surrounding whitespace', value: ' AS15169 ', type: 'asn', normalized: 'AS15169', asn: 15169 }
  ])
  badCases([
    { why: 'rejects one past the 32-bit range', value: 'AS4294967296', type: 'asn', error: 'invalid ASN: out of range (max 4294967295)' },
    { why: 'rejects one past the range without prefix', value: '4294967296', type: 'asn', error: 'invalid ASN: out of range (max 4294967295)' },
    { why: 'rejects a huge number', value: '99999999999999999999999', type: 'asn', error: 'invalid ASN: out of range (max 4294967295)' },
    { why: 'rejects leading zeros', value: 'AS013335', type: 'asn', error: 'invalid ASN: leading zeros are ambiguous' },
    { why: 'rejects a double zero', value: '00', type: 'asn', error: 'invalid ASN: leading zeros are ambiguous' },
    { why: 'rejects leading zeros in asdot', value: 'AS01.1', type: 'asn', error: 'invalid ASN: leading zeros are ambiguous' },
    { why: 'rejects an asdot part over 65535', value: 'AS1.65536', type: 'asn', error: 'invalid ASN: asdot part out of range (max 65535)' },
    { why: 'rejects a prefix without a number', value: 'AS', type: 'asn', error: 'invalid ASN: expected AS<number>' },
    { why: 'rejects a negative number', value: 'AS-1', type: 'asn', error: 'invalid ASN: expected AS<number>' },
    { why: 'rejects a signed number', value: '+13335', type: 'asn', error: 'invalid ASN: expected AS<number>' },
    { why: 'rejects trailing letters', value: 'AS13335x', type: 'asn', error: 'invalid ASN: expected AS<number>' },
    { why: 'rejects exponent notation', value: 'AS1e3', type: 'asn', error: 'invalid ASN: expected AS<number>' },
    { why: 'rejects two spaces after AS', value: 'AS  13335', type: 'asn', error: 'invalid ASN: expected AS<number>' },
    { why: 'rejects an empty asdot low part', value: 'AS1.', type: 'asn', error: 'invalid ASN: expected AS<number>' },
    { why: 'rejects three dotted parts', value: 'AS1.2.3', type: 'asn', error: 'invalid ASN: expected AS<number>' },
    { why: 'rejects an IPv4 address', value: '1.2.3.4', type: 'asn', error: 'invalid ASN: expected AS<number>' }
  ])
})

describe('normalize: type inference', () => {
  okCases([
    { why: 'infers a dotted quad as ip', value: '1.2.3.4', normalized: '1.2.3.4', warnings: [kInferIp], ip: { version: 4, words: [k1234] } },
    { why: 'infers IPv6 as ip', value: '2001:DB8::1', normalized: '2001:db8::1', warnings: [kInferIp] },
    { why: 'infers a bracketed IPv6 as ip', value: '[2001:db8::1]', normalized: '2001:db8::1', warnings: [kInferIp] },
    { why: 'infers :: as ip', value: '::', normalized: '::', warnings: [kInferIp] },
    { why: 'infers IPv4-mapped IPv6 as ip and maps it', value: '::ffff:1.2.3.4', normalized: '1.2.3.4', warnings: [kInferIp, kMapped] },
    { why: 'infers a CIDR as ip_block', value: '1.2.3.0/24', normalized: '1.2.3.0/24', warnings: [kInferBlock], prefix: 24 },
    { why: 'infers an IPv6 CIDR as ip_block', value: '2001:db8::/32', normalized: '2001:db8::/32', warnings: [kInferBlock] },
    { why: 'infers a CIDR with host bits as ip_block', value: '1.2.3.4/24', normalized: '1.2.3.0/24', warnings: [kInferBlock, kHostBits] },
    { why: 'infers AS<n> as asn', value: 'AS13335', normalized: 'AS13335', warnings: [kInferAsn], asn: 13335 },
    { why: 'infers a bare integer as an ASN', value: '13335', normalized: 'AS13335', warnings: [kInferAsn], asn: 13335 },
    { why: 'infers an IPv4-sized integer as an ASN, not an address', value: '3232235777', normalized: 'AS3232235777', warnings: [kInferAsn], asn: 3232235777 },
    { why: 'infers AS with a space as asn', value: 'as 13335', normalized: 'AS13335', warnings: [kInferAsn] },
    { why: 'infers prefixed asdot as asn', value: 'AS1.10', normalized: 'AS65546', warnings: [kInferAsn, kAsdot] },
    { why: 'infers 64 hex digits as file_hash_sha256', value: kSha.toUpperCase(), normalized: kSha, warnings: [kInferHash] },
    { why: 'infers a sha256:-prefixed hash', value: `sha256:${kSha}`, normalized: kSha, warnings: [kInferHash, kShaPrefix] },
    { why: 'infers a name as domain', value: 'Example.com', normalized: 'example.com', warnings: [kInferDomain] },
    { why: 'infers an IDN as domain', value: 'bücher.de', normalized: 'xn--bcher-kva.de', warnings: [kInferDomain] },
    { why: 'infers a name starting with "as" and digits as domain', value: 'as13335.net', normalized: 'as13335.net', warnings: [kInferDomain] },
    { why: 'infers a hex-looking name as domain', value: 'deadbeef.com', normalized: 'deadbeef.com', warnings: [kInferDomain] },
    { why: 'infers a URL as domain with its host', value: 'http://evil.com/x', normalized: 'evil.com', warnings: [kInferDomain, kUrlHost] },
    { why: 'infers a URL with an IP host as ip', value: 'hxxp://1.2.3[.]4/x', normalized: '1.2.3.4', warnings: [kRefanged, kInferIp, kUrlHost] },
    { why: 'refangs before inferring', value: 'example[.]com', normalized: 'example.com', warnings: [kRefanged, kInferDomain] }
  ])
  badCases([
    { why: 'names an MD5 instead of guessing a type', value: kMd5, error: 'invalid SHA-256 hash: 32 hex digits look like an MD5 hash' },
    { why: 'names a SHA-1 instead of guessing a type', value: kSha1, error: 'invalid SHA-256 hash: 40 hex digits look like a SHA-1 hash' },
    { why: 'names a SHA-512 instead of guessing a type', value: kSha512, error: 'invalid SHA-256 hash: 128 hex digits look like a SHA-512 hash' },
    { why: 'names an all-digit MD5-length value as MD5, not an ASN', value: '1'.repeat(32), error: 'invalid SHA-256 hash: 32 hex digits look like an MD5 hash' },
    { why: 'cannot infer a single word', value: 'foo', error: 'cannot infer indicator type' },
    { why: 'cannot infer a short hex word', value: 'deadbeef', error: 'cannot infer indicator type' },
    { why: 'cannot infer a lone hyphen', value: '-', error: 'cannot infer indicator type' },
    { why: 'cannot infer a prefix with two spaces', value: 'AS  1', error: 'cannot infer indicator type' },
    { why: 'reports the IPv4 problem for a leading-zero address', value: '010.1.1.1', error: 'invalid IPv4 address: leading zeros are ambiguous' },
    { why: 'reports the IPv4 problem for shorthand', value: '1.2.3', error: 'invalid IPv4 address: expected four decimal octets' },
    { why: 'does not infer bare asdot', value: '1.10', error: 'invalid IPv4 address: expected four decimal octets' },
    { why: 'reports an out-of-range bare integer as an ASN problem', value: '4294967296', error: 'invalid ASN: out of range (max 4294967295)' },
    { why: 'reports a port on an address', value: '1.2.3.4:80', error: 'invalid IP address: ports are not accepted' },
    { why: 'reports a zone id', value: 'fe80::1%eth0', error: 'invalid IPv6 address: zone ids are not accepted' },
    { why: 'reports a bad prefix on a CIDR', value: '1.2.3.0/33', error: 'invalid IP block: prefix length out of range' },
    { why: 'reports an email address', value: 'user@example.com', error: 'invalid domain: looks like an email address' },
    { why: 'reports a wildcard', value: '*.example.com', error: 'invalid domain: wildcards are not accepted' },
    { why: 'reports a path without a scheme', value: 'example.com/path', error: 'invalid domain: invalid character \'/\'' },
    { why: 'reports a bad URL scheme', value: '://example.com', error: 'invalid URL: bad scheme' },
    { why: 'keeps the refang warning on failure', value: 'foo[.]', error: 'invalid domain: needs at least two labels', warnings: [kRefanged] }
  ])

  it('treats a null type as omitted', () => {
    const r = normalize('example.net', null)
    assert.ok(r.ok)
    assert.equal(r.indicator.type, 'domain')
    assert.deepEqual(r.indicator.warnings, [kInferDomain])
  })

  it('inferType returns the type normalize would infer, or null', () => {
    assert.equal(inferType('1.2.3.4'), 'ip')
    assert.equal(inferType('10.0.0.0/8'), 'ip_block')
    assert.equal(inferType('AS13335'), 'asn')
    assert.equal(inferType(kSha), 'file_hash_sha256')
    assert.equal(inferType('example.com'), 'domain')
    assert.equal(inferType(kMd5), null)
    assert.equal(inferType('foo'), null)
  })
})

describe('normalize: non-string, empty, long and odd input', () => {
  badCases([
    { why: 'rejects a number', value: 13335, error: 'value must be a string' },
    { why: 'rejects a number and keeps the given type', value: 13335, type: 'asn', error: 'value must be a string' },
    { why: 'rejects null', value: null, error: 'value must be a string' },
    { why: 'rejects undefined', value: undefined, type: 'ip', error: 'value must be a string' },
    { why: 'rejects an object', value: { value: '1.2.3.4' }, error: 'value must be a string' },
    { why: 'rejects an array', value: ['1.2.3.4'], type: 'ip', error: 'value must be a string' },
    { why: 'rejects a boolean', value: true, error: 'value must be a string' },
    { why: 'rejects a bigint', value: 13335n, type: 'asn', error: 'value must be a string' },
    { why: 'rejects the empty string', value: '', error: 'value is empty' },
    { why: 'rejects whitespace only', value: ' \t\r\n ', type: 'domain', error: 'value is empty' },
    { why: 'rejects an unknown type', value: '1.2.3.4', type: 'url', error: 'unknown indicator type: must be one of ip, domain, ip_block, file_hash_sha256, asn' },
    { why: 'rejects a type in the wrong case', value: '1.2.3.4', type: 'IP', error: 'unknown indicator type: must be one of ip, domain, ip_block, file_hash_sha256, asn' },
    { why: 'rejects an empty type', value: '1.2.3.4', type: '', error: 'unknown indicator type: must be one of ip, domain, ip_block, file_hash_sha256, asn' },
    { why: 'rejects a non-string type', value: '1.2.3.4', type: 4, error: 'type must be a string' },
    { why: 'rejects a 100 KB value quickly', value: 'a'.repeat(100_000), error: 'value is too long (max 8192 characters)' },
    { why: 'rejects a 100 KB digit string quickly', value: '1'.repeat(100_000), type: 'asn', error: 'value is too long (max 8192 characters)' },
    { why: 'rejects a 100 KB defanged string quickly', value: '[.]'.repeat(34_000), type: 'domain', error: 'value is too long (max 8192 characters)' },
    { why: 'judges an 8192-character value on its content', value: 'a'.repeat(8192), type: 'domain', error: 'invalid domain: longer than 253 characters' },
    { why: 'says a URL is no block', value: 'http://1.2.3.0/24', type: 'ip_block', error: 'invalid ip_block: a URL is not a CIDR block (send the block itself, as 192.0.2.0/24)' },
    { why: 'bounds IDN work on a long non-ASCII value', value: 'ü'.repeat(5000), type: 'domain', error: 'invalid domain: longer than 253 characters' }
  ])

  it('never throws on hostile values and types', () => {
    const values: unknown[] = [Symbol('x'), () => 1, Object.create(null), Object('1.2.3.4'), NaN, -0, '\u0000', '\ud800', '[', '::%', 'hxxp', 'hxxps:', '[://]', '/', '//', ':', '.', '..', '@', 'AS.', 'sha256:', '[]']
    const types: unknown[] = [undefined, null, 'ip', 'domain', 'ip_block', 'file_hash_sha256', 'asn', Symbol('t'), {}, 'toString', '__proto__']
    for (const v of values) {
      for (const t of types) {
        const r = normalize(v, t)
        assert.equal(typeof r.ok, 'boolean')
      }
    }
  })

  it('does not share warnings arrays between calls', () => {
    const a = normalize('1.2.3[.]4')
    const b = normalize('1.2.3.4')
    assert.ok(a.ok && b.ok)
    assert.notEqual(a.indicator.warnings, b.indicator.warnings)
    assert.deepEqual(b.indicator.warnings, [kInferIp])
  })
})

describe('normalize: exported helpers', () => {
  it('parseIPv4 returns the unsigned value of a strict dotted quad', () => {
    assert.equal(parseIPv4('1.2.3.4'), k1234)
    assert.equal(parseIPv4('255.255.255.255'), 4294967295)
    assert.equal(parseIPv4('0.0.0.0'), 0)
  })

  it('parseIPv4 returns null for every non-strict form', () => {
    for (const s of ['010.1.1.1', '0x7f.0.0.1', '1.2.3', '3232235777', '256.0.0.1', ' 1.2.3.4', '1.2.3.4 ', '1.2.3.4.', '', '1.2.3.-4']) {
      assert.equal(parseIPv4(s), null, s)
    }
  })

  it('parseIp returns IPv6 words and maps IPv4-mapped addresses to IPv4', () => {
    assert.deepEqual(parseIp('2001:db8::1'), { version: 6, words: [k2001db8, 0, 0, 1] })
    assert.deepEqual(parseIp('::ffff:1.2.3.4'), { version: 4, words: [k1234] })
    assert.deepEqual(parseIp('1.2.3.4'), { version: 4, words: [k1234] })
  })

  it('parseIp returns null for zone ids, brackets and junk', () => {
    for (const s of ['fe80::1%eth0', '[::1]', 'example.com', '1.2.3.0/24', '']) assert.equal(parseIp(s), null, s)
  })

  it('formatIp prints the canonical text of parsed addresses', () => {
    assert.equal(formatIp({ version: 4, words: [3232235777] }), '192.168.1.1')
    assert.equal(formatIp({ version: 6, words: [k2001db8, 0, 0, 1] }), '2001:db8::1')
    assert.equal(formatIp({ version: 6, words: [0, 0, 0xffff, k1234] }), '::ffff:102:304')
  })

  it('formatIp round-trips with parseIp', () => {
    for (const s of ['1.2.3.4', '2001:db8::1:0:0:1', '::', '::1', '1::', 'fe80::1:2', '2001:db8:0:1:1:1:1:1']) {
      const p = parseIp(s)
      assert.ok(p !== null, s)
      assert.equal(formatIp(p), s)
    }
  })

  it('parseIpBlock returns the network address with host bits cleared', () => {
    assert.deepEqual(parseIpBlock('1.2.3.4/24'), { ip: { version: 4, words: [0x01020300] }, prefix: 24 })
    assert.equal(parseIpBlock('1.2.3.4'), null)
  })

  it('refang returns the very same string when nothing is defanged', () => {
    const s = 'example.com'
    assert.equal(refang(s), s)
    assert.equal(refang('xhxxp://a.b'), 'xhxxp://a.b')
    assert.equal(refang('[2001:db8::1]'), '[2001:db8::1]')
  })

  it('refang leaves spaced dots alone', () => {
    assert.equal(refang('example . com'), 'example . com')
  })
})
