/**
 * One serving instance per data directory. Two instances on one directory append to the same history journal and each
 * replays the other's records into the store at its next start (duplicate history and usage), so the second one is
 * refused at start.
 *
 * `<data dir>/instance.lock` holds the owner's process id and host name. A lock whose process is gone (a crash, a
 * kill -9, a container restarted with the same pid) is taken over. A lock written on another host cannot be checked
 * from here; it is taken over with a warning (a restarted container often has a new host name), so sharing one
 * directory between hosts stays the operator's error to avoid (docs/OPERATIONS.md). Written by hand: the npm lock
 * packages (proper-lockfile and the like) lock by directory mtime with timeouts meant for short critical sections,
 * not for the lifetime of a server.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { DataDirInUseError } from './errors.ts'

/** Lock files held by services of this process (a second in-process service is refused too). */
const kHeld = new Set<string>()

/**
 * Whether a process with this id runs on this host. A zombie (exited, not yet reaped by its parent: a kill -9'd service
 * stays one for a second or more where its parent reaps slowly) holds nothing and counts as gone; Linux says so in
 * /proc/<pid>/stat, elsewhere it counts as running.
 */
function alive (pid: number): boolean {
  try {
    process.kill(pid, 0)
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
  return !zombie(pid)
}

/** True when /proc says the process has exited and waits to be reaped (state Z, or X while it is being reaped). */
function zombie (pid: number): boolean {
  let stat: string
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return false // no /proc (not Linux), or the process went meanwhile: kill() above decided
  }
  // "pid (comm) S ...": comm may hold spaces and parentheses; the state follows the last ')'.
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3)
  return state === 'Z' || state === 'X'
}

/** What the lock at `path` says of its owner, or null when there is none (or it cannot be read as one). */
function owner (path: string): { pid: number, host: string } | null {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch {
    return null
  }
  const [pid, host] = text.split('\n')
  const n = Number(pid)
  return Number.isSafeInteger(n) && n > 0 ? { pid: n, host: host ?? '' } : null
}

/**
 * Takes the data directory for this instance; throws DataDirInUseError when a live instance on this host holds it.
 * Returns a release function (idempotent) and, when a lock from another host was taken over, a warning to log.
 */
export function lockDataDir (dir: string): { release: () => void, warning: string | null } {
  const path = join(dir, 'instance.lock')
  if (kHeld.has(path)) throw new DataDirInUseError(`data directory ${dir} is in use by another service in this process`)
  const prev = owner(path)
  let warning: string | null = null
  if (prev !== null) {
    if (prev.host === hostname()) {
      if (prev.pid !== process.pid && alive(prev.pid)) {
        throw new DataDirInUseError(`data directory ${dir} is in use by process ${prev.pid}; give each instance its own IOC_DATA_DIR`)
      }
    } else {
      warning = `data directory ${dir} was locked by host ${prev.host.slice(0, 64)}; taking it over (each instance needs its own IOC_DATA_DIR)`
    }
  }
  const mine = `${process.pid}\n${hostname()}\n`
  try {
    writeFileSync(path, mine, { flag: 'wx' })
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    // Read above as free or stale (or written since, by an instance starting now: the later writer wins).
    writeFileSync(path, mine)
  }
  kHeld.add(path)
  let released = false
  return {
    warning,
    release: () => {
      if (released) return
      released = true
      kHeld.delete(path)
      const now = owner(path)
      if (now?.pid === process.pid) rmSync(path, { force: true })
    }
  }
}
