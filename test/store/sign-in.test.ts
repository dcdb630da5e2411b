/**
 * Dashboard sign-in limits in the store (sign-in-limits.ts, docs/OPERATIONS.md "Dashboard sign-in limits"): every
 * attempt is counted before its password is checked, atomically, in each backend and across two stores sharing one
 * database (two instances); then the policies themselves on a clock of the test's own.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import Database from 'better-sqlite3'
import { addressSlot, backoffMs, kPolicies, SignInLimits, signInFailuresSchema } from '../../src/store/sign-in-limits.ts'
import { SqlitePort } from '../../src/store/sqlite-port.ts'
import { storeBackends } from './backends.ts'

const kPassword = 'correct horse battery staple'

for (const backend of storeBackends) {
  test(`${backend.name}: 160 parallel wrong passwords from one address, over two instances, check exactly 5`, { skip: backend.skip ?? false }, async () => {
    const h = await backend.open()
    try {
      const other = await h.openAnother()
      await h.store.accounts.createUser({ tenant: 't', username: 'victim', password: kPassword })
      const outcomes = await Promise.all(Array.from({ length: 160 }, async (_, i) =>
        await (i % 2 === 0 ? h.store : other).accounts.signIn('victim', `wrong password ${i}`, '203.0.113.7')))
      const reasons = outcomes.map((o) => o.ok ? 'ok' : o.reason)
      assert.equal(reasons.filter((r) => r === 'invalid').length, 5, 'five checked')
      // Refused while the five were being checked: busy (those might have succeeded); after, limited.
      assert.equal(reasons.filter((r) => r === 'limited' || r === 'busy').length, 155, 'the rest refused before any check')
      const right = await h.store.accounts.signIn('victim', kPassword, '203.0.113.7')
      assert.equal(right.ok ? 'ok' : right.reason, 'limited', 'the right password from the locked address waits too')
      assert.ok(!right.ok && right.reason === 'limited' && right.retryAfterSeconds > 0 && right.retryAfterSeconds <= 60)
      // The attacker's address is locked, not the user: from her own address she signs in.
      const hers = await other.accounts.signIn('victim', kPassword, '198.51.100.9')
      assert.equal(hers.ok, true)
    } finally {
      await h.cleanup()
    }
  })
}

for (const backend of storeBackends) {
  test(`${backend.name}: parallel sign-ins with the right password are never told they failed, nor make a later one wait`, { skip: backend.skip ?? false }, async () => {
    const h = await backend.open()
    try {
      for (const username of ['ana', 'boss']) await h.store.accounts.createUser({ tenant: 't', username, password: kPassword })
      const outcomes = await Promise.all(Array.from({ length: 40 }, async (_, i) =>
        await h.store.accounts.signIn(i % 2 === 0 ? 'ana' : 'boss', kPassword, '203.0.113.8')))
      const reasons = outcomes.map((o) => o.ok ? 'ok' : o.reason)
      assert.ok(reasons.includes('ok'))
      assert.deepEqual(reasons.filter((r) => r !== 'ok' && r !== 'busy'), [], 'refused only as busy, retry in a moment')
      for (const o of outcomes) if (!o.ok && o.reason !== 'invalid') assert.equal(o.retryAfterSeconds, 1)
      for (const username of ['ana', 'boss']) {
        const again = await h.store.accounts.signIn(username, kPassword, '203.0.113.8')
        assert.equal(again.ok ? 'ok' : again.reason, 'ok', `${username} right after`)
      }
    } finally {
      await h.cleanup()
    }
  })
}

for (const backend of storeBackends) {
  test(`${backend.name}: a valid user signing in from forty threads without pause, from one address or many, does not lock another client out`, { skip: backend.skip ?? false }, async () => {
    for (const spread of [false, true]) await floodBeside(backend, spread)
  })
}

/** Forty threads of one valid user sign in without pause (from one address, or spread over twenty), beside another. */
async function floodBeside (backend: typeof storeBackends[number], spread: boolean): Promise<void> {
  let n = 0
  const h = await backend.open()
  try {
    await h.store.accounts.createUser({ tenant: 't', username: 'flooder', password: kPassword })
    await h.store.accounts.createUser({ tenant: 't2', username: 'bystander', password: kPassword })
    // Successes give their attempts back, so no failure limit stops the flood: forty threads, each signing in again
    // as soon as it is answered, keep the hash queue full.
    const run = { stop: false }
    const reasons = new Set<string>()
    const flood = Array.from({ length: 40 }, async () => {
      while (!run.stop) {
        // A flood spread over addresses is still one username's.
        const o = await h.store.accounts.signIn('flooder', kPassword, spread ? `203.0.113.${50 + (n++ % 20)}` : '203.0.113.50')
        reasons.add(o.ok ? 'ok' : o.reason)
        if (!o.ok) await new Promise((resolve) => setTimeout(resolve, 5))
      }
    })
    try {
      for (let i = 0; !reasons.has('busy'); i++) {
        assert.ok(i < 400, 'the flood fills the queue')
        await new Promise((resolve) => setTimeout(resolve, 25))
      }
      // Another client, from another address, is checked and signed in all the same, every time.
      for (let i = 0; i < 3; i++) {
        const bystander = await h.store.accounts.signIn('bystander', kPassword, '198.51.100.60')
        assert.equal(bystander.ok ? 'ok' : bystander.reason, 'ok', `flood from ${spread ? 'twenty addresses' : 'one address'}`)
      }
    } finally {
      run.stop = true
      await Promise.all(flood)
    }
  } finally {
    await h.cleanup()
  }
}

/** SignInLimits over an in-memory SQLite database, through the port the SQLite store hands it. */
function limitsOnSqlite (): SignInLimits {
  const db = new Database(':memory:')
  db.exec(signInFailuresSchema('sign_in_failures'))
  return new SignInLimits(new SqlitePort(db))
}

const kT0 = Date.UTC(2026, 10, 27, 12)

async function fail (limits: SignInLimits, username: string, address: string, now: number): Promise<boolean> {
  const t = await limits.take(username, address, now)
  if (t.ok) t.failed()
  return t.ok
}

test('one username and address: five free tries, then a wait that doubles with each failure up to an hour', async () => {
  const limits = limitsOnSqlite()
  let now = kT0
  for (let i = 0; i < 5; i++) assert.ok(await fail(limits, 'u', '192.0.2.1', now))
  const refused = await limits.take('u', '192.0.2.1', now)
  assert.deepEqual(refused, { ok: false, retryAfterSeconds: 60, busy: false })
  const waits: number[] = []
  for (let i = 0; i < 8; i++) {
    const wait = backoffMs(kPolicies.pair, 5 + i)
    waits.push(wait / 60_000)
    assert.equal(await fail(limits, 'u', '192.0.2.1', now + wait - 1), false, `still waiting after failure ${5 + i}`)
    now += wait
    assert.ok(await fail(limits, 'u', '192.0.2.1', now), `allowed after ${wait} ms`)
  }
  assert.deepEqual(waits, [1, 2, 4, 8, 16, 32, 60, 60])
  // A day without failures forgets them.
  assert.ok(await fail(limits, 'u', '192.0.2.1', now + 24 * 3_600_000 + 1))
})

test('a success gives its attempt back and clears the pair; an attempt that was not checked counts nothing', async () => {
  const limits = limitsOnSqlite()
  for (let i = 0; i < 4; i++) assert.ok(await fail(limits, 'u', '192.0.2.1', kT0))
  const ok = await limits.take('u', '192.0.2.1', kT0)
  assert.ok(ok.ok)
  await ok.release(true)
  for (let i = 0; i < 5; i++) assert.ok(await fail(limits, 'u', '192.0.2.1', kT0), `fresh try ${i}`)
  for (let i = 0; i < 20; i++) {
    const t = await limits.take(`spray${i}`, '192.0.2.2', kT0)
    assert.ok(t.ok)
    await t.release(false)
  }
  assert.ok(await fail(limits, 'another', '192.0.2.2', kT0), 'unchecked attempts left no count on the address')
})

test('one address: thirty failures over any usernames, then it waits; another address is not affected', async () => {
  const limits = limitsOnSqlite()
  for (let i = 0; i < 30; i++) assert.ok(await fail(limits, `user${i}`, '192.0.2.9', kT0))
  assert.equal(await fail(limits, 'someone-new', '192.0.2.9', kT0), false)
  assert.ok(await fail(limits, 'someone-new', '192.0.2.10', kT0))
  // An IPv6 host is counted by its /64.
  for (let i = 0; i < 30; i++) assert.ok(await fail(limits, `v6user${i}`, `2001:db8:1:2::${(i + 1).toString(16)}`, kT0))
  assert.equal(await fail(limits, 'v6-new', '2001:db8:1:2:ffff::1', kT0), false)
  assert.equal(addressSlot('::ffff:192.0.2.9'), '192.0.2.9')
})

test('one username from anywhere: a ceiling of a hundred failures a day, which one address alone cannot reach', async () => {
  const limits = limitsOnSqlite()
  let n = 0
  for (let a = 0; n < 100; a++) {
    for (let i = 0; i < 5 && n < 100; i++, n++) assert.ok(await fail(limits, 'ceo', `198.51.100.${a}`, kT0 + n))
  }
  const refused = await limits.take('ceo', '203.0.113.200', kT0 + 100)
  assert.equal(refused.ok, false)
  assert.ok(!refused.ok && refused.retryAfterSeconds >= 3599 && refused.retryAfterSeconds <= 3600)
  assert.ok(await fail(limits, 'ceo', '203.0.113.200', kT0 + 100 + 3_600_000), 'after the hour, one more try')
  // One address alone, as fast as its pair's backoff allows, stays under the ceiling over a day.
  const single = limitsOnSqlite()
  let allowed = 0
  for (let now = kT0; now < kT0 + 24 * 3_600_000; now += 30_000) if (await fail(single, 'cfo', '192.0.2.77', now)) allowed++
  assert.ok(allowed < kPolicies.username.free, `${allowed} tries in a day`)
})

test('the counts cannot be flushed: more other slots than any cache would hold leave a locked pair locked', async () => {
  const limits = limitsOnSqlite()
  for (let i = 0; i < 5; i++) assert.ok(await fail(limits, 'victim', '192.0.2.1', kT0))
  for (let i = 0; i < 12_000; i++) await limits.take(`filler${i}`, `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, kT0)
  assert.equal(await fail(limits, 'victim', '192.0.2.1', kT0 + 1), false)
})
