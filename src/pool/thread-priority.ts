/**
 * Background work (a retro-hunt pass) runs on a thread at the lowest CPU priority, so that it takes a core only when
 * the threads at normal priority (HTTP, scoring, the history writer) leave one idle, instead of a fixed share of it.
 *
 * Linux keeps a nice value per thread: setpriority(2) on a thread id changes that thread only (and threads it starts
 * after), which Node's os.setPriority reaches with the id from /proc/thread-self. Elsewhere a nice value belongs to
 * the whole process, so nothing is changed there and the pass relies on its pacing (IOC_RETRO_HUNT_DUTY_PERCENT).
 * Raising one's own nice value needs no privilege.
 */
import { readlinkSync } from 'node:fs'
import { constants, setPriority } from 'node:os'

/** Lowers the calling thread to the lowest priority (nice 19); false where it could not (not Linux, refused). */
export function lowerThisThreadPriority (): boolean {
  if (process.platform !== 'linux') return false
  try {
    // "<pid>/task/<tid>"
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop())
    if (!Number.isSafeInteger(tid) || tid <= 0) return false
    setPriority(tid, constants.priority.PRIORITY_LOW)
    return true
  } catch {
    return false
  }
}
