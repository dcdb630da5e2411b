/** The part of the `punycode` package (RFC 3492) the domain normalizer uses; the package ships no types. */
declare module 'punycode/punycode.js' {
  /** Decodes a Punycode string of ASCII symbols (no `xn--`) to Unicode; throws RangeError on invalid input. */
  export function decode (input: string): string
  const punycode: { decode: typeof decode }
  export default punycode
}
