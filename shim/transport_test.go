package shim_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/caduceus-dev/caduceus/shim"
)

// Under concurrent load the shim reuses its upstream connections: rounds of
// 32 parallel requests open at most 32 connections in all (the default
// transport keeps 2 idle per host and re-dials the rest every round).
func TestUpstreamConnectionsReused(t *testing.T) {
	var dialled atomic.Int64
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"x","object":"chat.completion","choices":[]}`))
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialled.Add(1)
		}
	}
	up.Start()
	t.Cleanup(up.Close)
	e := newEnv(t, func(c *shim.Config) { c.Upstreams["openai"] = shim.Upstream{BaseURL: up.URL} })
	const parallel, rounds = 32, 4
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	for range rounds {
		var wg sync.WaitGroup
		for range parallel {
			wg.Go(func() {
				resp, _ := e.post(t, "key-a", "/v1/chat/completions", body, nil)
				if resp.StatusCode != http.StatusOK {
					t.Errorf("status %d", resp.StatusCode)
				}
			})
		}
		wg.Wait()
	}
	if n := dialled.Load(); n > parallel {
		t.Fatalf("%d upstream connections for %d rounds of %d parallel requests; want at most %d", n, rounds, parallel, parallel)
	}
}
