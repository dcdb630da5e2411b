/**
 * Joins the workers' pre-encoded result items in request order into one response body.
 * The main thread copies bytes; it never builds or stringifies per-item objects.
 */
import { clientPackr } from '../pool/score-chunk.ts'
import type { Chunks } from './chunk.ts'

/** One shard's encoded items: back-to-back bytes and end offsets. */
export interface EncodedChunk { body: Uint8Array, ends: Uint32Array }

function itemBounds (c: EncodedChunk, p: number): [number, number] {
  return [p === 0 ? 0 : c.ends[p - 1] as number, c.ends[p] as number]
}

/** `{"meta":...,"results":[...]}` as JSON bytes. */
export function mergeJson (meta: object, chunks: Chunks, outputs: EncodedChunk[]): Buffer {
  const head = Buffer.from(`{"meta":${JSON.stringify(meta)},"results":[`)
  const n = chunks.shard.length
  let size = head.length + 2 + Math.max(0, n - 1)
  for (const o of outputs) size += o.body.length
  const out = Buffer.allocUnsafe(size)
  let off = head.copy(out, 0)
  for (let i = 0; i < n; i++) {
    if (i > 0) out[off++] = 0x2c // ,
    const c = outputs[chunks.shard[i] as number] as EncodedChunk
    const [a, b] = itemBounds(c, chunks.pos[i] as number)
    out.set(c.body.subarray(a, b), off)
    off += b - a
  }
  out[off++] = 0x5d // ]
  out[off++] = 0x7d // }
  return out
}

/** The same response as standard MessagePack: a 2-entry map whose results array is the items' bytes in order. */
export function mergeMsgpack (meta: object, chunks: Chunks, outputs: EncodedChunk[]): Buffer {
  const n = chunks.shard.length
  const head = Buffer.concat([
    Buffer.from([0x82]),
    Buffer.from(clientPackr.pack('meta')),
    Buffer.from(clientPackr.pack(meta)),
    Buffer.from(clientPackr.pack('results')),
    arrayHeader(n)
  ])
  let size = head.length
  for (const o of outputs) size += o.body.length
  const out = Buffer.allocUnsafe(size)
  let off = head.copy(out, 0)
  for (let i = 0; i < n; i++) {
    const c = outputs[chunks.shard[i] as number] as EncodedChunk
    const [a, b] = itemBounds(c, chunks.pos[i] as number)
    out.set(c.body.subarray(a, b), off)
    off += b - a
  }
  return out
}

/** MessagePack array header for n elements. @see https://github.com/msgpack/msgpack/blob/master/spec.md#array-format-family */
function arrayHeader (n: number): Buffer {
  if (n < 16) return Buffer.from([0x90 | n])
  if (n < 0x10000) return Buffer.from([0xdc, n >> 8, n & 0xff])
  const b = Buffer.alloc(5)
  b[0] = 0xdd
  b.writeUInt32BE(n, 1)
  return b
}
