package shimsql_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/memory"
	"github.com/caduceus-dev/caduceus/shim/shimsql"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

const envShimCrashChild = "CADUCEUS_SHIM_CRASH_CHILD"

var shimCrashCaller = contract.Caller{
	Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_aaaaaaaaaaaaaaaa", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
	KeyID:    "k1", Scopes: []contract.Scope{contract.ScopeRoute},
}

// TestShimCrashChild is the child of TestShimCrash: 8 clients send chat
// completions through the shim (receipt and audit record in one group
// committed transaction, entity memory on) and print the receipt id of each
// answer they have read in full, until the process is killed.
func TestShimCrashChild(t *testing.T) {
	path := os.Getenv(envShimCrashChild)
	if path == "" {
		t.Skip("run by TestShimCrash only")
	}
	db, err := store.Open(context.Background(), "sqlite:"+path, "")
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[]}`)
	}))
	mem := memory.New(memory.Config{Store: shimsql.NewMemory(db), Rules: shimsql.New(db)})
	svc := shim.New(shim.Config{Store: shimsql.New(db), Audit: db.Audit(), Turns: shimsql.New(db), Observers: []shim.Observer{mem},
		Upstreams: map[string]shim.Upstream{"openai": {BaseURL: up.URL}}})
	h := svc.Handler(wire.ChatCompletions)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(contract.WithCaller(r.Context(), shimCrashCaller)))
	}))
	storetest.AckPosts(srv.URL, shim.HeaderReceipt, func(c, i int) string {
		return fmt.Sprintf(`{"model":"gpt-4o","messages":[{"role":"user","content":"deploy build %d-%d to staging"}]}`, c, i)
	})
}

// TestShimCrash: a child process proxying requests is killed with SIGKILL;
// every receipt whose answer a client had read is in the store afterwards,
// with its audit record, and the audit chain verifies.
func TestShimCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	db, acked := storetest.CrashOnStore(t, "TestShimCrashChild", envShimCrashChild, 300, 20)
	rs, err := shimsql.New(db).ListReceipts(context.Background(), "slot-1", 100000, "")
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]shim.Receipt{}
	for _, r := range rs {
		stored[r.ID] = r
	}
	records := map[string]bool{}
	if err := db.Audit().Scan(context.Background(), "slot-1", func(r audit.Row) error {
		records[r.ID] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, id := range acked {
		r, ok := stored[id]
		if !ok {
			t.Fatalf("acknowledged receipt %s lost after SIGKILL", id)
		}
		if r.AuditID == "" || !records[r.AuditID] {
			t.Fatalf("acknowledged receipt %s has no audit record (%q) after SIGKILL", id, r.AuditID)
		}
	}
	rep, err := audit.Verify(context.Background(), db.Audit(), nil)
	if err != nil || rep.Break != nil {
		t.Errorf("audit verify after SIGKILL: %+v %v", rep.Break, err)
	}
	t.Logf("%d requests acknowledged before SIGKILL, %d receipts and %d audit records survive", len(acked), len(rs), rep.Records)
}
