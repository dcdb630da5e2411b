/**
 * Paths of worker modules. Every worker starts through workers/entry.js with the module in workerData.entry,
 * so the same code runs from src (TypeScript under tsx) and from compiled JavaScript.
 */
import { extname } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const kExt = extname(fileURLToPath(import.meta.url))

/** The shim every worker thread starts from. */
export const kWorkerShim = fileURLToPath(new URL('../workers/entry.js', import.meta.url))

/** URL of workers/<name> with this build's extension, for workerData.entry. */
export function workerEntry (name: string): string {
  return pathToFileURL(fileURLToPath(new URL(`../workers/${name}${kExt}`, import.meta.url))).href
}
