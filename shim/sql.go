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
