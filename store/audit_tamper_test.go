package store_test

import (
	"crypto/ed25519"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

func appendN(t *testing.T, db *store.DB, tenant contract.TenantSlot, n int) {
	t.Helper()
	for i := range n {
		if _, err := db.Audit().Append(t.Context(), entry(tenant, "widgets.read", fmt.Sprint("w", i), map[string]any{"i": i})); err != nil {
			t.Fatal(err)
		}
	}
}

func wantBreak(t *testing.T, db *store.DB, opt audit.Options, words ...string) {
	t.Helper()
	rep, err := audit.VerifyWith(t.Context(), db.Audit(), opt)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Break == nil {
		t.Fatalf("no break found, want one naming %v", words)
	}
	for _, w := range words {
		if !strings.Contains(rep.Break.Error(), w) {
			t.Errorf("break %q does not name %q", rep.Break.Error(), w)
		}
	}
}

func wantWhole(t *testing.T, db *store.DB, opt audit.Options) audit.Report {
	t.Helper()
	rep, err := audit.VerifyWith(t.Context(), db.Audit(), opt)
	if err != nil || rep.Break != nil {
		t.Fatalf("verify: %v %v", rep.Break, err)
	}
	return rep
}

// The ways an audit trail could be silently rewritten or truncated, on both stores: a removed head (found
// from the records, then rebuilt by the next append, not a 500), the
// resource and at columns, a rewound head, and truncation against a signed
// checkpoint.
func TestAuditTamperCases(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		appendN(t, db, "slot-1", 5)
		appendN(t, db, "slot-2", 3)

		if _, err := db.Exec(ctx, `DELETE FROM audit_heads WHERE tenant = 'slot-1'`); err != nil {
			t.Fatal(err)
		}
		wantBreak(t, db, audit.Options{}, "slot-1", "no head row")
		appendN(t, db, "slot-1", 1) // rebuilt from the chain
		rep := wantWhole(t, db, audit.Options{})
		if rep.Records != 9 || rep.Tenants != 2 {
			t.Fatalf("after the rebuild: %+v", rep)
		}

		var id string
		if err := db.QueryRow(ctx, `SELECT id FROM audit_records WHERE tenant = 'slot-2' AND seq = 2`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `UPDATE audit_records SET resource = 'w-forged' WHERE id = ?`, id); err != nil {
			t.Fatal(err)
		}
		wantBreak(t, db, audit.Options{Tenants: []contract.TenantSlot{"slot-2"}}, "slot-2", id, "resource")
		if _, err := db.Exec(ctx, `UPDATE audit_records SET resource = 'w1', at = '2001-01-01T00:00:00Z' WHERE id = ?`, id); err != nil {
			t.Fatal(err)
		}
		wantBreak(t, db, audit.Options{Tenants: []contract.TenantSlot{"slot-2"}}, "slot-2", id, "column at")

		// Checkpoint slot-1, then cut its last two records and rewind its
		// head to match: whole alone, short of the checkpoint.
		seed := make([]byte, ed25519.SeedSize)
		key := ed25519.NewKeyFromSeed(seed)
		rep = wantWhole(t, db, audit.Options{Tenants: []contract.TenantSlot{"slot-1"}})
		cp, err := audit.Sign(key, rep.Ends, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `DELETE FROM audit_records WHERE tenant = 'slot-1' AND seq > 4`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `UPDATE audit_heads SET seq = 4, hash = (SELECT hash FROM audit_records WHERE tenant = 'slot-1' AND seq = 4) WHERE tenant = 'slot-1'`); err != nil {
			t.Fatal(err)
		}
		wantWhole(t, db, audit.Options{Tenants: []contract.TenantSlot{"slot-1"}})
		wantBreak(t, db, audit.Options{Tenants: []contract.TenantSlot{"slot-1"}, Checkpoint: &cp}, "slot-1", "checkpoint", cp.KeyID)

		// A head rewound by one without removing records.
		appendN(t, db, "slot-1", 2)
		if _, err := db.Exec(ctx, `UPDATE audit_heads SET seq = seq - 1 WHERE tenant = 'slot-1'`); err != nil {
			t.Fatal(err)
		}
		wantBreak(t, db, audit.Options{Tenants: []contract.TenantSlot{"slot-1"}}, "slot-1", "rewound")
	})
}
