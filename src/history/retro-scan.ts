/**
 * Retro-hunt matching of stored history items against the keys a new snapshot raises (engine/snapshot/diff.ts):
 * for an item's type and normalized form, the keys the scorer looks up for it (engine/collect.ts), each looked up in
 * the raised set: the exact value, every parent domain of a host (above its public suffix's labels is not checked
 * here: a listing of a public suffix is not one feeds make), every listed network length holding an address or block,
 * and the AS announcing an address. Hashes are computed as the snapshot computes them (format.ts, hash.ts).
 */
import { parseIp, parseIpBlock } from '../engine/normalize/index.ts'
import type { RaisedKeys } from '../engine/snapshot/diff.ts'
import { networkKey } from '../engine/snapshot/format.ts'
import { hashString, hashWords, KeyTag, type KeyPair } from '../engine/snapshot/hash.ts'
import type { Snapshot } from '../engine/snapshot/snapshot.ts'
import { formatIp } from '../engine/normalize/index.ts'
import { fmix32, kFnvOffset, kFnvPrime } from '../bytes/fnv.ts'

/** How a raised listing covers a queried indicator (docs/API.md "Retro-hunt"). */
export type RetroMatch = 'exact' | 'parent_domain' | 'containing_network' | 'announcing_as'

/** One raised key covering an item. */
export interface RetroCandidate {
  match: RetroMatch
  /** The listing as the scorer names it: the value, the parent domain, the network (CIDR) or `AS<n>`. */
  listed: string
  /** Index of the key in the raised set. */
  key: number
}

/** Matches items against one raised set and the snapshot that raised it. */
export class RetroMatcher {
  readonly #raised: RaisedKeys
  readonly #snap: Snapshot
  readonly #pair: KeyPair = { h1: 0, h2: 0 }

  constructor (raised: RaisedKeys, snap: Snapshot) {
    this.#raised = raised
    this.#snap = snap
  }

  /** Appends to `out` every raised key covering an item of this type and normalized form; returns how many. */
  candidates (type: string | null, normalized: string | null, out: RetroCandidate[]): number {
    if (type === null || normalized === null || normalized === '') return 0
    const before = out.length
    switch (type) {
      case 'domain': this.#domain(normalized, out); break
      case 'file_hash_sha256': this.#check(hashString(KeyTag.sha256, normalized, this.#pair), 'exact', normalized, out); break
      case 'asn': {
        const asn = Number(normalized.startsWith('AS') ? normalized.slice(2) : normalized)
        if (Number.isInteger(asn) && asn >= 0) this.#check(hashWords(KeyTag.asn, asn, 0, 0, 0, 0, this.#pair), 'exact', normalized, out)
        break
      }
      case 'ip': {
        const ip = parseIp(normalized)
        if (ip !== null) this.#network(ip, ip.version === 4 ? 32 : 128, normalized, true, out)
        break
      }
      case 'ip_block': {
        const b = parseIpBlock(normalized)
        if (b !== null) this.#network(b.ip, b.prefix, normalized, false, out)
        break
      }
    }
    return out.length - before
  }

  /**
   * candidates() for an item whose normalized form is text[start, end): a domain is hashed where it lies, and a string
   * is made only for a listing that covers it; other types are read as strings.
   */
  candidatesIn (type: string | null, text: string, start: number, end: number, out: RetroCandidate[]): number {
    if (type === null || start < 0 || end <= start) return 0
    if (type !== 'domain') return this.candidates(type, text.slice(start, end), out)
    const before = out.length
    const pair = this.#pair
    hashFrom(text, start, end, pair)
    let key = this.#raised.find(pair.h1, pair.h2)
    if (key >= 0) out.push({ match: 'exact', listed: text.slice(start, end), key })
    for (let i = text.indexOf('.', start); i !== -1 && i < end; i = text.indexOf('.', i + 1)) {
      const next = text.indexOf('.', i + 1)
      if (next === -1 || next >= end) break // a bare top-level label
      hashFrom(text, i + 1, end, pair)
      key = this.#raised.find(pair.h1, pair.h2)
      if (key >= 0) out.push({ match: 'parent_domain', listed: text.slice(i + 1, end), key })
    }
    return out.length - before
  }

  #check (pair: KeyPair, match: RetroMatch, listed: string, out: RetroCandidate[]): void {
    const key = this.#raised.find(pair.h1, pair.h2)
    if (key >= 0) out.push({ match, listed, key })
  }

  #domain (name: string, out: RetroCandidate[]): void {
    this.#check(hashString(KeyTag.domain, name, this.#pair), 'exact', name, out)
    for (let i = name.indexOf('.'); i !== -1; i = name.indexOf('.', i + 1)) {
      if (name.indexOf('.', i + 1) === -1) break // a bare top-level label
      // The parent's hash from its offset: no substring unless it is raised.
      hashFrom(name, i + 1, name.length, this.#pair)
      const key = this.#raised.find(this.#pair.h1, this.#pair.h2)
      if (key >= 0) out.push({ match: 'parent_domain', listed: name.slice(i + 1), key })
    }
  }

  #network (ip: { version: 4 | 6, words: number[] }, prefix: number, normalized: string, address: boolean, out: RetroCandidate[]): void {
    const snap = this.#snap
    const ind = { ip, prefix }
    for (const p of ip.version === 4 ? snap.header.v4Prefixes : snap.header.v6Prefixes) {
      if (p > prefix || (ip.version === 4 && !snap.mayHaveNet4(p, ip.words[0] as number))) continue
      networkKey(ind, p, this.#pair)
      const key = this.#raised.find(this.#pair.h1, this.#pair.h2)
      if (key < 0) continue
      const exact = p === prefix
      out.push({ match: exact ? 'exact' : 'containing_network', listed: exact ? normalized : `${formatIp({ version: ip.version, words: masked(ip, p) })}/${p}`, key })
    }
    if (!address) return
    const asn = snap.asnOf(ip.version, ip.words)
    if (asn >= 0) this.#check(hashWords(KeyTag.asn, asn, 0, 0, 0, 0, this.#pair), 'announcing_as', `AS${asn}`, out)
  }
}

/**
 * hashString(KeyTag.domain, s.slice(from, to)) without the slice (hash.ts: the same steps over the same code units), as
 * into `out`.
 */
function hashFrom (s: string, from: number, to: number, out: KeyPair): void {
  const tag = KeyTag.domain
  let a = kFnvOffset ^ tag
  let b = 0x9747b28c ^ Math.imul(tag, 0x9e3779b1)
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i)
    a = Math.imul(a ^ c, kFnvPrime)
    b = Math.imul(b ^ c, 0x5bd1e995)
    b ^= b >>> 15
  }
  const len = to - from
  out.h1 = fmix32(a ^ len)
  out.h2 = fmix32(b ^ Math.imul(len, 0xcc9e2d51))
}

/** The first address of the network of `prefix` bits holding `ip`, as words. */
function masked (ip: { words: number[] }, prefix: number): number[] {
  return ip.words.map((w, i) => {
    const bits = Math.min(32, Math.max(0, prefix - i * 32))
    const net = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0
    return (w & net) >>> 0
  })
}
