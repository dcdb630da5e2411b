/**
 * The error half of the per-type helpers. Helpers return a value or a Failure instead of throwing,
 * because bad user input is the normal case here and exceptions are slow and easy to leak.
 */

/** Why a value could not be normalized: one short, stable, human-readable sentence. */
export interface Failure {
  error: string
}

/** Builds a Failure. */
export function fail (error: string): Failure {
  return { error }
}

/** True when a helper returned a Failure rather than a value. */
export function isFailure (r: unknown): r is Failure {
  return typeof r === 'object' && r !== null && 'error' in r
}
