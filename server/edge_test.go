package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/server"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/shimgate"
	"github.com/caduceus-dev/caduceus/shim/shimsql"
	"github.com/caduceus-dev/caduceus/store"
)

// TestEdgeSecretGuardsEveryRoute: with an edge secret, every route but the
// probes refuses a request without it, in the LLM protocols' envelopes on
// their routes (the shim gate's here), and tells SDKs not to retry.
func TestEdgeSecretGuardsEveryRoute(t *testing.T) {
	db, err := store.Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "edge.db"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	shimGate := shimgate.New(shimgate.Config{Service: shim.New(shim.Config{Store: shimsql.New(db), Audit: db.Audit()})})
	srv := server.New(server.Config{Auth: auth.NewService(db.Keys(), nil, 0), Audit: db.Audit(), Records: db.Audit(), Store: db,
		Routes: shimGate.Routes(), EdgeSecret: "edge-s3cret"})
	do := func(method, path, edge string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(`{}`))
		if edge != "" {
			req.Header.Set(server.HeaderEdgeAuth, edge)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec
	}
	for _, path := range []string{"/v1/admin/keys", "/v1/audit", "/mcp", "/metrics", "/v1/nowhere"} {
		rec := do("GET", path, "")
		if rec.Code != 403 || rec.Header().Get("X-Should-Retry") != "false" || !strings.Contains(rec.Body.String(), server.CodeEdgeAuth) {
			t.Errorf("GET %s without the edge secret: %d %s %q", path, rec.Code, rec.Header().Get("X-Should-Retry"), rec.Body)
		}
		if rec := do("GET", path, "wrong"); rec.Code != 403 {
			t.Errorf("GET %s with a wrong edge secret: %d", path, rec.Code)
		}
	}
	rec := do("POST", "/v1/messages", "")
	var env struct {
		Type  string `json:"type"`
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || rec.Code != 403 || env.Type != "error" || env.Error.Type != "permission_error" {
		t.Errorf("messages without the edge secret: %d %s", rec.Code, rec.Body)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if rec := do("GET", path, ""); rec.Code != http.StatusOK {
			t.Errorf("probe %s: %d", path, rec.Code)
		}
	}
	// Through the edge, the request reaches the route (and its own key check).
	if rec := do("GET", "/v1/admin/keys", "edge-s3cret"); rec.Code != http.StatusUnauthorized {
		t.Errorf("through the edge without a key: %d %s", rec.Code, rec.Body)
	}
}
