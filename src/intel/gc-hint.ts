/**
 * A full garbage collection between the compiler's stages. A feed's text and the buffer it was read into (hundreds
 * of MB for a multi-million-line list) die as soon as its part is built, but V8 collects dead buffers only when its
 * own heap grows, which parsing hardly does: without a collection they would still be held when the merge allocates
 * the snapshot, and the build's peak would be their size higher. Uses the global `gc` when node runs with
 * --expose-gc, else enables it for a fresh context (V8's expose-gc flag only adds the function to new contexts; a
 * collection it runs is of this thread's heap). Does nothing if neither works.
 */
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'

let collect: (() => void) | null | undefined

/** Runs a full collection of this thread's heap, when one can be asked for. */
export function collectGarbage (): void {
  if (collect === undefined) {
    const exposed = (globalThis as { gc?: () => void }).gc
    if (typeof exposed === 'function') {
      collect = exposed
    } else {
      try {
        setFlagsFromString('--expose-gc')
        const fn = runInNewContext('gc') as unknown
        collect = typeof fn === 'function' ? fn as () => void : null
      } catch {
        collect = null
      }
    }
  }
  collect?.()
}
