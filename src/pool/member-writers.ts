/**
 * The engine's MemberWriter (engine/context.ts) as bytes: a verdict's threat_context written straight into a chunk's
 * byte sink in JSON (the text JSON.stringify gives of the same object) or in MessagePack (what clientPackr packs of
 * it), from precompiled key bytes and, per fact group (an AS number and its organisation, a country, the empty
 * listing), bytes written once per thread and copied afterwards. test/pool/answer-writers.test.ts holds both to
 * JSON.stringify and clientPackr over every profile's answers.
 */
import { kContextKeys, type MemberWriter } from '../engine/context.ts'
import type { ByteSink } from '../bytes/byte-sink.ts'
import { KeptBytes } from '../bytes/kept-bytes.ts'
import { clientPackr, packHeader, packNumber, writePackedString } from './bulk-item.ts'

/**
 * Fact groups kept per writer at most, and their bytes in all (a group is an AS number and its organisation, a
 * country and its name: tens of bytes); past either the kept bytes are dropped and written again as they come.
 */
const kMaxGroups = 16_384
const kMaxGroupBytes = 2 << 20
const kNullBytes = Buffer.from('null')
const kTrueBytes = Buffer.from('true')
const kFalseBytes = Buffer.from('false')

/** Writes the decimal digits of a non-negative integer below 2^32. */
function writeUint (sink: ByteSink, n: number): void {
  sink.reserve(10)
  const buf = sink.buf
  let p = sink.len
  if (n === 0) {
    buf[p] = 0x30
    sink.len = p + 1
    return
  }
  let digits = 0
  for (let x = n; x > 0; x = (x / 10) >>> 0) digits++
  p += digits
  sink.len = p
  for (let x = n; x > 0; x = (x / 10) >>> 0) buf[--p] = 0x30 + (x % 10)
}

/** Writes an IPv4 address (uint32) in dotted decimal. */
function writeV4 (sink: ByteSink, w: number): void {
  writeUint(sink, w >>> 24)
  sink.byte(0x2e)
  writeUint(sink, (w >>> 16) & 255)
  sink.byte(0x2e)
  writeUint(sink, (w >>> 8) & 255)
  sink.byte(0x2e)
  writeUint(sink, w & 255)
}

/** JSON members: the text JSON.stringify writes of the object the same calls build. */
export class JsonMembers implements MemberWriter {
  sink: ByteSink
  /** No member written yet in the current object (no comma before the next). */
  private first = true
  private mark = 0
  /** `"name":` of each member name, by its number. */
  private readonly keys = kContextKeys.map((name) => Buffer.from(`${JSON.stringify(name)}:`))
  private readonly groups = new KeptBytes(kMaxGroups, kMaxGroupBytes)

  constructor (sink: ByteSink) {
    this.sink = sink
  }

  open (): void {
    this.sink.byte(0x7b)
    this.first = true
  }

  key (id: number): void {
    if (!this.first) this.sink.byte(0x2c)
    this.first = false
    this.sink.bytes(this.keys[id] as Buffer)
  }

  str (s: string | null): void {
    if (s === null) this.sink.bytes(kNullBytes)
    else this.sink.jsonString(s)
  }

  num (n: number): void {
    if (n >>> 0 === n) writeUint(this.sink, n)
    else this.sink.text(JSON.stringify(n))
  }

  bool (b: boolean): void {
    this.sink.bytes(b ? kTrueBytes : kFalseBytes)
  }

  strs (list: readonly string[]): void {
    const sink = this.sink
    sink.byte(0x5b)
    for (let i = 0; i < list.length; i++) {
      if (i > 0) sink.byte(0x2c)
      sink.jsonString(list[i] as string)
    }
    sink.byte(0x5d)
  }

  v4Range (first: number, last: number): void {
    this.sink.byte(0x22)
    writeV4(this.sink, first)
    this.sink.byte(0x2d)
    writeV4(this.sink, last)
    this.sink.byte(0x22)
  }

  close (): void {
    this.sink.byte(0x7d)
    this.first = false
  }

  /** A group's bytes never start with a comma: the writer puts one before them when they follow another member. */
  reuse (group: number): boolean {
    if (!this.first) this.sink.byte(0x2c)
    if (this.groups.copyTo(group, this.sink)) {
      this.first = false
      return true
    }
    this.mark = this.sink.len
    this.first = true
    return false
  }

  keep (group: number): void {
    this.groups.keep(group, this.sink, this.mark)
  }
}

/** MessagePack members: what clientPackr packs of the object the same calls build (a map header, then the pairs). */
export class PackedMembers implements MemberWriter {
  sink: ByteSink
  private mark = 0
  /** Each member name packed, by its number. */
  private readonly keys = kContextKeys.map((name) => new Uint8Array(clientPackr.pack(name)))
  private readonly groups = new KeptBytes(kMaxGroups, kMaxGroupBytes)

  constructor (sink: ByteSink) {
    this.sink = sink
  }

  open (members: number): void {
    packHeader(this.sink, members, 0x80, 0xde, 0xdf)
  }

  key (id: number): void {
    this.sink.bytes(this.keys[id] as Uint8Array)
  }

  str (s: string | null): void {
    if (s === null) this.sink.byte(0xc0)
    else writePackedString(this.sink, s)
  }

  num (n: number): void {
    packNumber(this.sink, n)
  }

  bool (b: boolean): void {
    this.sink.byte(b ? 0xc3 : 0xc2)
  }

  strs (list: readonly string[]): void {
    packHeader(this.sink, list.length, 0x90, 0xdc, 0xdd)
    for (let i = 0; i < list.length; i++) writePackedString(this.sink, list[i] as string)
  }

  /** At most 31 characters (`255.255.255.255-255.255.255.255`): a fixstr, whose header is known once it is written. */
  v4Range (first: number, last: number): void {
    const sink = this.sink
    const at = sink.len
    sink.byte(0xa0)
    writeV4(sink, first)
    sink.byte(0x2d)
    writeV4(sink, last)
    sink.buf[at] = 0xa0 | (sink.len - at - 1)
  }

  close (): void {}

  reuse (group: number): boolean {
    if (this.groups.copyTo(group, this.sink)) return true
    this.mark = this.sink.len
    return false
  }

  keep (group: number): void {
    this.groups.keep(group, this.sink, this.mark)
  }
}
