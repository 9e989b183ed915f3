package shimsql_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/shimsql"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// BenchmarkRecordTurnParallel records shim turns (audit record + receipt,
// one transaction each) from 16 goroutines on SQLite, as a busy proxy does:
// the group commit shares commits among the turns that arrive together.
// cpu-µs/turn is the process's user+system CPU time per turn, which a
// shared, noisy machine disturbs far less than the wall time (ns/op).
func BenchmarkRecordTurnParallel(b *testing.B) {
	db := storetest.OpenSQLite(b)
	turns := shimsql.New(db)
	var n atomic.Int64
	b.SetParallelism(8) // × GOMAXPROCS 2 = 16 writers
	cpu0 := storetest.CPUTime()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			e, rc := benchTurn(i)
			if err := turns.RecordTurn(context.Background(), e, rc, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((storetest.CPUTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/turn")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "turns/s")
	rep, err := audit.Verify(context.Background(), db.Audit(), nil)
	if err != nil || rep.Break != nil || rep.Records != n.Load() {
		b.Fatalf("chain after parallel turns: %+v %v", rep, err)
	}
}

// benchTurn is the audit entry and receipt of one forwarded, shimmed chat
// turn, shaped as the proxy builds them.
func benchTurn(i int64) (audit.Entry, *shim.Receipt) {
	subject := auth.Subject("k1")
	now := contract.Timestamp(time.Now())
	conv := contract.ConversationFor("slot-1", fmt.Sprintf("bench-%d", i%64))
	h := contract.SHA256([]byte(fmt.Sprint(i)))
	rc := &shim.Receipt{
		ID: contract.NewID("rcp"), At: now, Tenant: "slot-1", Subject: subject, KeyID: "k1",
		Protocol: wire.ChatCompletions, Model: "gpt-4o-mini", ConversationID: conv,
		Decision: shim.DecisionForward, Evaluated: 12,
		Fired:         []shim.Fired{{ID: "P0500", Version: 1, Action: "shim", Tier: 1, Reason: "keyword:deploy"}},
		Skipped:       []shim.Skipped{},
		Shimmed:       []shim.Shimmed{{Provision: "P0500", Ref: "verb:deploy", Version: 1, SHA256: h, Chars: 48}},
		RequestSHA256: h, ForwardedSHA256: h, ResponseSHA256: h,
		Upstream: "openai", UpstreamStatus: 200, OverheadMicros: 80,
	}
	e := audit.Entry{
		Outcome: contract.AuditOutcome{At: now, Action: shim.AuditAction, Resource: "receipt/" + rc.ID, Outcome: contract.OutcomeAllow,
			Identity: contract.Identity{TenantSlot: "slot-1", Subject: subject, Surface: contract.SurfaceAPI, Trust: contract.TrustRouter}},
		Provenance: &contract.Provenance{Surface: contract.SurfaceAPI, Actor: contract.Actor{Type: contract.ActorUser, ID: subject},
			RecordedAt: now, ConversationID: conv, Route: &contract.Route{Requested: "gpt-4o-mini", ResolvedTarget: "openai"}},
		Payload: *rc,
	}
	return e, rc
}

// BenchmarkTurnRowsFloor is what the medium itself costs: one real turn
// is recorded, its audit record and receipt rows are read back, and then
// copies of those two rows (the same bytes, new keys) are inserted into
// the same migrated tables with plain statements on one modernc SQLite
// connection opened as the store opens its writer (WAL, synchronous
// NORMAL, BEGIN IMMEDIATE), group turns to a commit, with a PASSIVE
// checkpoint every store.CheckpointEvery as the store runs. No hashing, no
// chain head, no JSON, no group-commit queue: the floor under
// BenchmarkRecordTurnParallel's cpu-µs/turn at the same commit size.
func BenchmarkTurnRowsFloor(b *testing.B) {
	for _, group := range []int{1, 3, 6} {
		b.Run(fmt.Sprintf("group=%d", group), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "floor.db")
			db, err := store.Open(context.Background(), "sqlite:"+path, "")
			if err != nil {
				b.Fatal(err)
			}
			e, rc := benchTurn(0)
			if err := shimsql.New(db).RecordTurn(context.Background(), e, rc, nil); err != nil {
				b.Fatal(err)
			}
			db.Close()

			base := "file:" + path + "?_busy_timeout=10000&_synchronous=NORMAL&_journal_mode=WAL"
			w, err := sql.Open("sqlite", base+"&_txlock=immediate&_pragma=wal_autocheckpoint(0)")
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			w.SetMaxOpenConns(1)
			r, err := sql.Open("sqlite", base)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			var a [10]string
			if err := w.QueryRow(`SELECT tenant, at, action, resource, outcome, body, prev_hash, hash, conversation_id, id FROM audit_records`).
				Scan(&a[0], &a[1], &a[2], &a[3], &a[4], &a[5], &a[6], &a[7], &a[8], &a[9]); err != nil {
				b.Fatal(err)
			}
			var at, decision, doc string
			if err := w.QueryRow(`SELECT at, decision, doc FROM shim_receipts`).Scan(&at, &decision, &doc); err != nil {
				b.Fatal(err)
			}
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				t := time.NewTicker(store.CheckpointEvery)
				defer t.Stop()
				for {
					select {
					case <-stop:
						return
					case <-t.C:
						r.Exec(`PRAGMA wal_checkpoint(PASSIVE)`)
					}
				}
			}()
			cpu0 := storetest.CPUTime()
			b.ResetTimer()
			for seq, last := int64(2), int64(b.N)+1; seq <= last; { // the recorded turn is seq 1
				tx, err := w.Begin()
				if err != nil {
					b.Fatal(err)
				}
				for j := 0; j < group && seq <= last; j, seq = j+1, seq+1 {
					id := fmt.Sprintf("%s-%d", a[9], seq)
					if _, err := tx.Exec(`INSERT INTO audit_records (tenant, seq, id, at, action, resource, outcome, body, prev_hash, hash, conversation_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
						a[0], seq, id, a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8]); err != nil {
						b.Fatal(err)
					}
					if _, err := tx.Exec(`INSERT INTO shim_receipts (tenant, id, at, decision, doc) VALUES (?, ?, ?, ?, ?)`,
						a[0], fmt.Sprintf("%s-%d", rc.ID, seq), at, decision, doc); err != nil {
						b.Fatal(err)
					}
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			close(stop)
			<-done
			b.ReportMetric(float64((storetest.CPUTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/turn")
			b.ReportMetric(float64(len(a[5])+len(doc)), "row-bytes")
		})
	}
}
