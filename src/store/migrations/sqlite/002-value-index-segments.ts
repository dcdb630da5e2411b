/**
 * SQLite schema version 2: the indicator_value index is clustered by segment of item ids (docs/OPERATIONS.md,
 * "Durability of history"). Keyed by value alone, every insert landed on a random leaf page: a batch dirtied about one
 * page per row, and SQLite's WAL writes whole pages, so ingest slowed as the table grew. Keyed by (tenant, segment,
 * value), a batch writes into the newest segment's small, hot part of the index. A value search reads one range per
 * segment (newest first, see searchBySegment) with the segment's date bounds from history_segments.
 */
import { MAX_INDEXED_CHARS } from '../../../history/rows.ts'
import type { SqliteMigration } from './index.ts'

/**
 * Item ids per segment of the indicator_value index, as a shift: 65,536 items. Small enough that a batch's index
 * inserts share pages (the segment's part of the index stays in the page cache), large enough that a value search
 * reads few ranges: one per 65,536 records kept at most.
 */
const kSegmentShift = 16

const migration: SqliteMigration = `
  DROP INDEX history_tenant_ivalue;
  CREATE INDEX history_tenant_seg_ivalue ON history (tenant, id >> ${kSegmentShift}, substr(indicator_value, 1, ${MAX_INDEXED_CHARS}), ts, id);
  -- Date bounds of each segment's items: ts of every item in the segment lies in [min_ts, max_ts]. Writers widen
  -- them; purge only deletes the rows of segments left empty, so bounds may be wider than the items, never narrower.
  CREATE TABLE history_segments (
    seg INTEGER PRIMARY KEY,               -- history.id >> ${kSegmentShift}
    min_ts INTEGER NOT NULL,
    max_ts INTEGER NOT NULL
  ) STRICT;
  INSERT INTO history_segments (seg, min_ts, max_ts) SELECT id >> ${kSegmentShift}, min(ts), max(ts) FROM history GROUP BY 1;
  `

export default migration
