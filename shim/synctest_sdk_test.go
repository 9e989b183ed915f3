package shim_test

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/shimtest"
	gwconf "github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store"
)

// pipeNet is an in-memory network of one listener: inside a synctest
// bubble a connection blocked on it is durably blocked, so fake time runs
// while servers and clients wait on each other.
type pipeNet struct {
	conns chan net.Conn
	done  chan struct{}
}

func newPipeNet() *pipeNet { return &pipeNet{conns: make(chan net.Conn), done: make(chan struct{})} }

func (p *pipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.done:
		return nil, net.ErrClosed
	}
}

func (p *pipeNet) Close() error {
	select {
	case <-p.done:
	default:
		close(p.done)
	}
	return nil
}

func (p *pipeNet) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80} }

func (p *pipeNet) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case p.conns <- server:
		return client, nil
	case <-p.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// serve serves h on a pipeNet until the test ends, and returns a client of
// it.
func servePipe(t *testing.T, h http.Handler) *http.Client {
	p := newPipeNet()
	srv := &http.Server{Handler: h}
	go srv.Serve(p)
	tr := &http.Transport{DialContext: p.dial}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
	})
	return &http.Client{Transport: tr}
}

// TestSDKRetriesAfterTheHoldNotAMinute: the official
// OpenAI SDK with its default retries, against a provider that answers
// 429 without Retry-After once, gets its answer about a second later (the
// hold's Retry-After), as it does direct — not 60 s later. Fake time
// (testing/synctest): the test does not wait.
func TestSDKRetriesAfterTheHoldNotAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db, err := store.Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "gw.db"), "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		limited := true
		up := servePipe(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if limited {
				limited = false
				rateLimited(w, r, nil)
				return
			}
			defaultRespond(w, r, []byte(`{"model":"gpt-4o"}`))
		}))
		price := gwconf.Price{Input: 2_000_000, Output: 8_000_000, MaxOutputTokens: 4096}
		conf := gwconf.Config{
			Routes: map[string]gwconf.Route{"openai": {Kind: gwconf.KindOpenAI, BaseURL: "http://upstream.invalid", Models: []string{"gpt-4o"}}},
			Plans:  map[string]gwconf.Plan{"main": {Failover: gwconf.FailoverNone, Models: map[string][]gwconf.Step{"gpt-4o": {{Route: "openai"}}}}},
			Prices: map[string]gwconf.Price{"openai/gpt-4o": price},
		}
		gw := gateway.New(gateway.Config{Upstream: conf, Ledger: ledger.Of(db), Holds: ledger.Of(db), Client: up})
		svc := shim.New(shim.Config{Store: shimtest.NewMemory(), Audit: audit.NewMemory(), Gateway: gw})
		mux := http.NewServeMux()
		mux.Handle("POST /v1/chat/completions", svc.Handler(wire.ChatCompletions))
		hc := servePipe(t, withCaller(mux))
		c := openai.NewClient(option.WithBaseURL("http://caduceus.invalid/v1/"), option.WithAPIKey("key-granted"), option.WithHTTPClient(hc))
		start := time.Now()
		cc, err := c.Chat.Completions.New(t.Context(), chatParams())
		took := time.Since(start)
		if err != nil || cc.Choices[0].Message.Content != upstreamText {
			t.Fatalf("after one 429: %v", err)
		}
		if took > 2*time.Second {
			t.Fatalf("the SDK got its answer %v after a 429 without Retry-After; direct it takes about a second", took)
		}
		t.Logf("answered after %v (fake time)", took)
	})
}
