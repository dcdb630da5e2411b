/**
 * Tenant allowlists (docs/API.md "Tenant allowlist"): entry ids sort by creation time.
 */
import { SortableIds } from './sortable-id.ts'

/** Allowlist entry ids (`al_...`) and listing cursors. */
export const kAllowIds = new SortableIds('al')
