/** The lowest version package.json's `engines.node` accepts. */
export function requiredNode (): { major: number, minor: number }
/** Why `version` (as process.versions.node) cannot run ioc-verdict, or null when it can. */
export function nodeVersionProblem (version: string, required?: { major: number, minor: number }): string | null
