package memory

import "github.com/caduceus-dev/caduceus/contract"

// The statements of Store on the memory tables (shimsql's migration
// 310_shim_memory, the edge's 0001_caduceus_edge), shared by the server's
// adapter (shim/shimsql) and the edge (edge): SQLite's and Postgres's
// common dialect, with ? placeholders. Times are microseconds since the
// epoch.

// TouchEntitySQL records one sighting of an entity in shim_entities: an
// upsert on (tenant, subject, project, kind, value) that inserts the row
// with hits 1, or adds 1 to hits and moves last_seen (first_seen kept).
// Its arguments are tenant, subject, project, kind, value, first_seen and
// last_seen.
const TouchEntitySQL = `INSERT INTO shim_entities (tenant, subject, project, kind, value, first_seen, last_seen, hits)
VALUES (?, ?, ?, ?, ?, ?, ?, 1)
ON CONFLICT (tenant, subject, project, kind, value) DO UPDATE SET hits = shim_entities.hits + 1, last_seen = excluded.last_seen`

// EntitiesQuery is the SELECT of Store.ListEntities on shim_entities and
// its arguments: a subject's entities in project ("" = every project),
// most recently seen first (ties by project, kind, value), at most limit.
// Its columns are project, kind, value, first_seen, last_seen and hits.
func EntitiesQuery(tenant contract.TenantSlot, subject, project string, limit int) (string, []any) {
	q, args := `SELECT project, kind, value, first_seen, last_seen, hits FROM shim_entities WHERE tenant = ? AND subject = ?`, []any{string(tenant), subject}
	if project != "" {
		q, args = q+` AND project = ?`, append(args, project)
	}
	return q + ` ORDER BY last_seen DESC, project, kind, value LIMIT ?`, append(args, int64(limit))
}

// AddOutcomeSQL inserts a pending fired provision into shim_outcomes, with
// no error signature, next receipt or resolution; a row already at its
// (tenant, receipt, provision) is left as it is. Its arguments are tenant,
// receipt, provision, conversation, subject, project, version, builtin
// (0 or 1), outcome (OutcomePending) and fired_at.
const AddOutcomeSQL = `INSERT INTO shim_outcomes (tenant, receipt, provision, conversation, subject, project, version, builtin,
outcome, error_signature, next_receipt, fired_at, resolved_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, '', '', ?, 0) ON CONFLICT DO NOTHING`

// ResolveOutcomesSQL resolves a conversation's pending rows of
// shim_outcomes but those of one receipt, in one conditional UPDATE. Its
// arguments are the new outcome, error_signature, next_receipt and
// resolved_at, then tenant, conversation, the pending outcome
// (OutcomePending) and the receipt left pending.
const ResolveOutcomesSQL = `UPDATE shim_outcomes SET outcome = ?, error_signature = ?, next_receipt = ?, resolved_at = ?
WHERE tenant = ? AND conversation = ? AND outcome = ? AND receipt <> ?`

// OutcomesQuery is the SELECT of Store.ListOutcomes on shim_outcomes and
// its arguments: the tenant's outcomes, of one subject ("" = every
// subject), newest receipt first (ties by provision), at most limit. Its
// columns are receipt, provision, conversation, subject, project, version,
// builtin, outcome, error_signature, next_receipt, fired_at and
// resolved_at (0 while pending).
func OutcomesQuery(tenant contract.TenantSlot, subject string, limit int) (string, []any) {
	q, args := `SELECT receipt, provision, conversation, subject, project, version, builtin, outcome, error_signature, next_receipt, fired_at, resolved_at
FROM shim_outcomes WHERE tenant = ?`, []any{string(tenant)}
	if subject != "" {
		q, args = q+` AND subject = ?`, append(args, subject)
	}
	return q + ` ORDER BY receipt DESC, provision LIMIT ?`, append(args, int64(limit))
}

// GetSyncMarkSQL reads a record's mark in shim_sync_marks
// (shim.SyncLedger). Its arguments are tenant, kind and id; its columns are
// source_version and local_version.
const GetSyncMarkSQL = `SELECT source_version, local_version FROM shim_sync_marks WHERE tenant = ? AND kind = ? AND id = ?`

// PutSyncMarkSQL stores a record's mark in shim_sync_marks
// (shim.SyncLedger): an upsert on (tenant, kind, id) that replaces both
// versions. Its arguments are tenant, kind, id, source_version and
// local_version.
const PutSyncMarkSQL = `INSERT INTO shim_sync_marks (tenant, kind, id, source_version, local_version) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (tenant, kind, id) DO UPDATE SET source_version = excluded.source_version, local_version = excluded.local_version`
