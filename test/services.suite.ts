/** The services suite of suites.ts in one process: `node --import tsx --test test/services.suite.ts`. */
import { loadSuite } from './suites.ts'

await loadSuite('services')
