/** The http suite of suites.ts in one process: `node --import tsx --test test/http.suite.ts`. */
import { loadSuite } from './suites.ts'

await loadSuite('http')
