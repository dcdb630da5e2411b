/** Types of workers/bundle.js (plain JavaScript: bin/ioc-verdict.js runs it without a TypeScript loader). */

/** Where bundles and their manifests are kept (git-ignored). */
export declare const kBundleDir: string

/**
 * The bundle of `name`'s current sources (`main`: src/main.ts; any other: workers/<name>.ts), an absolute path, built
 * when needed; null when none can be had, with the reason in `onFailure`.
 */
export declare function bundleFile (name: string, onFailure?: (err: Error) => void): string | null

/** bundleFile for several names; those to make are made by one child process. */
export declare function bundleFiles (names: readonly string[], onFailure?: (err: Error) => void): Map<string, string | null>
