/**
 * A file of named typed-array sections under a JSON header: the container of the compiler's per-source part files.
 * The sections are written one after the other (no concatenated copy of the whole file in memory) and read back as
 * views on the one buffer the file is read into.
 *
 * | offset     | size | field                                                                   |
 * |------------|------|-------------------------------------------------------------------------|
 * | 0          | 8    | magic (8 ASCII bytes, one per kind of file)                             |
 * | 8          | 4    | header length H, uint32 LE                                              |
 * | 12         | H    | header JSON: the caller's fields plus `sections` {name: kind/offset/length} |
 * | 12 + H     | pad  | zeros up to a multiple of 8 (D = start of data)                         |
 * | D + offset | ...  | each section's bytes, 8-aligned, in the order given                     |
 */
import { open, readFile, rename, rm } from 'node:fs/promises'
import type { SectionInfo, SectionKind } from '../engine/snapshot/layout.ts'

const kBytes: Record<SectionKind, number> = { u32: 4, u16: 2, u8: 1 }
type Section = Uint32Array | Uint16Array | Uint8Array

function kindOf (arr: Section): SectionKind {
  return arr instanceof Uint32Array ? 'u32' : arr instanceof Uint16Array ? 'u16' : 'u8'
}

/** Writes `sections` under `header` to `path` atomically (a temp file beside it, then rename). */
export async function writeSectionFile (path: string, magic: string, header: object, sections: Record<string, Section>): Promise<void> {
  const table: Record<string, SectionInfo> = {}
  let size = 0
  for (const [name, arr] of Object.entries(sections)) {
    size = (size + 7) & ~7
    table[name] = { kind: kindOf(arr), offset: size, length: arr.length }
    size += arr.byteLength
  }
  const json = Buffer.from(JSON.stringify({ ...header, sections: table }), 'utf8')
  const head = Buffer.alloc(12)
  head.write(magic, 0, 8, 'latin1')
  head.writeUInt32LE(json.length, 8)
  const dataStart = (12 + json.length + 7) & ~7
  const tmp = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`
  const fh = await open(tmp, 'w')
  try {
    await fh.write(head, 0, head.length, 0)
    await fh.write(json, 0, json.length, 12)
    for (const [name, arr] of Object.entries(sections)) {
      if (arr.byteLength === 0) continue
      await fh.write(new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength), 0, arr.byteLength, dataStart + (table[name] as SectionInfo).offset)
    }
    // An empty last section still counts: the file runs to the end of the data.
    await fh.truncate(dataStart + size)
    await fh.close()
    await rename(tmp, path)
  } catch (err) {
    await fh.close().catch(() => {})
    await rm(tmp, { force: true })
    throw err
  }
}

/** A section file read back: its header (without `sections`) and a view of each section. */
export interface SectionFile<H> {
  header: H
  sections: Record<string, Section>
}

/** Reads a section file; throws when it is missing, of another magic, truncated or inconsistent. */
export async function readSectionFile<H> (path: string, magic: string): Promise<SectionFile<H>> {
  let file = await readFile(path)
  if (file.length < 12 || file.toString('latin1', 0, 8) !== magic) throw new Error('not a section file of this kind')
  // Views need an aligned start; a buffer from readFile normally starts its own allocation.
  if (file.byteOffset % 8 !== 0) file = Buffer.from(file)
  const len = file.readUInt32LE(8)
  if (12 + len > file.length) throw new Error('section file is truncated')
  const doc = JSON.parse(file.toString('utf8', 12, 12 + len)) as H & { sections: Record<string, SectionInfo> }
  const dataStart = (12 + len + 7) & ~7
  // No prototype: a damaged header's key cannot reach Object.prototype.
  const sections = Object.create(null) as Record<string, Section>
  for (const [name, info] of Object.entries(doc.sections)) {
    const bytes = kBytes[info.kind]
    if (bytes === undefined || !Number.isSafeInteger(info.offset) || !Number.isSafeInteger(info.length) || info.offset % 8 !== 0 ||
      dataStart + info.offset + info.length * bytes > file.length) throw new Error('section file is truncated or inconsistent')
    const Ctor = info.kind === 'u32' ? Uint32Array : info.kind === 'u16' ? Uint16Array : Uint8Array
    sections[name] = new Ctor(file.buffer, file.byteOffset + dataStart + info.offset, info.length)
  }
  const { sections: _sections, ...header } = doc
  return { header: header as H, sections }
}
