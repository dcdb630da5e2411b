/**
 * The history writer's journal reader (src/history/journal-reader.ts): every frame the journal synced comes back once
 * and in order, across segment files and in batches of any bound, with frames of every size (read ahead in blocks or
 * not), and a frame damaged on disk is skipped with the rest of its segment, never misread.
 */
import assert from 'node:assert/strict'
import { closeSync, constants, mkdtempSync, openSync, readdirSync, readFileSync, readlinkSync, readSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { crc32 } from 'node:zlib'
import { test, type TestContext } from 'node:test'
import { decodeFrame, encodeFrame, fillStep, Journal, kFillByte, kFrameHead, listSegments, segmentName, validLength } from '../../src/history/journal.ts'
import { JournalReader, SharedDurable, type JournalFrame } from '../../src/history/journal-reader.ts'
import type { HistoryEnvelope } from '../../src/history/types.ts'

function journalDir (t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'iocv-journal-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

function envelope (i: number, count: number): HistoryEnvelope {
  return { request_id: `r-${i}`, count } as unknown as HistoryEnvelope
}

/** Frame i: one part of a size that varies from a few bytes to past the reader's 1 MiB read-ahead. */
function part (i: number): Uint8Array {
  const size = i % 17 === 0 ? (1 << 20) + 333 * i : 10 + (i * 37) % 3000
  return Buffer.alloc(size, i % 251)
}

/** A frame as the journal's header comment lays it out, built from the spec rather than by encodeFrame. */
function specFrame (env: HistoryEnvelope, parts: Uint8Array[]): Buffer {
  const u32 = (n: number): Buffer => { const b = Buffer.alloc(4); b.writeUInt32LE(n); return b }
  const text = Buffer.from(JSON.stringify(env))
  const payload = Buffer.concat([u32(text.length), text, u32(parts.length), ...parts.flatMap((p) => [u32(p.byteLength), p])])
  return Buffer.concat([u32(payload.length), u32(crc32(payload)), payload])
}

test('a frame has the same bytes whether its parts are copied into it (small) or written beside it', () => {
  const env = { request_id: 'r-ü', count: 3 } as unknown as HistoryEnvelope
  const cases: Uint8Array[][] = [
    [],
    [Buffer.alloc(300, 7)],
    [Buffer.alloc(1000, 1), Buffer.alloc(0), Buffer.alloc(3096, 2)], // 4,096 bytes in all: the largest copied
    [Buffer.alloc(1000, 1), Buffer.alloc(3097, 2)],
    [new Uint8Array(new ArrayBuffer(64), 16, 20).fill(9)],
    [Buffer.alloc(70_000, 3), Buffer.alloc(5, 4)]
  ]
  for (const parts of cases) {
    const frame = encodeFrame(env, parts)
    const bytes = Buffer.concat(frame.buffers)
    const want = specFrame(env, parts)
    assert.equal(frame.bytes, want.length)
    assert.ok(bytes.equals(want), `frame of parts ${parts.map((p) => p.byteLength).join('+')}`)
    const back = decodeFrame(bytes.subarray(kFrameHead))
    assert.deepEqual(back.envelope, env)
    assert.deepEqual(back.parts.map((p) => Buffer.from(p)), parts.map((p) => Buffer.from(p)))
  }
})

async function writeJournal (dir: string, frames: number, segmentBytes: number): Promise<number> {
  const journal = await Journal.open({ dir, limit: 1 << 30, segmentBytes, durability: 'sync', asyncWindowMs: 10, asyncWindowBytes: 1 << 20 })
  // Appended in groups of a few, as concurrent requests are.
  for (let i = 0; i < frames; i += 5) {
    await Promise.all(Array.from({ length: Math.min(5, frames - i) }, async (_, k) => await journal.append(envelope(i + k, 1 + (i + k) % 3), [part(i + k)], () => {})))
  }
  const end = journal.durable
  await journal.close()
  return end
}

function readAll (dir: string, until: number, maxRecords: number, maxBytes: number): { frames: JournalFrame[], skipped: number } {
  const reader = new JournalReader(dir)
  const frames: JournalFrame[] = []
  let skipped = 0
  let at = 0
  while (at < until) {
    const got = reader.read(at, until, maxRecords, maxBytes)
    assert.ok(got.next > at, 'each read moves on')
    frames.push(...got.frames)
    skipped += got.skipped
    at = got.next
  }
  reader.close()
  return { frames, skipped }
}

test('every synced frame reads back once, in order, across segments and at any batch bound', async (t) => {
  const dir = journalDir(t)
  const n = 120
  const end = await writeJournal(dir, n, 2 << 20)
  assert.ok(listSegments(dir).length > 3, 'several segment files')
  for (const [maxRecords, maxBytes] of [[1, 1 << 30], [7, 1 << 30], [1000, 5000], [1000, 1 << 30]] as const) {
    const { frames, skipped } = readAll(dir, end, maxRecords, maxBytes)
    assert.equal(skipped, 0)
    assert.equal(frames.length, n, `${maxRecords} records / ${maxBytes} bytes a batch`)
    frames.forEach((f, i) => {
      assert.equal(f.envelope.request_id, `r-${i}`)
      assert.equal(f.envelope.count, 1 + i % 3)
      assert.equal(f.parts.length, 1)
      assert.ok(Buffer.from(f.parts[0] as Uint8Array).equals(Buffer.from(part(i))), `part of frame ${i}`)
    })
  }
})

interface Damaged { dir: string, end: number, first: number, second: number, at: number, frames: JournalFrame[], skipped: number }

/** A journal of 60 frames over segments of 2 MiB, its first segment changed by `damage` (which gives the offset of the frame it damaged), read back. */
async function readDamaged (t: TestContext, damage: (bytes: Buffer) => number): Promise<Damaged> {
  const dir = journalDir(t)
  const end = await writeJournal(dir, 60, 2 << 20)
  const [first, second] = listSegments(dir)
  assert.ok(first !== undefined && second !== undefined)
  const file = join(dir, segmentName(first))
  const bytes = readFileSync(file)
  const at = damage(bytes)
  writeFileSync(file, bytes)
  return { dir, end, first, second, at, ...readAll(dir, end, 1000, 1 << 30) }
}

test('a frame damaged on disk is skipped with the rest of its segment; the next segment reads on', async (t) => {
  const { dir, end, first, second, at, frames, skipped } = await readDamaged(t, (bytes) => {
    // The third frame's payload: flip a byte (its CRC no longer matches).
    let at = 0
    for (let k = 0; k < 2; k++) at += 8 + bytes.readUInt32LE(at)
    bytes[at + 8 + 3] = (bytes[at + 8 + 3] as number) ^ 0xff
    return at
  })
  assert.deepEqual(frames.slice(0, 2).map((f) => f.envelope.request_id), ['r-0', 'r-1'])
  assert.equal(skipped, second - first - at)
  const firstOfSecond = frames[2]?.envelope.request_id
  const wholeSecond = readAll(dir, end, 1000, 1 << 30).frames.slice(2)
  assert.equal(wholeSecond[0]?.envelope.request_id, firstOfSecond)
  assert.ok(frames.length < 60 && frames.length > 2)
  // Nothing after the damaged frame in its segment, everything from the next segment on.
  const ids = frames.map((f) => Number(f.envelope.request_id.slice(2)))
  for (let i = 3; i < ids.length; i++) assert.equal(ids[i], (ids[i - 1] as number) + 1)
})

test('commit reports that arrive while the journal begins a new segment delete no frame the writer has not read', async (t) => {
  const dir = journalDir(t)
  // Every group write rotates, so commit reports keep arriving while a new file opens.
  const journal = await Journal.open({ dir, limit: 1 << 30, segmentBytes: 1, durability: 'sync', asyncWindowMs: 10, asyncWindowBytes: 1 << 20 })
  const reader = new JournalReader(dir)
  const n = 300
  const read: string[] = []
  let at = 0
  let skipped = 0
  const state = { writing: true }
  // The writer thread: reads one frame a turn, so it is still inside the segment of the last group (of several
  // frames) when that segment is closed, and reports each position it reached as committed, as its status messages do.
  const writer = (async () => {
    while (state.writing || at < journal.durable) {
      const got = reader.read(at, journal.durable, 1, 1 << 30)
      read.push(...got.frames.map((f) => f.envelope.request_id))
      skipped += got.skipped
      at = got.next
      journal.committed(at)
      await new Promise((resolve) => setImmediate(resolve))
    }
  })()
  // Groups of 10 frames, as requests that finish together share one write.
  for (let i = 0; i < n; i += 10) {
    await Promise.all(Array.from({ length: 10 }, async (_, k) => await journal.append(envelope(i + k, 1), [part(1)], () => {})))
  }
  state.writing = false
  await writer
  await journal.close()
  reader.close()
  assert.equal(skipped, 0)
  assert.deepEqual(read, Array.from({ length: n }, (_, i) => `r-${i}`))
})

test('the shared durable end: the writer is told once after it asks to be woken, and sees every end published', () => {
  const main = new SharedDurable()
  const writer = new SharedDurable(main.buffer)
  // Busy (a pass or a flush scheduled): ends are published without telling; the writer reads them.
  assert.equal(main.publish(100), false)
  assert.equal(main.publish(2 ** 40 + 7), false)
  assert.equal(writer.durable, 2 ** 40 + 7)
  // Idle: the next group tells it, once.
  writer.sleep()
  assert.equal(main.publish(2 ** 40 + 9), true)
  assert.equal(main.publish(2 ** 40 + 11), false)
  assert.equal(writer.durable, 2 ** 40 + 11)
  // A writer that takes its request back before any group came gets it back (and schedules a pass itself).
  writer.sleep()
  assert.equal(writer.wakeTaken(), true)
  assert.equal(main.publish(2 ** 40 + 12), false)
  // Once a group took the request, the writer's take finds nothing: the message is on its way.
  writer.sleep()
  assert.equal(main.publish(2 ** 40 + 13), true)
  assert.equal(writer.wakeTaken(), false)
})

/** The open-file flags (octal, from Linux's fdinfo) of this process's descriptors on `file`. */
function flagsOf (file: string): number[] {
  const out: number[] = []
  for (const fd of readdirSync('/proc/self/fd')) {
    let target = ''
    try {
      target = readlinkSync(`/proc/self/fd/${fd}`)
    } catch {
      continue // closed since the listing
    }
    if (target !== file) continue
    const flags = /^flags:\s+([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'))?.[1]
    if (flags !== undefined) out.push(Number.parseInt(flags, 8))
  }
  return out
}

test('a segment is written with O_DSYNC, so a group is synced by its write alone, after a rotation too', { skip: process.platform !== 'linux' }, async (t) => {
  const dir = journalDir(t)
  const journal = await Journal.open({ dir, limit: 1 << 30, segmentBytes: 4096, durability: 'sync', asyncWindowMs: 10, asyncWindowBytes: 1 << 20 })
  t.after(async () => { await journal.close() })
  const segment = (): string => join(dir, segmentName(listSegments(dir).at(-1) as number))
  const first = segment()
  assert.deepEqual(flagsOf(first).map((f) => (f & constants.O_DSYNC) !== 0), [true])
  // Past segmentBytes the journal begins a new segment file: it is opened the same way.
  await journal.append(envelope(0, 1), [Buffer.alloc(5000, 1)], () => {})
  await journal.settle() // the rotation follows the group's write
  const second = segment()
  assert.notEqual(second, first)
  const flags = flagsOf(second)
  assert.equal(flags.length, 1)
  assert.ok(((flags[0] as number) & constants.O_DSYNC) !== 0, 'O_DSYNC on the new segment')
  assert.equal((flags[0] as number) & constants.O_APPEND, 0, 'groups are written at their offsets, over the zeros ahead')
  await journal.append(envelope(1, 1), [Buffer.alloc(10, 2)], () => {})
  assert.ok(journal.durable > 5000)
})

/** The journal's segment files: name -> bytes. */
function segmentFiles (dir: string): Map<number, Buffer> {
  return new Map(listSegments(dir).map((start) => [start, readFileSync(join(dir, segmentName(start)))]))
}

test('a segment is filled ahead of its frames, frames go over the fill, and a restart cuts it off', async (t) => {
  const dir = journalDir(t)
  const options = { dir, limit: 1 << 30, segmentBytes: 1 << 20, durability: 'sync', asyncWindowMs: 10, asyncWindowBytes: 1 << 20, preallocateBytes: 16384 } as const
  let journal = await Journal.open(options)
  await journal.append(envelope(0, 1), [Buffer.alloc(100, 1)], () => {})
  await journal.settle()
  const first = listSegments(dir)[0] as number
  const file = join(dir, segmentName(first))
  assert.equal(statSync(file).size, 16384, 'the first 16 KiB written ahead')
  assert.ok(readFileSync(file).subarray(journal.durable - first).every((b) => b === kFillByte), 'fill after the frame')
  // Frames of 1-3 KiB in groups of five: fill is written ahead in 16 KiB steps while groups are written.
  let n = 1
  while (journal.durable - first < 200_000) {
    await Promise.all(Array.from({ length: 5 }, async (_, k) => await journal.append(envelope(n + k, 1), [Buffer.alloc(1000 + ((n + k) * 397) % 2000, (n + k) % 251)], () => {})))
    n += 5
    const size = statSync(file).size
    assert.ok(size >= journal.durable - first, 'the file holds every synced frame')
    assert.ok(size - (journal.durable - first) <= 16384 + 5 * 3100, 'at most one step ahead')
  }
  await journal.settle()
  const end = journal.durable
  await journal.close()
  const size = statSync(file).size
  assert.ok(size > end - first, 'fill after the last frame')
  assert.ok(readFileSync(file).subarray(end - first).every((b) => b === kFillByte))
  // The version before the fill scanned a segment by lengths and checksums only: it stops at the fill too.
  const fd = openSync(file, 'r')
  try {
    assert.equal(priorScan(fd, size), end - first)
  } finally {
    closeSync(fd)
  }
  const check = (until: number, count: number): void => {
    const { frames, skipped } = readAll(dir, until, 1000, 1 << 30)
    assert.equal(skipped, 0)
    assert.deepEqual(frames.map((f) => f.envelope.request_id), Array.from({ length: count }, (_, i) => `r-${i}`))
    frames.slice(1).forEach((f, i) => assert.ok(Buffer.from(f.parts[0] as Uint8Array).equals(Buffer.alloc(1000 + ((i + 1) * 397) % 2000, (i + 1) % 251)), `frame ${i + 1}`))
  }
  check(end, n)
  // A restart finds exactly the frames: the fill is cut off and the next segment begins after the last frame.
  journal = await Journal.open(options)
  assert.equal(journal.durable, end)
  assert.equal(statSync(file).size, end - first)
  await journal.append(envelope(n, 1), [Buffer.alloc(1000 + (n * 397) % 2000, n % 251)], () => {})
  const after = journal.durable
  await journal.close()
  assert.deepEqual(listSegments(dir), [first, end])
  check(after, n + 1)
})

test('without preallocation a segment holds its frames only', async (t) => {
  const dir = journalDir(t)
  const journal = await Journal.open({ dir, limit: 1 << 30, segmentBytes: 1 << 20, durability: 'sync', asyncWindowMs: 10, asyncWindowBytes: 1 << 20, preallocateBytes: 0 })
  for (let i = 0; i < 20; i++) await journal.append(envelope(i, 1), [Buffer.alloc(100 + i * 50, i)], () => {})
  const end = journal.durable
  await journal.close()
  const files = segmentFiles(dir)
  assert.equal(files.size, 1)
  assert.equal((files.get(0) as Buffer).length, end)
  assert.equal(readAll(dir, end, 1000, 1 << 30).frames.length, 20)
})

test('the frames of a segment end at zeros, at a torn frame, or at a short length', (t) => {
  const dir = journalDir(t)
  const frames = [0, 1, 2].map((i) => specFrame(envelope(i, 1), [part(i + 1)]))
  const whole = Buffer.concat(frames)
  const torn = specFrame(envelope(3, 1), [part(4)]).subarray(0, 40)
  const cases: Array<[string, Buffer, number]> = [
    ['frames only', whole, whole.length],
    ['frames, then fill', Buffer.concat([whole, Buffer.alloc(4096, kFillByte)]), whole.length],
    ['frames, then zeros', Buffer.concat([whole, Buffer.alloc(4096)]), whole.length],
    ['frames, a torn frame, then zeros', Buffer.concat([whole, torn, Buffer.alloc(4096)]), whole.length],
    ['zeros only', Buffer.alloc(4096), 0],
    // A header whose length is shorter than any payload (here 4, with the checksum of its 4 bytes) ends them too.
    ['a short frame', Buffer.concat([whole, Buffer.from([4, 0, 0, 0]), u32le(crc32(Buffer.alloc(4))), Buffer.alloc(4)]), whole.length]
  ]
  for (const [name, bytes, want] of cases) {
    const file = join(dir, name.replaceAll(/[^a-z]/g, '-'))
    writeFileSync(file, bytes)
    const fd = openSync(file, 'r')
    try {
      assert.equal(validLength(fd, bytes.length), want, name)
    } finally {
      closeSync(fd)
    }
  }
})

function u32le (n: number): Buffer {
  const b = Buffer.alloc(4)
  b.writeUInt32LE(n)
  return b
}

/** How the version before the fill found a segment's valid length: by lengths against the file's size and checksums. */
function priorScan (fd: number, size: number): number {
  const head = Buffer.alloc(kFrameHead)
  let pos = 0
  while (pos + kFrameHead <= size) {
    readSync(fd, head, 0, kFrameHead, pos)
    const len = head.readUInt32LE(0)
    if (pos + kFrameHead + len > size) break
    const body = Buffer.alloc(len)
    readSync(fd, body, 0, len, pos + kFrameHead)
    if (crc32(body) !== head.readUInt32LE(4)) break
    pos += kFrameHead + len
  }
  return pos
}

test('a new segment\'s first fill is small, and the fill grows in steps up to its most', async (t) => {
  const dir = journalDir(t)
  const journal = await Journal.open({ dir, limit: 1 << 30, segmentBytes: 64 << 20, durability: 'sync', asyncWindowMs: 10, asyncWindowBytes: 1 << 20 })
  t.after(async () => { await journal.close() })
  const file = join(dir, segmentName(0))
  await journal.append(envelope(0, 1), [Buffer.alloc(100, 1)], () => {})
  await journal.settle()
  assert.equal(statSync(file).size, 64 * 1024, 'a first group waits for 64 KiB of fill, not 4 MiB')
  // Then steps as large as the segment's allocated bytes (doubling), up to the most.
  const steps: number[] = []
  for (let allocated = 64 * 1024; allocated < 16 << 20; allocated += fillStep(allocated, 4 << 20)) steps.push(fillStep(allocated, 4 << 20))
  assert.deepEqual(steps.slice(0, 8).map((x) => x / 1024), [64, 128, 256, 512, 1024, 2048, 4096, 4096])
  assert.equal(fillStep(0, 4 << 20), 64 * 1024)
  assert.equal(fillStep(1 << 20, 16384), 16384, 'a most below the first step is every step')
})

test('zeros where a frame was, in an older segment, are skipped with the rest of it; nothing throws', async (t) => {
  const { first, second, at, frames, skipped } = await readDamaged(t, (bytes) => {
    const at = 8 + bytes.readUInt32LE(0) // the second frame
    bytes.fill(0, at, at + 400)
    return at
  })
  assert.equal(frames[0]?.envelope.request_id, 'r-0')
  assert.equal(skipped, second - first - at)
  const ids = frames.map((f) => Number(f.envelope.request_id.slice(2)))
  assert.ok(ids[1] !== undefined && ids[1] > 1, 'the next frame read is in the next segment')
  for (let i = 2; i < ids.length; i++) assert.equal(ids[i], (ids[i - 1] as number) + 1)
})
