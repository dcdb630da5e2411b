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

/** This thread's id (Linux's tid, from /proc/thread-self), or null where there is none to read. */
function thisThreadId (): number | null {
  if (process.platform !== 'linux') return null
  try {
    // "<pid>/task/<tid>"
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop())
    return Number.isSafeInteger(tid) && tid > 0 ? tid : null
  } catch {
    return null
  }
}

/** Sets thread `tid`'s nice value; false where it could not (not Linux, refused). */
function setThreadPriority (tid: number, priority: number): boolean {
  if (process.platform !== 'linux') return false
  try {
    setPriority(tid, priority)
    return true
  } catch {
    return false
  }
}

/**
 * Lowers the calling thread to the lowest priority (nice 19): its id, for restoreThreadPriority, or null where it
 * could not (not Linux, refused).
 */
export function lowerThisThreadPriority (): number | null {
  const tid = thisThreadId()
  return tid !== null && setThreadPriority(tid, constants.priority.PRIORITY_LOW) ? tid : null
}

/**
 * Gives thread `tid` of this process its normal priority (nice 0) back, so that a background thread asked to stop
 * gets the CPU to do so on a saturated machine: at nice 19 beside busy threads at nice 0 it may get well under 1% of a
 * core, and closing its store would then hold up a shutdown for tens of seconds. Lowering a nice value needs
 * privilege (root, CAP_SYS_NICE or an RLIMIT_NICE that allows it): false when refused, and the thread stops at its
 * own pace within its grace.
 */
export function restoreThreadPriority (tid: number): boolean {
  return setThreadPriority(tid, constants.priority.PRIORITY_NORMAL)
}
