package ledger_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/shimsql"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

const envSpendCrashChild = "CADUCEUS_SPEND_CRASH_CHILD"

var spendCrashCaller = contract.Caller{
	Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_aaaaaaaaaaaaaaaa", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
	KeyID:    "k1", Scopes: []contract.Scope{contract.ScopeRoute}, Grants: []string{"openai/gpt-4.1"},
}

// TestSpendCrashChild is the child of TestSpendCrash: 8 clients send chat
// completions through the shim's gateway under key and tenant budgets
// (leases, settlements left to the spend journal) and print the receipt id
// of each answer they have read in full, until the process is killed.
func TestSpendCrashChild(t *testing.T) {
	path := os.Getenv(envSpendCrashChild)
	if path == "" {
		t.Skip("run by TestSpendCrash only")
	}
	db, err := store.Open(context.Background(), "sqlite:"+path, "")
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4.1","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120}}`)
	}))
	conf := upstream.Config{
		Routes:  map[string]upstream.Route{"openai": {Kind: upstream.KindOpenAI, BaseURL: up.URL, Models: []string{"gpt-4.1"}}},
		Plans:   map[string]upstream.Plan{"main": {Failover: upstream.FailoverNone, Models: map[string][]upstream.Step{"gpt-4.1": {{Route: "openai"}}}}},
		Prices:  map[string]upstream.Price{"openai/gpt-4.1": {Input: 2_000_000, Output: 8_000_000, MaxOutputTokens: 1000}},
		Budgets: upstream.Budgets{Key: upstream.Limit{Day: 1_000_000_000}, Tenant: upstream.Limit{Month: 1_000_000_000}},
	}
	sp := ledger.Of(db)
	gw := gateway.New(gateway.Config{Upstream: conf, Ledger: sp, Holds: sp, DeferClose: true})
	svc := shim.New(shim.Config{Store: shimsql.New(db), Audit: db.Audit(), Turns: shimsql.New(db), Gateway: gw})
	h := svc.Handler(wire.ChatCompletions)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(contract.WithCaller(r.Context(), spendCrashCaller)))
	}))
	storetest.AckPosts(srv.URL, shim.HeaderReceipt, func(c, i int) string {
		return fmt.Sprintf(`{"model":"gpt-4.1","max_tokens":100,"messages":[{"role":"user","content":"question %d-%d"}]}`, c, i)
	})
}

// TestSpendCrash: a child process forwarding requests under budgets is
// killed with SIGKILL, its spend journal unwritten and its leases held.
// The stale sweep of the next process writes what the receipts carry and
// releases the leases: every answered attempt has its spend row with the
// cost its receipt records, no receipt still carries a settlement, and
// every total is exactly the settled spend.
func TestSpendCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	db, acked := storetest.CrashOnStore(t, "TestSpendCrashChild", envSpendCrashChild, 400, 40)
	ctx := t.Context()
	pending := count(t, db, `SELECT COUNT(*) FROM shim_receipts WHERE ledger IS NOT NULL`)
	// The next process's sweep, a few minutes on: the dead process's
	// leases were last written before now.
	now := time.Now()
	db.Now = func() time.Time { return now.Add(3 * time.Minute) }
	sp := ledger.Of(db)
	if _, err := sp.ReleaseStale(ctx, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM shim_receipts WHERE ledger IS NOT NULL`); n != 0 {
		t.Fatalf("%d receipts still carry settlements after the sweep", n)
	}
	rs, err := shimsql.New(db).ListReceipts(ctx, "slot-1", 100000, "")
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]shim.Receipt{}
	for _, r := range rs {
		stored[r.ID] = r
	}
	for _, id := range acked {
		r, ok := stored[id]
		if !ok || r.Spend == nil || len(r.Spend.Attempts) != 1 {
			t.Fatalf("acknowledged receipt %s: %+v", id, r)
		}
		a := r.Spend.Attempts[0]
		var settled int64
		if err := db.QueryRow(ctx, `SELECT settled FROM shim_spend WHERE id = ? AND state = 'settled'`, a.Reservation).Scan(&settled); err != nil {
			t.Fatalf("acknowledged receipt %s: no settled spend row for %s: %v", id, a.Reservation, err)
		}
		if settled != a.Settled || settled != 100*2+20*8 {
			t.Fatalf("acknowledged receipt %s: spend row settled %d, receipt %d", id, settled, a.Settled)
		}
	}
	var sum int64
	if err := db.QueryRow(ctx, `SELECT COALESCE(SUM(settled), 0) FROM shim_spend`).Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM shim_spend`); n != len(rs) {
		t.Fatalf("%d spend rows for %d receipts", n, len(rs))
	}
	day, month := now.UTC().Format("2006-01-02"), now.UTC().Format("2006-01")
	for _, tot := range [][2]string{{"key:k1", day}, {"key:k1", month}, {"tenant:slot-1", day}, {"tenant:slot-1", month}} {
		if n := spendTotal(t, sp, tot[0], tot[1]); n != sum {
			t.Fatalf("total %s %s = %d after the sweep, want the settled %d", tot[0], tot[1], n, sum)
		}
	}
	t.Logf("%d answers acknowledged before SIGKILL, %d receipts, %d of them still carrying settlements; %d µ$ settled", len(acked), len(rs), pending, sum)
}
