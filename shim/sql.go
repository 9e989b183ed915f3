package shim

import "github.com/caduceus-dev/caduceus/contract"

// The statements of Store on the shim gate's tables (shimsql's migrations
// 300_shim and 360_shim_receipts_response, the edge's 0001_caduceus_edge),
// shared by the server's adapter (shim/shimsql) and the edge (edge):
// SQLite's and Postgres's common dialect, with ? placeholders.

// MarkShimmedSQL records in shim_ledger that a provision was shimmed into
// a conversation: an insert that does nothing when the (tenant,
// conversation, provision) mark is there, so it changes one row only for
// the first mark. Its arguments are tenant, conversation, provision,
// version and at (microseconds since the epoch).
const MarkShimmedSQL = `INSERT INTO shim_ledger (tenant, conversation, provision, version, at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`

// ReceiptOfResponseSQL selects from shim_receipts the document of the
// newest receipt whose client got the Responses API answer response_id
// (Store.ReceiptOfResponse). Its arguments are tenant and response_id.
const ReceiptOfResponseSQL = `SELECT doc FROM shim_receipts WHERE tenant = ? AND response_id = ? ORDER BY id DESC LIMIT 1`

// ReceiptsQuery is the SELECT of Store.ListReceipts on shim_receipts and
// its arguments: the tenant's receipt documents newest first, only those
// with an id below before when before is not empty, at most limit of them
// (50 when limit is not positive). Its one column is doc.
func ReceiptsQuery(tenant contract.TenantSlot, limit int, before string) (string, []any) {
	if limit <= 0 {
		limit = 50
	}
	q, args := `SELECT doc FROM shim_receipts WHERE tenant = ?`, []any{string(tenant)}
	if before != "" {
		q, args = q+` AND id < ?`, append(args, before)
	}
	return q + ` ORDER BY id DESC LIMIT ?`, append(args, int64(limit))
}

// DocTable is one of Store's CAS-versioned document tables: each row a
// JSON document (doc) under (tenant, Key) with a version column, which
// create sets to 1 and each update raises by one.
type DocTable struct {
	Name string // the table
	Key  string // its key column after tenant
	What string // what a row is, in messages
}

// The document tables of Store.
var (
	ProvisionTable = DocTable{"shim_provisions", "id", "provision"}
	ContextTable   = DocTable{"shim_context", "ref", "context entry"}
)

// GetSQL selects a document and its version. Its arguments are tenant and
// the key; its columns are doc and version.
func (t DocTable) GetSQL() string {
	return `SELECT doc, version FROM ` + t.Name + ` WHERE tenant = ? AND ` + t.Key + ` = ?`
}

// ListSQL selects a tenant's documents and their versions in key order.
// Its argument is tenant; its columns are doc and version.
func (t DocTable) ListSQL() string {
	return `SELECT doc, version FROM ` + t.Name + ` WHERE tenant = ? ORDER BY ` + t.Key
}

// InsertSQL inserts a document at version 1; the (tenant, key) primary key
// refuses a second. Its arguments are tenant, the key, doc and updated_at
// (microseconds since the epoch).
func (t DocTable) InsertSQL() string {
	return `INSERT INTO ` + t.Name + ` (tenant, ` + t.Key + `, version, doc, updated_at) VALUES (?, ?, 1, ?, ?)`
}

// UpdateSQL replaces a document and raises its version by one if its
// version is the one given, and changes no row otherwise. Its arguments
// are doc, updated_at, tenant, the key and that version.
func (t DocTable) UpdateSQL() string {
	return `UPDATE ` + t.Name + ` SET doc = ?, version = version + 1, updated_at = ? WHERE tenant = ? AND ` + t.Key + ` = ? AND version = ?`
}

// DeleteSQL deletes a document if its version is the one given, and
// changes no row otherwise. Its arguments are tenant, the key and that
// version.
func (t DocTable) DeleteSQL() string {
	return `DELETE FROM ` + t.Name + ` WHERE tenant = ? AND ` + t.Key + ` = ? AND version = ?`
}
