package gateway_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestGatewayReusesUpstreamConnections: a gateway built without a client
// (as serve builds it) keeps as many idle upstream connections as its load
// has, so 10 rounds of 32 concurrent requests dial about 32 connections,
// not one per request (Go's default client keeps 2 idle per host: about
// 30 new dials a round, and sockets piling up in TIME_WAIT).
func TestGatewayReusesUpstreamConnections(t *testing.T) {
	var dials atomic.Int64
	up := httptest.NewUnstartedServer(http.HandlerFunc(answerChat))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	up.Start()
	t.Cleanup(up.Close)
	db := storetest.OpenSQLite(t)
	c := upstream.Config{
		Routes: map[string]upstream.Route{"a": {Provider: "pa", Kind: upstream.KindOpenAI, BaseURL: up.URL, Models: []string{"gpt-4.1"}}},
		Plans:  map[string]upstream.Plan{"main": {Failover: upstream.FailoverNone, Models: map[string][]upstream.Step{"gpt-4.1": {{Route: "a"}}}}},
		Prices: map[string]upstream.Price{"pa/gpt-4.1": price},
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	gw := gateway.New(gateway.Config{Upstream: c, Ledger: ledger.Of(db), Holds: ledger.Of(db)})
	const conc, rounds = 32, 10
	var n atomic.Int64
	for range rounds {
		var wg sync.WaitGroup
		for range conc {
			wg.Go(func() {
				rec := httptest.NewRecorder()
				pr, b := parsed(t, wire.ChatCompletions, `{"model":"gpt-4.1","max_tokens":10,"messages":[]}`)
				res := gw.Forward(t.Context(), gateway.Writer{ResponseWriter: rec, Hold: func(int, []byte) {}}, gateway.Request{Protocol: wire.ChatCompletions,
					Caller: caller("pa/gpt-4.1"), Parsed: pr, Body: b, ID: fmt.Sprintf("rct_conn_%d", n.Add(1))})
				if res.Refusal != nil || res.Err != nil {
					t.Errorf("forward: %+v %v", res.Refusal, res.Err)
				}
			})
		}
		wg.Wait()
	}
	if d := dials.Load(); d > 2*conc {
		t.Errorf("%d upstream connections dialled for %d rounds of %d concurrent requests; want at most %d (the idle pool keeps them)", d, rounds, conc, 2*conc)
	}
}
