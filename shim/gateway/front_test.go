package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store"
)

// gatewayOn is a gateway over conf (validated) on a SQLite ledger of its
// own, with the routes' keys.
func gatewayOn(t *testing.T, conf upstream.Config, keys map[string]string) *gateway.Gateway {
	t.Helper()
	if err := conf.Validate(); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "gw.db"), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return gateway.New(gateway.Config{Upstream: conf, Ledger: ledger.Of(db), Holds: ledger.Of(db), Keys: keys})
}

// frontFor serves gw behind an endpoint of wire p, as the shim does: the body
// parsed once, the caller granted grants, a refusal in p's envelope, the
// held terminal event written last. results lists what each request came
// to.
func frontFor(t *testing.T, gw *gateway.Gateway, p wire.Protocol, grants ...string) (srv *httptest.Server, results func() []gateway.Result) {
	var mu sync.Mutex
	var rs []gateway.Result
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		pr, err := wire.Parse(p, b)
		if err != nil {
			wire.WriteError(w, p, 400, "invalid_request", err.Error())
			return
		}
		res := gw.Forward(r.Context(), gateway.Writer{ResponseWriter: w}, gateway.Request{Protocol: p, Caller: caller(grants...),
			Parsed: pr, Body: pr.Body(), Header: r.Header, ID: fmt.Sprintf("rct_front_%d", reqN.Add(1))})
		if res.Refusal != nil {
			wire.WriteError(w, p, res.Refusal.Status, res.Refusal.Code, res.Refusal.Message)
		} else if res.Final != nil {
			w.Write(res.Final)
		}
		mu.Lock()
		rs = append(rs, res)
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv, func() []gateway.Result {
		mu.Lock()
		defer mu.Unlock()
		return append([]gateway.Result(nil), rs...)
	}
}
