/** Figures the benches share. */

/** The median of `xs` (the mean of the two middle values for an even count); NaN for none. */
export function median (xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  if (s.length === 0) return NaN
  const mid = s.length >> 1
  return s.length % 2 === 1 ? s[mid] as number : ((s[mid - 1] as number) + (s[mid] as number)) / 2
}
