package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// BenchmarkAuditAppend appends records with a small payload to one tenant's
// chain on SQLite, one transaction per record (the server's per-request path).
func BenchmarkAuditAppend(b *testing.B) {
	db := storetest.OpenSQLite(b)
	log := db.Audit()
	ctx := context.Background()
	e := entry("slot-1", "keys.list", "keys", map[string]any{"route": "GET /v1/admin/keys", "status": 200})
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := log.Append(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkAuditVerify recomputes a 20,000-record chain from SQLite.
func BenchmarkAuditVerify(b *testing.B) {
	db := storetest.OpenSQLite(b)
	ctx := context.Background()
	const n = 20000
	err := db.InTx(ctx, func(tx *storeTx) error {
		for i := range n {
			if _, err := appendAudit(ctx, tx, entry("slot-1", "trader.apply", fmt.Sprint("strategy/", i), map[string]any{"i": i, "status": "applied", "warnings": []string{}})); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		rep, err := audit.Verify(ctx, db.Audit(), nil)
		if err != nil || rep.Break != nil || rep.Records != n {
			b.Fatalf("%+v %v", rep, err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkKeyVerify checks a token: "uncached" reads the key from SQLite
// every time, "cached" is the server's configuration (DefaultCacheTTL).
func BenchmarkKeyVerify(b *testing.B) {
	db := storetest.OpenSQLite(b)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		svc  *auth.Service
	}{
		{"uncached", auth.NewService(db.Keys(), nil, 0)},
		{"cached", auth.NewService(db.Keys(), nil, auth.DefaultCacheTTL)},
	} {
		token, _, err := c.svc.Create(ctx, auth.Spec{Tenant: "slot-1", Scopes: []contract.Scope{"route"}})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.svc.Verify(ctx, token); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
