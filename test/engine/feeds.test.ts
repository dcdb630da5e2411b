import assert from 'node:assert/strict'
import { mkdtemp, mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, isAbsolute, join } from 'node:path'
import { describe, test, type TestContext } from 'node:test'
import { fileURLToPath } from 'node:url'
import { kFeedParsers, parseFeed } from '../../src/intel/feeds/index.ts'
import { parseStixPattern } from '../../src/intel/feeds/stix-pattern.ts'
import { loadManifest, readFeed } from '../../src/intel/manifest.ts'
import { FEED_FORMATS, type FeedEntry, type FeedFormat, type FeedParseResult } from '../../src/engine/types.ts'

const kRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const kSamples = join(kRoot, 'data', 'feeds')
const kFixtures = join(kRoot, 'test', 'fixtures', 'feeds')
const kEicar = '275a021bbfb6489e54d471899f7db9d1663fc695ec2fe2a2c4538aabf651fd0f'

async function parseFile (format: FeedFormat, dir: string, file: string): Promise<FeedParseResult> {
  return parseFeed(format, await readFile(join(dir, file), 'utf8'))
}

/** The single entry with this value (fails when there is none or several). */
function entry (result: FeedParseResult, value: string): FeedEntry {
  const found = result.entries.filter((e) => e.value === value)
  assert.equal(found.length, 1, `expected one entry ${value}, found ${found.length}`)
  return found[0] as FeedEntry
}

function values (result: FeedParseResult): string[] {
  return result.entries.map((e) => e.value)
}

describe('shipped sample feeds', () => {
  test('the plain allowlist reads every indicator with its type left to inference and inline comments cut', async () => {
    const r = await parseFile('plain', kSamples, 'allowlist.txt')
    assert.equal(r.entries.length, 19)
    assert.equal(r.rejected.length, 0)
    assert.equal(r.lines, 30)
    assert.deepEqual(entry(r, '1.1.1.1'), { type: null, value: '1.1.1.1', line: 6 })
    assert.deepEqual(entry(r, '1.1.1.0/24'), { type: null, value: '1.1.1.0/24', line: 15 })
    assert.deepEqual(entry(r, 'AS112'), { type: null, value: 'AS112', line: 27 })
    assert.equal(entry(r, 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855').line, 30)
  })

  test('the FireHOL netset gives addresses as ip and CIDRs as ip_block', async () => {
    const r = await parseFile('netset', kSamples, 'firehol-sample.netset')
    assert.equal(r.entries.length, 5)
    assert.equal(r.rejected.length, 0)
    assert.deepEqual(entry(r, '198.51.100.23'), { type: 'ip', value: '198.51.100.23', line: 13 })
    assert.deepEqual(entry(r, '198.51.100.64/26'), { type: 'ip_block', value: '198.51.100.64/26', line: 14 })
    assert.deepEqual(entry(r, '2001:db8:1::/48'), { type: 'ip_block', value: '2001:db8:1::/48', line: 17 })
  })

  test('the Spamhaus DROP text sample gives blocks labelled with their SBL id', async () => {
    const r = await parseFile('spamhaus_drop', kSamples, 'spamhaus-drop-sample.txt')
    assert.equal(r.entries.length, 4)
    assert.equal(r.rejected.length, 0)
    assert.deepEqual(entry(r, '203.0.113.0/24'), { type: 'ip_block', value: '203.0.113.0/24', line: 5, label: 'SBLX0001' })
    assert.deepEqual(entry(r, '2001:db8:bad::/48'), { type: 'ip_block', value: '2001:db8:bad::/48', line: 8, label: 'SBLX0004' })
  })

  test('the Spamhaus ASN-DROP JSON-lines sample gives AS numbers and skips the metadata line', async () => {
    const r = await parseFile('spamhaus_asndrop', kSamples, 'spamhaus-asndrop-sample.json')
    assert.equal(r.entries.length, 3)
    assert.equal(r.rejected.length, 0)
    assert.equal(r.lines, 4)
    assert.deepEqual(entry(r, 'AS64511'), { type: 'asn', value: 'AS64511', line: 1 })
    assert.deepEqual(entry(r, 'AS65550'), { type: 'asn', value: 'AS65550', line: 3 })
  })

  test('the SSLBL sample gives C2 addresses dated by Firstseen, with no label', async () => {
    const r = await parseFile('sslbl_csv', kSamples, 'sslbl-ipblacklist-sample.csv')
    assert.equal(r.entries.length, 3)
    assert.equal(r.rejected.length, 0)
    assert.equal(r.lines, 10)
    assert.deepEqual(entry(r, '192.0.2.50'), { type: 'ip', value: '192.0.2.50', line: 8, firstSeen: Date.UTC(2025, 9, 24, 6, 41, 19) })
    assert.deepEqual(values(r), ['192.0.2.50', '198.51.100.40', '192.0.2.51'])
  })

  test('the Feodo sample gives C2 addresses with malware label and first/last seen dates in UTC', async () => {
    const r = await parseFile('feodo_csv', kSamples, 'feodo-ipblocklist-sample.csv')
    assert.equal(r.entries.length, 4)
    assert.equal(r.rejected.length, 0)
    assert.deepEqual(entry(r, '198.51.100.23'), {
      type: 'ip',
      value: '198.51.100.23',
      line: 8,
      firstSeen: Date.UTC(2025, 8, 14, 8, 12, 44),
      lastSeen: Date.UTC(2025, 9, 24),
      label: 'Emotet'
    })
    // last_online is empty: lastSeen falls back to first_seen_utc.
    assert.equal(entry(r, '198.51.100.201').lastSeen, Date.UTC(2025, 9, 19, 22, 31, 17))
  })

  test('the ThreatFox sample maps each ioc_type and rejects MD5 and SHA-1 rows', async () => {
    const r = await parseFile('threatfox_csv', kSamples, 'threatfox-sample.csv')
    assert.equal(r.entries.length, 5)
    assert.deepEqual(r.rejected, [
      { line: 12, reason: 'unsupported hash type' },
      { line: 13, reason: 'unsupported hash type' }
    ])
    assert.deepEqual(entry(r, '198.51.100.23'), {
      type: 'ip',
      value: '198.51.100.23',
      line: 8,
      firstSeen: Date.UTC(2025, 9, 20, 10, 15, 0),
      lastSeen: Date.UTC(2025, 9, 24, 6, 0, 0),
      label: 'Emotet'
    })
    assert.deepEqual(entry(r, 'malware-c2.example'), {
      type: 'domain',
      value: 'malware-c2.example',
      line: 9,
      firstSeen: Date.UTC(2025, 9, 21, 14, 2, 11),
      lastSeen: Date.UTC(2025, 9, 21, 14, 2, 11),
      label: 'Cobalt Strike'
    })
    assert.equal(entry(r, 'payload-drop.test').type, 'domain')
    assert.equal(entry(r, '29492effae46d6d4977c7d3e21b40985673b4243e39c5c2622357ffea4593b82').type, 'file_hash_sha256')
    assert.equal(entry(r, '2001:db8::5').type, 'ip')
  })

  test('the URLhaus sample gives URL hosts without port, userinfo or brackets', async () => {
    const r = await parseFile('urlhaus_csv', kSamples, 'urlhaus-sample.csv')
    assert.equal(r.entries.length, 4)
    assert.equal(r.rejected.length, 0)
    assert.deepEqual(values(r), ['203.0.113.45', 'dropper.example', '2001:db8::bad:1', 'cdn-files.test'])
    assert.deepEqual(entry(r, '203.0.113.45'), {
      type: 'ip',
      value: '203.0.113.45',
      line: 8,
      firstSeen: Date.UTC(2025, 9, 24, 21, 10, 5),
      lastSeen: Date.UTC(2025, 9, 24, 23, 0, 0),
      label: 'malware_download'
    })
    assert.equal(entry(r, 'cdn-files.test').lastSeen, Date.UTC(2025, 9, 24, 22, 45, 0))
  })

  test('the MalwareBazaar sample gives SHA-256 hashes labelled by signature, n/a meaning no label', async () => {
    const r = await parseFile('malwarebazaar_csv', kSamples, 'malwarebazaar-sample.csv')
    assert.equal(r.entries.length, 4)
    assert.equal(r.rejected.length, 0)
    assert.deepEqual(entry(r, kEicar), {
      type: 'file_hash_sha256',
      value: kEicar,
      line: 8,
      firstSeen: Date.UTC(2025, 9, 20, 12, 0, 0),
      lastSeen: Date.UTC(2025, 9, 20, 12, 0, 0),
      label: 'EICAR'
    })
    assert.equal('label' in entry(r, '7d8fb7b752ae8946c2334a5687b1590bd8c1ad94c3aaf62b507ba9631b20b64f'), false)
  })

  test('the hosts sample gives every listed name and skips localhost-style names', async () => {
    const r = await parseFile('hosts', kSamples, 'urlhaus-filter-hosts.txt')
    assert.equal(r.entries.length, 43)
    assert.equal(r.rejected.length, 0)
    assert.equal(r.lines, 48)
    assert.deepEqual(entry(r, 'cdn-10049480.file.myqcloud.com'), { type: 'domain', value: 'cdn-10049480.file.myqcloud.com', line: 8 })
    assert.deepEqual(r.entries.filter((e) => e.line === 48).map((e) => e.value), ['ct3-24.ru', 'cutting-edge.in', 'd.14yaa.com'])
    for (const name of ['localhost', 'ip6-localhost', 'ip6-loopback', 'broadcasthost', '0.0.0.0']) {
      assert.equal(values(r).includes(name), false, name)
    }
  })

  test('the real URLhaus filter subset gives bare hosts and the whole-host rule, and skips rules with paths', async () => {
    const r = await parseFile('adblock', kSamples, 'urlhaus-filter-online-subset.txt')
    assert.equal(r.entries.length, 301)
    assert.equal(r.rejected.length, 0)
    assert.equal(r.lines, 357)
    assert.deepEqual(r.entries[0], { type: 'ip', value: '1.1.104.12', line: 7 })
    assert.deepEqual(entry(r, '111101111.ru'), { type: 'domain', value: '111101111.ru', line: 197 })
    assert.deepEqual(entry(r, 'wegrowcoaching.com'), { type: 'domain', value: 'wegrowcoaching.com', line: 357 })
    assert.equal(r.entries.some((e) => e.line > 306 && e.line < 357), false, 'rules with paths give no entry')
    assert.equal(values(r).includes('2024.sci-hub.se'), false)
  })

  test('the MISP sample reads supported attributes of the event and its objects with galaxy labels', async () => {
    const r = await parseFile('misp_json', kSamples, 'misp-event-sample.json')
    assert.equal(r.entries.length, 10)
    assert.equal(r.rejected.length, 0)
    assert.equal(r.lines, 12)
    assert.deepEqual(entry(r, 'malware-c2.example'), {
      type: 'domain', value: 'malware-c2.example', line: 1, lastSeen: 1761140000000, label: 'Cobalt Strike'
    })
    assert.deepEqual(entry(r, '198.51.100.99'), {
      type: 'ip', value: '198.51.100.99', line: 3, lastSeen: 1761150000000, label: 'Cobalt Strike'
    })
    assert.deepEqual(entry(r, '6eb0d8eb7dc407a4196f021483ed1bc37ed4b9f109b85bc65aa346d36b718696'), {
      type: 'file_hash_sha256',
      value: '6eb0d8eb7dc407a4196f021483ed1bc37ed4b9f109b85bc65aa346d36b718696',
      line: 6,
      firstSeen: Date.UTC(2025, 9, 18, 9, 0, 0),
      lastSeen: Date.UTC(2025, 9, 21, 17, 30, 0),
      label: 'Agent Tesla'
    })
    assert.deepEqual(r.entries.filter((e) => e.line === 7).map((e) => [e.type, e.value]), [
      ['domain', 'beacon.c2-infra.test'], ['ip', '192.0.2.201']
    ])
    assert.equal(entry(r, 'AS64505').type, 'asn')
    assert.equal(entry(r, 'b1e74d47fb31470300a6676d408c7b975bd9ade6adfb1b7ec66a1dfe097744e1').line, 11)
    // url type (item 4) and to_ids:false (item 5, 12) are skipped, not rejected.
    assert.equal(values(r).includes('192.0.2.1'), false)
    assert.equal(r.entries.some((e) => e.line === 4 || e.line === 5 || e.line === 12), false)
  })

  test('the STIX sample reads OR-joined indicators, skips revoked ones and rejects AND patterns', async () => {
    const r = await parseFile('stix2', kSamples, 'stix2-bundle-sample.json')
    assert.equal(r.entries.length, 8)
    assert.deepEqual(r.rejected, [{ line: 6, reason: 'unsupported pattern: AND' }])
    assert.equal(r.lines, 11)
    assert.deepEqual(entry(r, kEicar), {
      type: 'file_hash_sha256',
      value: kEicar,
      line: 2,
      firstSeen: Date.UTC(2025, 9, 20, 8, 0, 0),
      lastSeen: Date.UTC(2025, 9, 20, 8, 0, 0),
      label: 'EICAR'
    })
    assert.deepEqual(r.entries.filter((e) => e.line === 3).map((e) => [e.type, e.value, e.label, e.lastSeen]), [
      ['ip', '192.0.2.77', 'malicious-activity', Date.UTC(2025, 9, 23, 10, 30, 0)],
      ['ip', '192.0.2.78', 'malicious-activity', Date.UTC(2025, 9, 23, 10, 30, 0)]
    ])
    assert.equal(entry(r, 'account-verify.test').type, 'domain')
    assert.deepEqual(entry(r, 'AS64502'), {
      type: 'asn', value: 'AS64502', line: 5, firstSeen: Date.UTC(2025, 9, 22, 12), lastSeen: Date.UTC(2025, 9, 22, 12), label: 'Bulletproof hosting network'
    })
    assert.equal(entry(r, '2001:db8:feed::/48').type, 'ip_block')
    assert.equal(values(r).includes('192.0.2.66'), false, 'revoked indicator')
    // valid_until (2025-10-01) is before modified (2025-10-24): the indicator ages from its expiry.
    assert.equal(entry(r, 'old-c2.example').lastSeen, Date.UTC(2025, 9, 1))
  })

  test('the known cross-feed entries listed in README.md are where it says', async () => {
    const feodo = await parseFile('feodo_csv', kSamples, 'feodo-ipblocklist-sample.csv')
    const threatfox = await parseFile('threatfox_csv', kSamples, 'threatfox-sample.csv')
    const netset = await parseFile('netset', kSamples, 'firehol-sample.netset')
    const misp = await parseFile('misp_json', kSamples, 'misp-event-sample.json')
    const bazaar = await parseFile('malwarebazaar_csv', kSamples, 'malwarebazaar-sample.csv')
    const stix = await parseFile('stix2', kSamples, 'stix2-bundle-sample.json')
    const drop = await parseFile('spamhaus_drop', kSamples, 'spamhaus-drop-sample.txt')
    const asndrop = await parseFile('spamhaus_asndrop', kSamples, 'spamhaus-asndrop-sample.json')
    for (const r of [feodo, threatfox, netset]) entry(r, '198.51.100.23')
    for (const r of [threatfox, misp]) entry(r, 'malware-c2.example')
    for (const r of [bazaar, stix]) assert.equal(entry(r, kEicar).label, 'EICAR')
    entry(drop, '203.0.113.0/24')
    entry(asndrop, 'AS64511')
  })
})

describe('malformed lines', () => {
  test('plain: a line with characters no indicator holds is rejected and the rest is read', () => {
    const r = parseFeed('plain', '# list\n192.0.2.1\n*.evil.example\n\n"quoted.example"\nevil.example ; note\n')
    assert.deepEqual(values(r), ['192.0.2.1', 'evil.example'])
    assert.deepEqual(r.rejected.map((x) => x.line), [3, 5])
    assert.match(r.rejected[0]?.reason ?? '', /unexpected character "\*"/)
    assert.equal(r.lines, 6)
  })

  test('netset: a host name or a prefix out of range is rejected with its line number', () => {
    const r = parseFeed('netset', '# header\n192.0.2.0/24\nevil.example\n192.0.2.1/33\n2001:db8::/129\n198.51.100.7\n')
    assert.deepEqual(values(r), ['192.0.2.0/24', '198.51.100.7'])
    assert.deepEqual(r.rejected.map((x) => x.line), [3, 4, 5])
  })

  test('spamhaus_drop: bad text lines and bad JSON lines are rejected, good lines still read', async () => {
    const text = parseFeed('spamhaus_drop', '; header\n192.0.2.0/24 ; SBL1\nnot-a-cidr ; SBL2\n198.51.100.0/24\n')
    assert.deepEqual(text.entries, [
      { type: 'ip_block', value: '192.0.2.0/24', line: 2, label: 'SBL1' },
      { type: 'ip_block', value: '198.51.100.0/24', line: 4 }
    ])
    assert.deepEqual(text.rejected.map((x) => x.line), [3])
    const json = await parseFile('spamhaus_drop', kFixtures, 'spamhaus-drop-v4.jsonl')
    assert.deepEqual(json.entries, [
      { type: 'ip_block', value: '192.0.2.0/24', line: 1, label: 'SBLX0101' },
      { type: 'ip_block', value: '198.51.100.0/24', line: 2, label: 'SBLX0102' }
    ])
    assert.deepEqual(json.rejected, [
      { line: 3, reason: 'not a CIDR block: "not-a-cidr"' },
      { line: 4, reason: 'JSON line has no "cidr" string' },
      { line: 5, reason: 'invalid JSON line' }
    ])
    assert.equal(json.lines, 6)
  })

  test('spamhaus_asndrop: the text form reads AS numbers and rejects non-numbers and values beyond 32 bits', async () => {
    const r = await parseFile('spamhaus_asndrop', kFixtures, 'spamhaus-asndrop.txt')
    assert.deepEqual(r.entries, [
      { type: 'asn', value: 'AS64511', line: 3 },
      { type: 'asn', value: 'AS64496', line: 4 },
      { type: 'asn', value: 'AS65551', line: 5 }
    ])
    assert.deepEqual(r.rejected.map((x) => x.line), [6, 7])
  })

  test('feodo_csv: a short row, an unbalanced quote, a bad address and a bad date are rejected by line', () => {
    const r = parseFeed('feodo_csv', [
      '# banner',
      '"first_seen_utc","dst_ip","dst_port","c2_status","last_online","malware"',
      '"2025-10-01 00:00:00","192.0.2.1","443","online","2025-10-02","Emotet"',
      '"2025-10-01 00:00:00","192.0.2.2"',
      '"2025-10-01 00:00:00","192.0.2.3,"443","online","2025-10-02","Emotet"',
      '"2025-10-01 00:00:00","evil.example","443","online","2025-10-02","Emotet"',
      '"yesterday","192.0.2.5","443","online","2025-10-02","Emotet"',
      '"2025-10-01 00:00:00","192.0.2.6","443","online","2025-02-30","Emotet"',
      '"2025-10-01 00:00:00","192.0.2.7","443","online","2025-10-02",""'
    ].join('\n'))
    assert.deepEqual(values(r), ['192.0.2.1', '192.0.2.7'])
    assert.equal('label' in entry(r, '192.0.2.7'), false)
    assert.deepEqual(r.rejected, [
      { line: 4, reason: 'expected at least 6 fields, got 2' },
      { line: 5, reason: 'malformed CSV: unbalanced quotes' },
      { line: 6, reason: 'dst_ip is not an IP address: "evil.example"' },
      { line: 7, reason: 'invalid first_seen_utc date' },
      { line: 8, reason: 'invalid last_online date' }
    ])
  })

  test('sslbl_csv: a bad address, a bad date and a short row are rejected by line; an uncommented header is read too', () => {
    const r = parseFeed('sslbl_csv', [
      '# abuse.ch SSLBL Botnet C2 IP Blacklist (CSV)',
      'Firstseen,DstIP,DstPort',
      '2025-10-01 00:00:00,192.0.2.1,443',
      '2025-10-01 00:00:00,c2.example,443',
      'yesterday,192.0.2.3,443',
      '2025-10-01 00:00:00',
      ',2001:db8::5,443'
    ].join('\n'))
    assert.deepEqual(r.entries, [
      { type: 'ip', value: '192.0.2.1', line: 3, firstSeen: Date.UTC(2025, 9, 1) },
      { type: 'ip', value: '2001:db8::5', line: 7 }
    ])
    assert.deepEqual(r.rejected, [
      { line: 4, reason: 'DstIP is not an IP address: "c2.example"' },
      { line: 5, reason: 'invalid Firstseen date' },
      { line: 6, reason: 'expected at least 2 fields, got 1' }
    ])
  })

  test('threatfox_csv: unknown types, bad ip:port and hostless URLs are rejected, good rows still read', () => {
    const row = (id: number, value: string, type: string): string =>
      `"2025-10-20 10:15:00", "${id}", "${value}", "${type}", "botnet_cc", "win.x", "None", "X", "", "75", "None", "", "0", "r"`
    const r = parseFeed('threatfox_csv', [
      row(1, '192.0.2.1:443', 'ip:port'),
      row(2, 'evil.example:443', 'ip:port'),
      row(3, 'http:///path', 'url'),
      row(4, 'someone@evil.example', 'envelope_from'),
      row(5, 'https://[2001:db8::7]:8443/x', 'url'),
      row(6, '', 'domain')
    ].join('\n'))
    assert.deepEqual(r.entries.map((e) => [e.type, e.value, e.line]), [['ip', '192.0.2.1', 1], ['ip', '2001:db8::7', 5]])
    assert.deepEqual(r.rejected.map((x) => x.line), [2, 3, 4, 6])
  })

  test('threatfox_csv: columns are found by header name, so an added column does not shift the others', async () => {
    const r = await parseFile('threatfox_csv', kFixtures, 'threatfox-is-compromised.csv')
    assert.equal(r.rejected.length, 0)
    assert.deepEqual(r.entries[0], {
      type: 'ip',
      value: '192.0.2.10',
      line: 7,
      firstSeen: Date.UTC(2025, 9, 20, 10, 15, 0),
      lastSeen: Date.UTC(2025, 9, 21, 11, 0, 0),
      label: 'InventedBot'
    })
    assert.equal(entry(r, 'invented-c2.example').lastSeen, Date.UTC(2025, 9, 20, 10, 16, 0))
  })

  test('urlhaus_csv: a row without a host or with a bad date is rejected, an unquoted header is skipped', () => {
    const r = parseFeed('urlhaus_csv', [
      'id,dateadded,url,url_status,last_online,threat,tags,urlhaus_link,reporter',
      '1,2025-10-24 21:10:05,http://192.0.2.8/a,online,,malware_download,,,r',
      '2,2025-10-24 21:10:05,http://:80/a,online,,malware_download,,,r',
      '3,2025-10-24T21:10:05Z,https://evil.example\\@good.example/,online,,malware_download,,,r',
      '4,someday,http://192.0.2.9/a,online,,malware_download,,,r'
    ].join('\r\n'))
    assert.deepEqual(r.entries.map((e) => [e.value, e.line]), [['192.0.2.8', 2], ['evil.example', 4]])
    assert.deepEqual(r.rejected.map((x) => x.line), [3, 5])
  })

  test('malwarebazaar_csv: a value that is not 64 hex digits is rejected', () => {
    const r = parseFeed('malwarebazaar_csv', [
      `"2025-10-20 12:00:00", "${kEicar}", "m", "s", "r", "f", "t", "m", "EICAR", "n/a", "n/a", "n/a", "n/a", "n/a"`,
      '"2025-10-20 12:00:00", "44d88612fea8a8f36de82e1278abb02f", "m", "s", "r", "f", "t", "m", "EICAR", "n/a", "n/a", "n/a", "n/a", "n/a"'
    ].join('\n'))
    assert.deepEqual(values(r), [kEicar])
    assert.deepEqual(r.rejected.map((x) => x.line), [2])
  })

  test('hosts: a line without an address or without a name is rejected, inline comments are cut', () => {
    const r = parseFeed('hosts', '# hosts\nevil.example\n0.0.0.0\n0.0.0.0 a.example b.example # trailing\n::1 ip6-allnodes\n')
    assert.deepEqual(r.entries, [
      { type: 'domain', value: 'a.example', line: 4 },
      { type: 'domain', value: 'b.example', line: 4 }
    ])
    assert.deepEqual(r.rejected.map((x) => x.line), [2, 3])
  })

  test('adblock: broken || rules are rejected while narrower, cosmetic and exception rules are skipped', () => {
    const r = parseFeed('adblock', [
      '[Adblock Plus 2.0]',
      '! comment',
      '||evil.example^',
      '||bad host.example^',
      '||^',
      '@@||good.example^',
      'example.com##.ad',
      '||cdn.example/file.exe^$all',
      '||tracker.example^$third-party',
      '||sub.example^$important,all',
      '||192.0.2.33^',
      '||[2001:db8::33]^',
      '|http://anchored.example/',
      '/regex[0-9]+/',
      'adserver',
      'bare.example',
      '||*.wild.example^',
      '||evil<script>.example^'
    ].join('\n'))
    assert.deepEqual(r.entries.map((e) => [e.type, e.value, e.line]), [
      ['domain', 'evil.example', 3],
      ['domain', 'sub.example', 10],
      ['ip', '192.0.2.33', 11],
      ['ip', '2001:db8::33', 12],
      ['domain', 'bare.example', 16]
    ])
    assert.deepEqual(r.rejected.map((x) => x.line), [4, 5, 18])
    assert.equal(r.lines, 18)
  })

  test('CRLF line endings and a UTF-8 BOM do not leak into values or shift line numbers', () => {
    const r = parseFeed('netset', '\ufeff192.0.2.1\r\n# c\r\n192.0.2.2\r\n')
    assert.deepEqual(r.entries, [{ type: 'ip', value: '192.0.2.1', line: 1 }, { type: 'ip', value: '192.0.2.2', line: 3 }])
    assert.equal(r.lines, 3)
  })
})

describe('JSON formats', () => {
  for (const format of ['misp_json', 'stix2'] as const) {
    test(`${format}: text that is not JSON gives one rejected entry at line 1 and no entries`, () => {
      for (const garbage of ['', 'not json', '{"Event": ', '\u0000\u0001binary']) {
        const r = parseFeed(format, garbage)
        assert.equal(r.entries.length, 0)
        assert.equal(r.rejected.length, 1)
        assert.equal(r.rejected[0]?.line, 1)
        assert.match(r.rejected[0]?.reason ?? '', /not valid JSON/)
      }
    })

    test(`${format}: JSON of the wrong shape gives one rejected entry at line 1`, () => {
      for (const wrong of ['42', 'null', '"text"', '{"feeds": []}', '{"type": "bundle"}']) {
        const r = parseFeed(format, wrong)
        assert.equal(r.entries.length, 0, wrong)
        assert.deepEqual(r.rejected.map((x) => x.line), [1], wrong)
      }
    })
  }

  test('misp_json: an array of wrapped and bare events is read, and a non-event element is rejected', async () => {
    const r = await parseFile('misp_json', kFixtures, 'misp-events-array.json')
    assert.deepEqual(r.entries, [
      { type: 'ip_block', value: '192.0.2.0/28', line: 1, lastSeen: 1761000000000, label: 'emotet' },
      { type: 'domain', value: 'bare-event.example', line: 3, lastSeen: 1761000100000, label: 'Second synthetic event, bare (no Event wrapper)' }
    ])
    assert.deepEqual(r.rejected, [{ line: 5, reason: 'array element is not a MISP event' }])
    assert.equal(r.lines, 5)
  })

  test('misp_json: broken attributes are rejected by item number and the rest still read', () => {
    const r = parseFeed('misp_json', JSON.stringify({
      Event: {
        info: 'x',
        Attribute: [
          'not an object',
          { type: 'ip-dst', value: 'evil.example', timestamp: '1' },
          { type: 'ip-dst|port', value: '192.0.2.1', timestamp: '1' },
          { type: 'domain', timestamp: '1' },
          { type: 'domain', value: 'ok.example', timestamp: 'yesterday' },
          { type: 'domain', value: 'ok.example', timestamp: '1761000000' }
        ],
        Object: [{ name: 'no attributes', Attribute: 'nope' }]
      }
    }))
    assert.deepEqual(r.entries, [{ type: 'domain', value: 'ok.example', line: 6, lastSeen: 1761000000000, label: 'x' }])
    assert.deepEqual(r.rejected.map((x) => x.line), [1, 2, 3, 4, 5, 7])
  })

  test('stix2: a bare array of objects is read like a bundle; non-object items are rejected', () => {
    const r = parseFeed('stix2', JSON.stringify([
      7,
      { type: 'indicator', pattern_type: 'stix', pattern: "[domain-name:value = 'a.example']", name: 'A' },
      { type: 'indicator', pattern_type: 'stix' },
      { type: 'indicator', pattern_type: 'stix', pattern: "[email-addr:value = 'x@y.example']" },
      { type: 'indicator', pattern_type: 'stix', pattern: "[domain-name:value = 'b.example']", modified: 'soon' }
    ]))
    assert.deepEqual(r.entries, [{ type: 'domain', value: 'a.example', line: 2, label: 'A' }])
    assert.deepEqual(r.rejected, [
      { line: 1, reason: 'object is not a JSON object' },
      { line: 3, reason: 'indicator has no "pattern" string' },
      { line: 4, reason: 'unsupported pattern: no supported observable' },
      { line: 5, reason: 'invalid modified timestamp' }
    ])
  })

  test('stix pattern: OR-joined equality comparisons are read, with parentheses and escapes', () => {
    const ok = (pattern: string): Array<[string, string]> => {
      const r = parseStixPattern(pattern)
      assert.ok(r.ok, pattern)
      return r.comparisons.map((c) => [c.path, c.value])
    }
    assert.deepEqual(ok("[ipv4-addr:value = '192.0.2.1']"), [['ipv4-addr:value', '192.0.2.1']])
    assert.deepEqual(ok("[ipv4-addr:value = '192.0.2.1' OR ipv4-addr:value = '192.0.2.2']").length, 2)
    assert.deepEqual(ok("([domain-name:value = 'a.example'] or ([url:value = 'http://b.example/']))").length, 2)
    assert.deepEqual(ok("[file:hashes.'SHA-256' = 'aa']"), [["file:hashes.'SHA-256'", 'aa']])
    assert.deepEqual(ok("[domain-name:value = 'it\\'s.example']"), [['domain-name:value', "it's.example"]])
    assert.deepEqual(ok('[autonomous-system:number = 64511]'), [['autonomous-system:number', '64511']])
  })

  test('stix pattern: AND, FOLLOWEDBY, qualifiers and operators other than = are unsupported', () => {
    for (const pattern of [
      "[ipv4-addr:value = '192.0.2.1' AND ipv4-addr:value = '192.0.2.2']",
      "[ipv4-addr:value = '192.0.2.1'] AND [ipv4-addr:value = '192.0.2.2']",
      "[ipv4-addr:value = '192.0.2.1'] FOLLOWEDBY [ipv4-addr:value = '192.0.2.2']",
      "[ipv4-addr:value = '192.0.2.1'] WITHIN 300 SECONDS",
      "[ipv4-addr:value != '192.0.2.1']",
      "[ipv4-addr:value ISSUBSET '192.0.2.0/24']",
      "[domain-name:value MATCHES '^evil']",
      "[domain-name:value NOT = 'a.example']",
      "[email-message:to_refs[*].value = 'x@y.example']",
      "[file:created = t'2025-01-01T00:00:00Z']",
      '('.repeat(100) + "[domain-name:value = 'a.example']" + ')'.repeat(100)
    ]) {
      const r = parseStixPattern(pattern)
      assert.equal(r.ok, false, pattern)
      if (!r.ok) assert.match(r.reason, /^unsupported pattern/, pattern)
    }
    for (const broken of ["[ipv4-addr:value = '192.0.2.1'", "ipv4-addr:value = '1'", "[ipv4-addr:value = 'x]", '[]']) {
      const r = parseStixPattern(broken)
      assert.equal(r.ok, false, broken)
    }
  })
})

/** Formats that carry popularity and infrastructure knowledge, not threats (no sample in the default manifest). */
const kKnownGoodFormats: readonly FeedFormat[] = ['rank_csv', 'aws_ip_ranges', 'google_ip_ranges', 'azure_service_tags', 'oracle_ip_ranges', 'github_meta', 'fastly_ip_list']

describe('known-good formats (layout samples in test/fixtures/feeds)', () => {
  test('rank_csv reads Tranco-style rank,domain lines with the rank as label and rejects lines without both', async () => {
    const r = await parseFile('rank_csv', kFixtures, 'rank-tranco-layout.csv')
    assert.deepEqual(values(r), ['popular.example', 'www.second.example', 'third.example', 'tail.example'])
    assert.deepEqual(entry(r, 'popular.example'), { type: 'domain', value: 'popular.example', line: 1, label: '1' })
    assert.equal(entry(r, 'tail.example').label, '100000')
    assert.deepEqual(r.rejected.map((x) => x.line), [4, 5, 6])
    assert.equal(r.lines, 7)
  })

  test('rank_csv reads the Chrome UX Report origin,rank layout: header skipped, origin reduced to its host', async () => {
    const r = await parseFile('rank_csv', kFixtures, 'rank-crux-layout.csv')
    assert.deepEqual(r.entries, [
      { type: 'domain', value: 'www.crux-one.example', line: 2, label: '1000' },
      { type: 'domain', value: 'crux-two.example', line: 3, label: '10000' },
      { type: 'domain', value: 'crux-three.example', line: 4, label: '1000000' }
    ])
    assert.equal(r.rejected.length, 0)
  })

  test('rank_csv skips only a first-line header: a later line without a rank is rejected', () => {
    const r = parseFeed('rank_csv', 'rank,domain\n1,a.example\nrank,domain\n0,zero.example\n2,"quoted.example"\n')
    assert.deepEqual(values(r), ['a.example'])
    assert.deepEqual(r.rejected.map((x) => x.line), [3, 4, 5])
  })

  test('aws_ip_ranges reads IPv4 and IPv6 prefixes, one entry per prefix labelled with its specific service', async () => {
    const r = await parseFile('aws_ip_ranges', kFixtures, 'aws-ip-ranges-layout.json')
    assert.deepEqual(r.entries, [
      { type: 'ip_block', value: '192.0.2.0/25', line: 1, label: 'AWS EC2 us-east-1' },
      { type: 'ip_block', value: '198.51.100.0/26', line: 3, label: 'AWS S3 eu-west-1' },
      { type: 'ip_block', value: '2001:db8:a::/48', line: 6, label: 'AWS AMAZON us-west-2' },
      { type: 'ip_block', value: '2001:db8:b::/48', line: 7, label: 'AWS CLOUDFRONT GLOBAL' }
    ])
    assert.deepEqual(r.rejected.map((x) => x.line), [4, 5])
    assert.equal(r.lines, 7)
  })

  test('google_ip_ranges reads cloud.json with service and scope, and goog.json with bare prefixes', async () => {
    const cloud = await parseFile('google_ip_ranges', kFixtures, 'google-cloud-layout.json')
    assert.deepEqual(cloud.entries, [
      { type: 'ip_block', value: '192.0.2.128/26', line: 1, label: 'Google Cloud europe-west1' },
      { type: 'ip_block', value: '2001:db8:c::/48', line: 2, label: 'Google Cloud us-central1' }
    ])
    assert.deepEqual(cloud.rejected, [{ line: 3, reason: 'prefix entry has neither "ipv4Prefix" nor "ipv6Prefix"' }])
    const goog = await parseFile('google_ip_ranges', kFixtures, 'goog-layout.json')
    assert.deepEqual(goog.entries.map((e) => [e.value, e.label]), [['203.0.113.0/25', 'Google'], ['2001:db8:d::/48', 'Google']])
  })

  test('azure_service_tags reads every tag\'s addressPrefixes labelled with the tag, rejecting bad prefixes and tags', async () => {
    const r = await parseFile('azure_service_tags', kFixtures, 'azure-service-tags-layout.json')
    assert.deepEqual(r.entries.map((e) => [e.value, e.label]), [
      ['198.51.100.64/26', 'Azure AzureCloud.westeurope'],
      ['2001:db8:e::/48', 'Azure AzureCloud.westeurope'],
      ['198.51.100.64/26', 'Azure Storage.WestEurope'],
      ['198.51.100.128/27', 'Azure Storage.WestEurope']
    ])
    assert.deepEqual(r.rejected.map((x) => x.line), [5, 6])
  })

  test('oracle_ip_ranges reads regions[].cidrs[].cidr labelled with the region', async () => {
    const r = await parseFile('oracle_ip_ranges', kFixtures, 'oracle-ip-ranges-layout.json')
    assert.deepEqual(r.entries.map((e) => [e.value, e.label]), [
      ['203.0.113.128/26', 'Oracle Cloud us-phoenix-1'], ['2001:db8:f::/48', 'Oracle Cloud us-phoenix-1'], ['203.0.113.192/27', 'Oracle Cloud eu-frankfurt-1']
    ])
    assert.deepEqual(r.rejected, [{ line: 4, reason: 'cidr entry is not an object' }])
  })

  test('github_meta reads every service\'s address list and skips keys, fingerprints and domains', async () => {
    const r = await parseFile('github_meta', kFixtures, 'github-meta-layout.json')
    assert.deepEqual(r.entries.map((e) => [e.value, e.label]), [
      ['192.0.2.240/28', 'GitHub hooks'], ['2001:db8:10::/48', 'GitHub hooks'], ['192.0.2.224/28', 'GitHub web'],
      ['192.0.2.224/28', 'GitHub api'], ['198.51.100.192/27', 'GitHub actions']
    ])
    assert.equal(r.rejected.length, 0)
  })

  test('fastly_ip_list reads addresses and ipv6_addresses; a bare address is an ip entry', async () => {
    const r = await parseFile('fastly_ip_list', kFixtures, 'fastly-ip-list-layout.json')
    assert.deepEqual(r.entries, [
      { type: 'ip_block', value: '203.0.113.224/27', line: 1, label: 'Fastly' },
      { type: 'ip', value: '203.0.113.250', line: 2, label: 'Fastly' },
      { type: 'ip_block', value: '2001:db8:11::/48', line: 3, label: 'Fastly' }
    ])
  })

  for (const format of ['aws_ip_ranges', 'google_ip_ranges', 'azure_service_tags', 'oracle_ip_ranges', 'github_meta', 'fastly_ip_list'] as const) {
    test(`${format}: a body that is not JSON, or JSON of another shape, gives one rejected entry at line 1`, () => {
      for (const wrong of ['', 'not json', '<html>', '42', 'null', '[]', '{"unrelated": true}', '{"prefixes": 7, "values": 7, "regions": 7, "addresses": 7}']) {
        const r = parseFeed(format, wrong)
        assert.equal(r.entries.length, 0, `${format} ${wrong}`)
        assert.deepEqual(r.rejected.map((x) => x.line), [1], `${format} ${wrong}`)
      }
    })
  }
})

describe('every format', () => {
  test('every FEED_FORMAT has a parser and parseFeed dispatches to it', () => {
    assert.deepEqual(Object.keys(kFeedParsers).sort(), [...FEED_FORMATS].sort())
    for (const format of FEED_FORMATS) assert.deepEqual(parseFeed(format, ''), kFeedParsers[format](''))
  })

  test('no parser throws on arbitrary bytes, and rejected lines never exceed lines examined', () => {
    // Deterministic pseudo-random text (xorshift), biased towards the characters the formats give meaning to.
    let seed = 0x2545f491
    const next = (): number => {
      seed ^= seed << 13; seed ^= seed >>> 17; seed ^= seed << 5
      return (seed >>> 0) / 0x100000000
    }
    const alphabet = '0123456789abcdef.:/|^$#;!@,"\'[]{}() \t\n\r\\=*ASx-_'
    for (let round = 0; round < 200; round++) {
      let text = ''
      const length = Math.floor(next() * 400)
      for (let i = 0; i < length; i++) text += alphabet[Math.floor(next() * alphabet.length)]
      for (const format of FEED_FORMATS) {
        const r = parseFeed(format, text)
        assert.ok(r.rejected.length <= Math.max(r.lines, 1), format)
        for (const e of r.entries) assert.ok(e.line >= 1 && e.line <= Math.max(r.lines, 1), format)
      }
    }
  })
})

describe('feed manifest', () => {
  async function tempDir (t: TestContext): Promise<string> {
    const dir = await mkdtemp(join(tmpdir(), 'ioc-feeds-'))
    t.after(() => rm(dir, { recursive: true, force: true }))
    return dir
  }

  const kValidFeed = {
    name: 'local_feed',
    format: 'plain',
    path: 'lists/local.txt',
    direction: 'malicious',
    group: 'threat_feed',
    subgroup: 'botnet_c2',
    category: 'botnet',
    confidence: 0.5,
    half_life_days: 7
  }

  /** Writes a manifest (raw JSON text or an object) plus lists/local.txt, and returns the manifest path. */
  async function writeManifest (t: TestContext, manifest: string | object): Promise<string> {
    const dir = await tempDir(t)
    await mkdir(join(dir, 'lists'))
    await writeFile(join(dir, 'lists', 'local.txt'), '192.0.2.1\n')
    const path = join(dir, 'manifest.json')
    await writeFile(path, typeof manifest === 'string' ? manifest : JSON.stringify(manifest))
    return path
  }

  test('the shipped manifest loads, covers every threat format, and every feed path exists and parses', async () => {
    const specs = await loadManifest(join(kSamples, 'manifest.json'))
    assert.equal(specs.length, 13)
    // Known-good formats (rank lists, providers' range documents) describe popularity and infrastructure, not threats:
    // the default run gets those from built-in data, and their layout samples are test fixtures (test/fixtures/feeds).
    assert.deepEqual(new Set(specs.map((s) => s.format)), new Set(FEED_FORMATS.filter((f) => !kKnownGoodFormats.includes(f))))
    assert.equal(specs.filter((s) => s.direction === 'safe').length, 1)
    for (const spec of specs) {
      assert.ok(isAbsolute(spec.path), spec.path)
      const parsed = await readFeed(spec)
      assert.ok(parsed.entries.length > 0, spec.name)
    }
    assert.deepEqual(specs.find((s) => s.name === 'sample_feodo'), {
      name: 'sample_feodo',
      format: 'feodo_csv',
      path: join(kSamples, 'feodo-ipblocklist-sample.csv'),
      direction: 'malicious',
      group: 'threat_feed',
      subgroup: 'botnet_c2',
      category: 'botnet',
      confidence: 0.9,
      halfLifeDays: 14
    })
  })

  test('origin is optional and kept when it names another upstream', async (t) => {
    const path = await writeManifest(t, { feeds: [{ ...kValidFeed, origin: 'upstream.list' }, { ...kValidFeed, name: 'other', origin: 'other' }] })
    const [withOrigin, own] = await loadManifest(path)
    assert.equal(withOrigin?.origin, 'upstream.list')
    assert.equal(own?.origin, undefined, 'an origin equal to the name is the default')
  })

  test('relative feed paths resolve against the manifest folder', async (t) => {
    const path = await writeManifest(t, { feeds: [kValidFeed] })
    const [spec] = await loadManifest(path)
    assert.equal(spec?.path, join(dirname(path), 'lists', 'local.txt'))
    assert.deepEqual((await readFeed(spec as never)).entries, [{ type: null, value: '192.0.2.1', line: 1 }])
  })

  const kBadCases: Array<{ title: string, feeds: unknown[], message: RegExp }> = [
    { title: 'an unknown key', feeds: [{ ...kValidFeed, half_life: 3 }], message: /feeds\[0\] "local_feed": unknown key "half_life"/ },
    {
      title: 'an unknown key in a fetched feed',
      feeds: [{ ...kValidFeed, path: undefined, url: 'http://127.0.0.1:1/feed', refresh: 60 }],
      message: /unknown key "refresh" \(allowed: name, format, direction, .*origin, url, refresh_seconds, headers, max_bytes, timeout_seconds, zip_member\)/
    },
    { title: 'a confidence above 1', feeds: [{ ...kValidFeed, confidence: 1.5 }], message: /"local_feed": "confidence" must be a number from 0 to 1/ },
    { title: 'a negative half-life', feeds: [{ ...kValidFeed, half_life_days: -1 }], message: /"local_feed": "half_life_days"/ },
    { title: 'an unknown format', feeds: [{ ...kValidFeed, format: 'csv' }], message: /"local_feed": "format" must be one of/ },
    { title: 'a bad direction', feeds: [{ ...kValidFeed, direction: 'bad' }], message: /"local_feed": "direction"/ },
    { title: 'a missing field', feeds: [{ ...kValidFeed, category: undefined }], message: /"local_feed": missing "category"/ },
    { title: 'a duplicate name', feeds: [kValidFeed, kValidFeed], message: /feeds\[1\] "local_feed": duplicate name \(also feeds\[0\]\)/ },
    { title: 'a missing feed file', feeds: [{ ...kValidFeed, path: 'lists/gone.txt' }], message: /feed "local_feed": feed file not found: .*gone\.txt/ },
    { title: 'an origin that is not a name', feeds: [{ ...kValidFeed, origin: 'up stream' }], message: /"local_feed": "origin" must be 1-64 characters/ },
    { title: 'an origin that is not a string', feeds: [{ ...kValidFeed, origin: 7 }], message: /"local_feed": "origin" must be 1-64 characters/ }
  ]
  for (const { title, feeds, message } of kBadCases) {
    test(`a manifest with ${title} is an error naming the manifest and the feed`, async (t) => {
      const path = await writeManifest(t, { feeds })
      await assert.rejects(loadManifest(path), (err: Error) => {
        assert.match(err.message, message)
        assert.ok(err.message.includes(path), 'names the manifest path')
        return true
      })
    })
  }

  test('a __proto__ key in a feed is an error naming the feed', async (t) => {
    const feed = JSON.stringify(kValidFeed).slice(0, -1) + ',"__proto__":{"polluted":true}}'
    const path = await writeManifest(t, `{"feeds":[${feed}]}`)
    await assert.rejects(loadManifest(path), /feeds\[0\] "local_feed": forbidden key "__proto__"/)
    assert.equal(({} as Record<string, unknown>).polluted, undefined)
  })

  test('constructor and prototype keys and unknown top-level keys are errors too', async (t) => {
    const path = await writeManifest(t, { feeds: [{ ...kValidFeed, constructor: 1, prototype: 2 }], extra: true })
    await assert.rejects(loadManifest(path), (err: Error) => {
      assert.match(err.message, /forbidden key "constructor"/)
      assert.match(err.message, /forbidden key "prototype"/)
      assert.match(err.message, /unknown top-level key "extra"/)
      return true
    })
  })

  test('a manifest that is not JSON, or not there, is an error naming its path', async (t) => {
    const path = await writeManifest(t, '{"feeds": [')
    await assert.rejects(loadManifest(path), (err: Error) => err.message.includes(path) && /not valid JSON/.test(err.message))
    const missing = join(dirname(path), 'nope.json')
    await assert.rejects(loadManifest(missing), (err: Error) => err.message.includes(missing))
  })

  test('readFeed of a feed file that disappeared after loading is an error naming the feed', async (t) => {
    const path = await writeManifest(t, { feeds: [kValidFeed] })
    const [spec] = await loadManifest(path)
    await rm(join(dirname(path), 'lists', 'local.txt'))
    await assert.rejects(readFeed(spec as never), /feed "local_feed": cannot read/)
  })
})
