package paper_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/broker/paper"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/executor/executortest"
)

const td = "../../executor/testdata"

func TestPaperBrokers(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(td, "brokers", "base.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	store, log := executortest.NewMemory(), audit.NewMemory()
	brokers, err := paper.Brokers(store, raw)
	if err != nil {
		t.Fatal(err)
	}
	ex := &executor.Executor{Brokers: brokers, Store: store, Audit: log, Skills: filepath.Join(td, "skills")}
	payload, _ := os.ReadFile(filepath.Join(td, "payloads", "buy_spy.json"))
	id := func(slot string) contract.Identity {
		return contract.Identity{TenantSlot: contract.TenantSlot(slot), Subject: "usr_00000000000000000000000000000009", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter}
	}
	for i, tc := range []struct{ slot, key, order string }{{"slot-1", "", "paper-000001"}, {"slot-1", "tick-key-0002", "paper-000002"}, {"slot-2", "", "paper-000001"}} {
		env, err := ex.Tick(t.Context(), executor.TickRequest{Payload: payload, Identity: id(tc.slot), Context: executor.ContextCron, IdempotencyKey: tc.key})
		if err != nil || env.Actions[0].Status != executor.StatusPlaced || *env.Actions[0].OrderID != tc.order {
			t.Fatalf("tick %d (%s): %+v, %v; want order %s (one paper account per tenant)", i, tc.slot, env, err, tc.order)
		}
	}
	// A new process (new PaperBrokers) continues each tenant's account from the store.
	brokers2, _ := paper.Brokers(store, raw)
	b, err := brokers2(t.Context(), "slot-1")
	if err != nil {
		t.Fatal(err)
	}
	os, err := b.Orders(t.Context(), "619508153")
	if err != nil || len(os) != 2 {
		t.Fatalf("reloaded slot-1 account has %d orders, %v", len(os), err)
	}
	if _, err := paper.Brokers(store, []byte("nope: 1")); contract.KindOf(err) != contract.KindInvalid {
		t.Fatalf("bad scenario: %v", err)
	}
}
