/** The unit suite of suites.ts in one process: `node --import tsx --test test/unit.suite.ts`. */
import { loadSuite } from './suites.ts'

await loadSuite('unit')
