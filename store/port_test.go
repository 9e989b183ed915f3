package store_test

import (
	"testing"

	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/port"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// The store answers the port as D1 does: a statement's changes, rows whose
// integers and texts Row reads, a batch that commits all or nothing, and a
// unique violation that port.Unique recognises with the driver's text kept.
func TestPort(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx, p := t.Context(), db.Port()
		ins := `INSERT INTO idempotency (tenant, scope, key, body_hash, created_at) VALUES (?, ?, ?, ?, ?)`
		n, err := p.Exec(ctx, ins, "slot-1", "s", "k1", "h", int64(1<<52+3))
		if err != nil || n != 1 {
			t.Fatalf("exec: %d %v", n, err)
		}
		_, err = p.Exec(ctx, ins, "slot-1", "s", "k1", "h", int64(1))
		if !port.Unique(err) || err.Error() == port.ErrUnique.Error() {
			t.Fatalf("a second k1: %v (want port.ErrUnique with the driver's text)", err)
		}
		err = p.Batch(ctx, []port.Statement{
			{SQL: ins, Args: []any{"slot-1", "s", "k2", "h", int64(2)}},
			{SQL: ins, Args: []any{"slot-1", "s", "k1", "h", int64(3)}},
		})
		if !port.Unique(err) {
			t.Fatalf("batch with a second k1: %v", err)
		}
		rows, err := p.Query(ctx, `SELECT key, created_at, result FROM idempotency WHERE tenant = ? ORDER BY key`, "slot-1")
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0].Str(0) != "k1" || rows[0].Int(1) != 1<<52+3 || !rows[0].Null(2) {
			t.Fatalf("rows after the failed batch (k2 must not be there): %v", rows)
		}
		if err := p.Batch(ctx, []port.Statement{
			{SQL: ins, Args: []any{"slot-1", "s", "k2", "h", int64(2)}},
			{SQL: `UPDATE idempotency SET result = ? WHERE key = ?`, Args: []any{"done", "k2"}},
		}); err != nil {
			t.Fatal(err)
		}
		r, found, err := port.One(ctx, p, `SELECT result FROM idempotency WHERE key = ?`, "k2")
		if err != nil || !found || r.Str(0) != "done" {
			t.Fatalf("k2 after its batch: %v %v %v", r, found, err)
		}
		if _, found, err := port.One(ctx, p, `SELECT 1 FROM idempotency WHERE key = ?`, "none"); found || err != nil {
			t.Fatalf("One of nothing: %v %v", found, err)
		}
	})
}
