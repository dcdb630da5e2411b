#!/usr/bin/env node
// Launcher: runs src/main.ts from its bundle (workers/bundle.js: one JavaScript module, made again once a source
// changes), so a command starts without a TypeScript loader; when no bundle can be had (a read-only install), it
// registers tsx and runs the TypeScript itself. The Node version is checked first (node-version.js says why).
import { pathToFileURL } from 'node:url'
import { nodeVersionProblem } from './node-version.js'

const problem = nodeVersionProblem(process.versions.node)
if (problem !== null) {
  process.stderr.write(`${problem}\n`)
  process.exit(1)
}
const { bundleFile } = await import('../workers/bundle.js')

const main = bundleFile('main')
if (main !== null) {
  await import(pathToFileURL(main).href)
} else {
  const { register } = await import('tsx/esm/api')
  register()
  await import('../src/main.ts')
}
