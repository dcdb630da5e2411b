/**
 * The intel snapshot a fleet's leader publishes and its followers load (tables in src/store/fleet-schema.ts).
 *
 * A generation is the snapshot in its cache-file format (src/intel/cache.ts: magic, header, bytes), cut into chunks of
 * kChunkBytes, with the sha256 of the whole and a number one above the previous generation's. The leader writes it in
 * one transaction that also deletes every generation but the previous one (a follower still reading that one finishes)
 * and notifies `kIntelChannel` with `<schema>|<generation>`, delivered at commit. A follower reads the chunks with one
 * `COPY ... TO STDOUT (FORMAT binary)` (pg-copy-streams: the bytes as they are, where a SELECT sends bytea as hex text
 * that node-postgres parses row by row: 30 MB took it 1.3-4.5 s, COPY 0.6 s, on the 2-core development machine),
 * checks their count and length, the digest, the file's own header and that its version is the one the row names, and
 * only then hands the snapshot over: anything else is a FleetSnapshotError and the follower keeps what it serves.
 */
import { createHash } from 'node:crypto'
import type pg from 'pg'
import { to as copyTo } from 'pg-copy-streams'
import type { SnapshotData } from '../engine/index.ts'
import { FleetSnapshotError } from '../errors.ts'
import { decodeSnapshotFile, encodeSnapshotFile } from '../intel/index.ts'

/** The channel new generations are announced on (and a follower's request for a refresh). */
export const kIntelChannel = 'ioc_verdict_intel'
/** Bytes per chunk row. */
export const kChunkBytes = 1024 * 1024 // 1 MiB
/** Largest snapshot a follower accepts (a row claiming more is corrupt). */
const kMaxSnapshotBytes = 4 * 1024 * 1024 * 1024 // 4 GiB

/** A published generation's row. */
export interface Published {
  generation: number
  digest: Buffer
  bytes: number
  chunks: number
  version: string
  dataTimestamp: string
  publishedBy: string
  publishedAt: string
}

interface GenerationRow {
  generation: string
  digest: Buffer
  bytes: string
  chunks: number
  version: string
  data_timestamp: string
  published_by: string
  published_at: Date
}

function toPublished (r: GenerationRow): Published {
  return {
    generation: Number(r.generation),
    digest: r.digest,
    bytes: Number(r.bytes),
    chunks: r.chunks,
    version: r.version,
    dataTimestamp: r.data_timestamp,
    publishedBy: r.published_by,
    publishedAt: r.published_at.toISOString()
  }
}

/**
 * The newest generation published to the fleet of PostgreSQL schema `schema`, read and verified on a connection of its
 * own (the CLI's `retro-hunt run`), or null when none is published.
 */
export async function readLatestPublished (url: string, schema: string): Promise<{ data: SnapshotData, generation: number } | null> {
  const { default: Pg } = await import('pg')
  const client = new Pg.Client({ connectionString: url, application_name: 'ioc-verdict cli' })
  await client.connect()
  try {
    const pub = await latestGeneration(client, `"${schema}"`)
    return pub === null ? null : { data: await readSnapshot(client, `"${schema}"`, pub), generation: pub.generation }
  } finally {
    await client.end()
  }
}

/** What a query goes through: a pool or one client. */
export type Queryable = Pick<pg.ClientBase, 'query'>

/** The newest published generation, or null when none is. */
export async function latestGeneration (q: Queryable, s: string): Promise<Published | null> {
  const { rows } = await q.query<GenerationRow>(
    `SELECT generation, digest, bytes, chunks, version, data_timestamp, published_by, published_at FROM ${s}.intel_generations ORDER BY generation DESC LIMIT 1`)
  return rows[0] === undefined ? null : toPublished(rows[0])
}

/**
 * Publishes `data` as the next generation, on `client` (the leader's own session, which holds the leadership lock:
 * a leader that lost its session cannot publish). Returns the generation.
 */
export async function publishSnapshot (client: pg.ClientBase, s: string, schema: string, data: SnapshotData, by: string): Promise<Published> {
  const file = encodeSnapshotFile(data)
  const digest = createHash('sha256').update(file).digest()
  const chunks = Math.max(1, Math.ceil(file.length / kChunkBytes))
  await client.query('BEGIN')
  try {
    const { rows } = await client.query<{ g: string }>(`SELECT coalesce(max(generation), 0) + 1 AS g FROM ${s}.intel_generations`)
    const generation = Number(rows[0]?.g ?? 1)
    const publishedAt = new Date()
    await client.query(
      `INSERT INTO ${s}.intel_generations (generation, digest, bytes, chunks, version, data_timestamp, published_by, published_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [generation, digest, file.length, chunks, data.header.version, data.header.dataTimestamp, by, publishedAt])
    for (let i = 0; i < chunks; i++) {
      await client.query(`INSERT INTO ${s}.intel_chunks (generation, seq, data) VALUES ($1, $2, $3)`, [generation, i, file.subarray(i * kChunkBytes, (i + 1) * kChunkBytes)])
    }
    await client.query(`DELETE FROM ${s}.intel_generations WHERE generation < $1`, [generation - 1])
    await client.query('SELECT pg_notify($1, $2)', [kIntelChannel, `${schema}|${generation}`])
    await client.query('COMMIT')
    return { generation, digest, bytes: file.length, chunks, version: data.header.version, dataTimestamp: data.header.dataTimestamp, publishedBy: by, publishedAt: publishedAt.toISOString() }
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {})
    throw err
  }
}

/** The binary COPY signature, flags and header extension length (PostgreSQL's COPY docs, "Binary Format"). */
const kCopySignature = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1')
const kCopyHeadBytes = kCopySignature.length + 8

/** Reads and verifies a published generation; throws FleetSnapshotError when it is incomplete, altered or not a snapshot. */
export async function readSnapshot (client: pg.ClientBase, s: string, pub: Published): Promise<SnapshotData> {
  if (!Number.isSafeInteger(pub.bytes) || pub.bytes <= 0 || pub.bytes > kMaxSnapshotBytes || pub.chunks !== Math.max(1, Math.ceil(pub.bytes / kChunkBytes))) {
    throw new FleetSnapshotError(`generation ${pub.generation}: its row names ${pub.bytes} bytes in ${pub.chunks} chunks`)
  }
  // The generation is a number (from the row), so it is written into the statement as one.
  const stream = client.query(copyTo(`COPY (SELECT data FROM ${s}.intel_chunks WHERE generation = ${pub.generation} ORDER BY seq) TO STDOUT (FORMAT binary)`))
  const parts: Buffer[] = []
  let received = 0
  for await (const part of stream) {
    received += (part as Buffer).length
    // Rows carry 6 bytes each besides the data; anything much larger than the row claims is not this generation.
    if (received > pub.bytes + kCopyHeadBytes + 6 * pub.chunks + 2) throw new FleetSnapshotError(`generation ${pub.generation}: its chunks hold more than its row names`)
    parts.push(part as Buffer)
  }
  const copy = Buffer.concat(parts, received)
  if (copy.length < kCopyHeadBytes + 2 || !copy.subarray(0, kCopySignature.length).equals(kCopySignature)) throw new FleetSnapshotError(`generation ${pub.generation}: not a binary COPY answer`)
  const file = Buffer.allocUnsafe(pub.bytes)
  let at = kCopyHeadBytes + copy.readUInt32BE(kCopySignature.length + 4)
  let filled = 0
  for (let seq = 0; ; seq++) {
    const fields = copy.readInt16BE(at)
    at += 2
    if (fields === -1) {
      if (seq !== pub.chunks) throw new FleetSnapshotError(`generation ${pub.generation}: ${seq} chunks, not ${pub.chunks} (a newer generation replaced it, or one was deleted)`)
      break
    }
    const length = copy.readInt32BE(at)
    at += 4
    const expected = Math.min(kChunkBytes, pub.bytes - filled)
    if (fields !== 1 || seq >= pub.chunks || length !== expected || at + length > copy.length) {
      throw new FleetSnapshotError(`generation ${pub.generation}: chunk ${seq} holds ${length} bytes, not ${expected}`)
    }
    copy.copy(file, filled, at, at + length)
    filled += length
    at += length
  }
  if (!createHash('sha256').update(file).digest().equals(pub.digest)) throw new FleetSnapshotError(`generation ${pub.generation}: its bytes do not match its digest`)
  let data: SnapshotData
  try {
    data = decodeSnapshotFile(file)
  } catch (err) {
    throw new FleetSnapshotError(`generation ${pub.generation}: not a snapshot this version reads`, { cause: err })
  }
  if (data.header.version !== pub.version) throw new FleetSnapshotError(`generation ${pub.generation}: its snapshot is ${data.header.version}, its row names ${pub.version}`)
  return data
}
