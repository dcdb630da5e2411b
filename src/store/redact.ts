/**
 * Keeps connection strings and passwords out of error messages and causes. pg and ioredis errors rarely quote
 * the URL, but Node's URL errors carry the whole string in `input`, and one leak in a log is enough.
 */

/** Strings that must never appear in an error: the URL, and its password in every form it may take. */
export function secretsOf (url: string): string[] {
  const secrets = [url]
  try {
    const u = new URL(url)
    for (const p of [u.password, u.searchParams.get('password')]) {
      if (p !== null && p !== '') {
        secrets.push(p)
        try { secrets.push(decodeURIComponent(p)) } catch { /* keep the raw form only */ }
      }
    }
  } catch {
    // Not a URL (a key=value string): the whole string is already listed.
  }
  // Longest first, so a password inside the URL does not leave the rest of the URL behind.
  return secrets.filter((s) => s.length >= 3).sort((a, b) => b.length - a.length)
}

const kUrlPattern = /\b(?:postgres(?:ql)?|rediss?):\/\/\S+/gi

/** `text` with every secret and anything shaped like a postgres:// or redis:// URL replaced by ***. */
export function scrub (text: string, secrets: readonly string[]): string {
  let out = text
  for (const s of secrets) out = out.replaceAll(s, '***')
  return out.replace(kUrlPattern, '***')
}

/** True when any string property, the message or the stack of `err` contains a secret or a URL. */
export function mentionsSecret (err: unknown, secrets: readonly string[]): boolean {
  if (err === null || typeof err !== 'object') return false
  const values: unknown[] = Object.values(err as Record<string, unknown>)
  values.push((err as Error).message, (err as Error).stack)
  for (const value of values) {
    if (typeof value !== 'string') continue
    if (secrets.some((s) => value.includes(s))) return true
    kUrlPattern.lastIndex = 0
    if (kUrlPattern.test(value)) return true
  }
  return false
}

/** The original error as a cause, or a scrubbed copy (message and code only) when it mentions a secret. */
export function safeCause (err: unknown, secrets: readonly string[]): unknown {
  if (!mentionsSecret(err, secrets)) return err
  const e = err as { message?: unknown, code?: unknown }
  const copy = new Error(scrub(typeof e.message === 'string' ? e.message : 'error', secrets)) as Error & { code?: unknown }
  if (e.code !== undefined) copy.code = e.code
  return copy
}
