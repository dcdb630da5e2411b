/**
 * Reads one member of a zip archive held in memory (a feed served as a `.zip`, e.g. abuse.ch full exports), with yauzl:
 * a maintained reader that follows the central directory (as the zip format says to, unlike a scan of local headers),
 * inflates with node's zlib and checks each member's declared size against what inflating actually gives.
 *
 * Zip bombs: a member whose declared uncompressed size is over the cap is refused before inflating, and the bytes
 * inflated are counted as they stream, so a member that lies about its size is stopped at the cap too.
 * @see https://pkware.cachefly.net/webdocs/casestudies/APPNOTE.TXT
 */
import { fromBufferPromise, type Entry, type ZipFile } from 'yauzl'
import { ZipError } from '../errors.ts'

/** Local file header signature `PK\3\4`; an empty archive starts with the end record `PK\5\6`. */
const kZipMagic = [0x50, 0x4b]

/** Whether `body` starts like a zip archive. */
export function isZip (body: Uint8Array): boolean {
  return body.length >= 4 && body[0] === kZipMagic[0] && body[1] === kZipMagic[1] &&
    ((body[2] === 3 && body[3] === 4) || (body[2] === 5 && body[3] === 6))
}

/** Member names are shown in errors: cut and stripped of control characters. */
function shown (name: string): string {
  return JSON.stringify(name.replace(/\p{Cc}/gu, '?').slice(0, 80))
}

async function open (zip: Buffer): Promise<ZipFile> {
  try {
    return await fromBufferPromise(zip, { lazyEntries: true, validateEntrySizes: true, strictFileNames: false, decodeStrings: true })
  } catch {
    throw new ZipError('bad_zip', 'body is not a valid zip archive')
  }
}

/** Every file entry of the archive (directories left out). */
async function fileEntries (file: ZipFile): Promise<Entry[]> {
  const out: Entry[] = []
  try {
    await new Promise<void>((resolve, reject) => {
      file.on('entry', (entry: Entry) => {
        if (!entry.fileName.endsWith('/')) out.push(entry)
        file.readEntry()
      })
      file.once('end', resolve)
      file.once('error', reject)
      file.readEntry()
    })
  } catch {
    throw new ZipError('bad_zip', 'body is not a valid zip archive')
  }
  return out
}

/**
 * The bytes of one member of `zip`: the one named `member`, or the only file when `member` is null. Throws ZipError
 * when the archive is invalid, the member is missing or ambiguous, encrypted or of an unsupported method, or inflates
 * to more than `maxBytes`.
 */
export async function readZipMember (zip: Buffer, member: string | null, maxBytes: number): Promise<Buffer> {
  const file = await open(zip)
  try {
    const entries = await fileEntries(file)
    let entry: Entry | undefined
    if (member === null) {
      if (entries.length !== 1) {
        throw new ZipError('zip_member', `zip archive holds ${entries.length} files; name the one to read with "zip_member"`)
      }
      entry = entries[0]
    } else {
      entry = entries.find((e) => e.fileName === member)
      if (entry === undefined) throw new ZipError('zip_member', `zip archive has no member ${shown(member)}`)
    }
    const found = entry as Entry
    if (!found.canDecodeFileData()) {
      throw new ZipError('bad_zip', `zip member ${shown(found.fileName)} is encrypted or uses an unsupported compression method`)
    }
    if (found.uncompressedSize > maxBytes) {
      throw new ZipError('oversize', `zip member ${shown(found.fileName)} is larger than max_bytes (${maxBytes}) uncompressed`)
    }
    return await inflate(file, found, maxBytes)
  } finally {
    file.close()
  }
}

/** Streams one member out, counting bytes against the cap (yauzl also fails a member that exceeds its declared size). */
async function inflate (file: ZipFile, entry: Entry, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = []
  let total = 0
  try {
    const stream = await file.openReadStreamPromise(entry)
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      total += chunk.length
      if (total > maxBytes) {
        stream.destroy()
        throw new ZipError('oversize', `zip member ${shown(entry.fileName)} is larger than max_bytes (${maxBytes}) uncompressed`)
      }
      chunks.push(chunk)
    }
  } catch (err) {
    if (err instanceof ZipError) throw err
    throw new ZipError('bad_zip', `zip member ${shown(entry.fileName)} could not be inflated (corrupt or not the size it declares)`)
  }
  return Buffer.concat(chunks, total)
}
