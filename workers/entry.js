// Loads a worker module given as workerData.entry. Worker threads do not inherit a loader registered with
// tsx's register() API (the CLI launcher), and Node 20 refuses a .ts file as a Worker's entry, so every
// worker starts here, registers tsx inside its own thread when the entry is TypeScript, and re-exports
// the module's tasks (Piscina calls them by name).
import { workerData } from 'node:worker_threads'

if (workerData.entry.endsWith('.ts')) {
  const { register } = await import('tsx/esm/api')
  register()
}
const mod = await import(workerData.entry)
export default mod.default
export const ready = mod.ready
