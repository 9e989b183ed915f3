package shimsql_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/shimsql"
	"github.com/caduceus-dev/caduceus/shim/wire"
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
