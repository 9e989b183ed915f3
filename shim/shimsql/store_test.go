package shimsql_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/shimsql"
	"github.com/caduceus-dev/caduceus/shim/shimtest"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestShimStore runs the shim.Store conformance suite on SQLite and, when
// CADUCEUS_TEST_POSTGRES is set, on Postgres; every suite test gets an
// empty database.
func TestShimStore(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		shimtest.TestStore(t, func(t *testing.T) shim.Store { return shimsql.New(storetest.OpenSQLite(t)) })
	})
	if dsn := os.Getenv(storetest.EnvPostgres); dsn != "" {
		t.Run("postgres", func(t *testing.T) {
			shimtest.TestStore(t, func(t *testing.T) shim.Store { return shimsql.New(storetest.OpenPostgres(t, dsn)) })
		})
	}
}

// Two Services on one database stand for two processes: the
// once-per-conversation ledger, CAS and receipts hold across them.
func TestShimAcrossServices(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		var forwarded []string
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var b bytes.Buffer
			b.ReadFrom(r.Body)
			forwarded = append(forwarded, b.String())
			w.Header().Set("Content-Type", "application/json")
			w.Write(wire.DirectJSON(wire.ChatCompletions, wire.Direct{ID: "u", Model: "m", Text: "ok"}))
		}))
		defer up.Close()
		mk := func() *shim.Service {
			return shim.New(shim.Config{Store: shimsql.New(db), Audit: db.Audit(),
				Upstreams: map[string]shim.Upstream{"openai": {BaseURL: up.URL}}})
		}
		a, b := mk(), mk()
		caller := contract.Caller{Identity: contract.Identity{TenantSlot: "slot-7", Subject: "usr_0123456789abcdef", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
			Scopes: []contract.Scope{contract.ScopeRoute, contract.ScopeConfigure}, Harness: "h"}
		ctx := t.Context()
		if _, err := a.CreateContext(ctx, caller, "h", []byte(`{"ref":"verb:deploy","kind":"verb","body":"make deploy"}`)); err != nil {
			t.Fatal(err)
		}
		prov := `{"id":"ONCE","once_per_conversation":true,"triggers":{"keyword":{"any":["deploy"]}},"action":"shim","context_refs":["verb:deploy"]}`
		if _, err := a.CreateProvision(ctx, caller, "h", []byte(prov)); err != nil {
			t.Fatal(err)
		}
		if _, err := b.UpdateProvision(ctx, caller, "h", "ONCE", 1, []byte(prov)); err != nil {
			t.Fatal(err)
		}
		if _, err := a.UpdateProvision(ctx, caller, "h", "ONCE", 1, []byte(prov)); contract.KindOf(err) != contract.KindConflict {
			t.Fatalf("stale update through the other service: %v", err)
		}
		body := `{"model":"gpt-4o","messages":[{"role":"user","content":"deploy it"}]}`
		for i, svc := range []*shim.Service{a, b} {
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
			req.Header.Set(shim.HeaderConversation, "conv-shared")
			req = req.WithContext(contract.WithCaller(req.Context(), caller))
			w := httptest.NewRecorder()
			svc.Handler(wire.ChatCompletions).ServeHTTP(w, req)
			if w.Code != 200 {
				t.Fatalf("request %d: %d %s", i, w.Code, w.Body)
			}
		}
		if len(forwarded) != 2 || !strings.Contains(forwarded[0], "caduceus-shim") || strings.Contains(forwarded[1], "caduceus-shim") {
			t.Fatalf("once per conversation across services: %q", forwarded)
		}
		rs, err := b.ListReceipts(ctx, caller, 10, "")
		if err != nil || len(rs) != 2 || rs[0].Skipped[0].Reason != "once_per_conversation:ledger" || rs[1].AuditID == "" {
			t.Fatalf("receipts %+v %v", rs, err)
		}
	})
}
