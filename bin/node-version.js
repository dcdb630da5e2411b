// The Node.js versions ioc-verdict runs on, checked before anything else loads: on an older Node, the SQLite driver
// (better-sqlite3 13, prebuilt for Node 22 and later) loads without complaint and then crashes the process with a
// segmentation fault and no message. Plain JavaScript with no imports beyond Node's own, so it runs on any Node.
import { readFileSync } from 'node:fs'

/** The lowest version package.json's `engines.node` accepts (it reads ">=MAJOR.MINOR"). */
export function requiredNode () {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'))
  const m = /^>=\s*(\d+)\.(\d+)/.exec(pkg.engines?.node ?? '')
  if (m === null) throw new Error(`package.json engines.node is not ">=MAJOR.MINOR": ${pkg.engines?.node}`)
  return { major: Number(m[1]), minor: Number(m[2]) }
}

/** Why `version` (as process.versions.node) cannot run ioc-verdict, or null when it can. */
export function nodeVersionProblem (version, required = requiredNode()) {
  const [major, minor] = String(version).split('.').map(Number)
  if (major > required.major || (major === required.major && minor >= required.minor)) return null
  return `ioc-verdict needs Node.js ${required.major}.${required.minor} or later; this is Node.js ${version}. ` +
    'Put a newer Node first on PATH (README.md, "Development": eval "$(scripts/node-runtime.sh env 24)" installs ' +
    'Node 24 from the npm registry), then run npm ci again so native modules match it.'
}
