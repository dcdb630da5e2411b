/**
 * One SharedArrayBuffer holding every typed array of a snapshot, with a JSON section table.
 * The same bytes are what the disk cache writes, so a warm start is one read and one copy.
 */

/** Typed-array kinds a section may hold. */
export type SectionKind = 'u32' | 'u16' | 'u8'

/** Where one section lives in the shared buffer. */
export interface SectionInfo { kind: SectionKind, offset: number, length: number }

const kBytes: Record<SectionKind, number> = { u32: 4, u16: 2, u8: 1 }

/** A section to lay out: its name, element kind and element count. */
export interface SectionSpec { name: string, kind: SectionKind, length: number }

/**
 * Lays out sections in the given order and allocates the zeroed shared buffer that holds them, so a compiler can
 * write each section in place (through view()) instead of building it elsewhere and copying it in.
 */
export function allocateSections (specs: readonly SectionSpec[]): { buffer: SharedArrayBuffer, table: Record<string, SectionInfo> } {
  // A plain object, as the table is after a JSON round trip (disk cache) or a structured clone (worker threads):
  // a compiled and a loaded snapshot have the same header.
  const table: Record<string, SectionInfo> = {}
  let size = 0
  for (const { name, kind, length } of specs) {
    // 8-byte alignment keeps every view valid whatever the section before it.
    size = (size + 7) & ~7
    table[name] = { kind, offset: size, length }
    size += length * kBytes[kind]
  }
  return { buffer: new SharedArrayBuffer(Math.max(8, (size + 7) & ~7)), table }
}

/** The kind of a typed array. */
function kindOf (arr: Uint32Array | Uint16Array | Uint8Array): SectionKind {
  return arr instanceof Uint32Array ? 'u32' : arr instanceof Uint16Array ? 'u16' : 'u8'
}

/** Builds the shared buffer from named typed arrays (each copied once). */
export function packSections (sections: Record<string, Uint32Array | Uint16Array | Uint8Array>): { buffer: SharedArrayBuffer, table: Record<string, SectionInfo> } {
  const { buffer, table } = allocateSections(Object.entries(sections).map(([name, arr]) => ({ name, kind: kindOf(arr), length: arr.length })))
  const bytes = new Uint8Array(buffer)
  for (const [name, arr] of Object.entries(sections)) {
    bytes.set(new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength), (table[name] as SectionInfo).offset)
  }
  return { buffer, table }
}

/** Views one section of a shared buffer (no copy). */
export function view<K extends SectionKind> (buffer: SharedArrayBuffer, table: Record<string, SectionInfo>, name: string, kind: K):
K extends 'u32' ? Uint32Array : K extends 'u16' ? Uint16Array : Uint8Array {
  const info = Object.hasOwn(table, name) ? table[name] : undefined
  if (info === undefined || info.kind !== kind) throw new Error(`snapshot section ${name} is missing or of the wrong kind`)
  if (info.offset + info.length * kBytes[kind] > buffer.byteLength) throw new Error(`snapshot section ${name} is out of bounds`)
  const Ctor = kind === 'u32' ? Uint32Array : kind === 'u16' ? Uint16Array : Uint8Array
  return new Ctor(buffer as unknown as ArrayBuffer, info.offset, info.length) as never
}
