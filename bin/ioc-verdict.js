#!/usr/bin/env node
// Launcher: registers tsx so the TypeScript sources run with plain `node`, then hands over to src/main.ts.
import { register } from 'tsx/esm/api'
register()
await import('../src/main.ts')
