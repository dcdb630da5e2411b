/**
 * The lexical lookalike signal against a brute-force reference: the character-mask prefilter in lookalike() may
 * only skip targets that the edit distance would reject too.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { mulberry32 } from '../../bench/corpus.ts'
import { editDistance, entropy, lookalike } from '../../src/engine/signals/lexical.ts'

/** Plain Levenshtein distance, no band and no early exit. */
function levenshtein (a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const cur = [i]
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min((prev[j] as number) + 1, (cur[j - 1] as number) + 1, (prev[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    prev = cur
  }
  return prev[b.length] as number
}

const kTargets = ['paypal.com', 'metamask.io', 'microsoftonline.com', 'binance.com', 'coinbase.com']
const kAlphabet = 'abcdefghijklmnopqrstuvwxyz0123456789-.'

/** A random name: either a random string or a guarded name with 0-4 random edits. */
function candidate (rand: () => number): string {
  const pick = (s: string): string => s[Math.floor(rand() * s.length)] as string
  if (rand() < 0.3) return Array.from({ length: 6 + Math.floor(rand() * 14) }, () => pick(kAlphabet)).join('')
  let s = kTargets[Math.floor(rand() * kTargets.length)] as string
  const edits = Math.floor(rand() * 5)
  for (let e = 0; e < edits; e++) {
    const at = Math.floor(rand() * (s.length + 1))
    const op = rand()
    if (op < 0.33) s = s.slice(0, at) + pick(kAlphabet) + s.slice(at)
    else if (op < 0.66) s = s.slice(0, at) + s.slice(at + 1)
    else s = s.slice(0, at) + pick(kAlphabet) + s.slice(at + 1)
  }
  return s
}

test('lookalike answers as a brute-force edit distance over every target would', () => {
  const rand = mulberry32(7)
  let lookalikes = 0
  for (let i = 0; i < 20_000; i++) {
    const name = candidate(rand)
    for (const tolerance of [1, 2]) {
      const got = lookalike(name, kTargets, tolerance)
      const expected = kTargets.includes(name)
        ? null
        : kTargets.map((target) => ({ target, distance: levenshtein(name, target) })).find((c) => c.distance > 0 && c.distance <= tolerance) ?? null
      assert.deepEqual(got, expected, `${name} at tolerance ${tolerance}`)
      if (got !== null) lookalikes++
    }
  }
  assert.ok(lookalikes > 1000, `the inputs include lookalikes (${lookalikes})`)
})

test('the banded edit distance is exact up to its bound and above it beyond', () => {
  const rand = mulberry32(11)
  for (let i = 0; i < 5_000; i++) {
    const a = candidate(rand)
    const b = candidate(rand)
    const d = levenshtein(a, b)
    for (const max of [1, 2, 3]) {
      const got = editDistance(a, b, max)
      if (d <= max) assert.equal(got, d, `${a} / ${b}`)
      else assert.ok(got > max, `${a} / ${b}: ${got} should exceed ${max}`)
    }
  }
})

test('entropy is Shannon entropy per code point, for ASCII and other text alike', () => {
  assert.equal(entropy('aaaa'), 0)
  assert.equal(entropy('ab'), 1)
  assert.equal(entropy('abcdabcd'), 2)
  assert.equal(entropy('\u0430\u0430'), 0, 'Cyrillic a twice')
  assert.equal(entropy('\u{1F600}a'), 1, 'an astral character counts once')
  const rand = mulberry32(3)
  for (let i = 0; i < 2000; i++) {
    const s = candidate(rand)
    const counts = new Map<string, number>()
    for (const ch of s) counts.set(ch, (counts.get(ch) ?? 0) + 1)
    let h = 0
    for (const n of counts.values()) h -= (n / s.length) * Math.log2(n / s.length)
    assert.ok(Math.abs(entropy(s) - h) < 1e-12, s)
    assert.equal(entropy(s), entropy(s), 'no state carried between calls')
  }
})
