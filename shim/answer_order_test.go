package shim_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/shim"
	gwconf "github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// TestJSONAnswerLeavesAfterItsReceipt: a forwarded JSON answer (small, or
// larger than net/http's buffers) reaches the client only after its turn is
// recorded — not a byte of it, headers included, is written to the
// connection while RecordTurn runs — and then whole, with its length, not
// chunked.
func TestJSONAnswerLeavesAfterItsReceipt(t *testing.T) {
	for _, path := range []string{"upstreams", "gateway"} {
		for _, size := range []int{200, 64 << 10} {
			t.Run(path+"/"+strconv.Itoa(size), func(t *testing.T) { answerLeavesAfterItsReceipt(t, path, size) })
		}
	}
}

// envOnPath is a shim env whose answers come through path: the gateway
// (a governed route, the granted key) or the upstreams (pass-through);
// key is the key to call it with.
func envOnPath(t *testing.T, path string, tweak func(*shim.Config)) (e *env, key string) {
	if path == "gateway" {
		e, _ = newGatewayEnv(t, gwconf.Budgets{}, tweak)
		return e, "key-granted"
	}
	return newEnv(t, tweak), "key-a"
}

// answerLeavesAfterItsReceipt is TestJSONAnswerLeavesAfterItsReceipt
// through the shim's upstreams or its gateway, for an answer of size bytes.
func answerLeavesAfterItsReceipt(t *testing.T, path string, size int) {
	rec := &gateRecorder{entered: make(chan int64, 1), release: make(chan struct{})}
	e, key := envOnPath(t, path, func(c *shim.Config) { c.Turns = rec })
	answer := `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("x", size) + `"},"finish_reason":"stop"}]}`
	e.up.respond = func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	}
	var written atomic.Int64
	rec.written = &written
	mux := http.NewServeMux()
	mux.Handle("POST /v1/chat/completions", e.svc.Handler(wire.ChatCompletions))
	srv := httptest.NewUnstartedServer(withCaller(mux))
	srv.Listener = countingListener{Listener: srv.Listener, n: &written}
	srv.Start()
	defer srv.Close()

	type result struct {
		resp *http.Response
		body []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"hello"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- result{resp, b, err}
	}()
	if n := <-rec.entered; n != 0 {
		close(rec.release)
		t.Fatalf("%d bytes of the answer were written before its turn was recorded", n)
	}
	close(rec.release)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.resp.StatusCode != 200 || string(r.body) != answer || r.resp.Header.Get(shim.HeaderReceipt) == "" {
		t.Fatalf("answer %d %q (%d bytes)", r.resp.StatusCode, r.resp.Header, len(r.body))
	}
	if r.resp.ContentLength != int64(len(answer)) || len(r.resp.TransferEncoding) != 0 {
		t.Fatalf("answer sent with length %d and transfer encoding %v, want length %d", r.resp.ContentLength, r.resp.TransferEncoding, len(answer))
	}
}

// gateRecorder is a TurnRecorder that reports how many bytes the server
// had written when a turn reached it, and holds the turn until released.
type gateRecorder struct {
	written *atomic.Int64
	entered chan int64
	release chan struct{}
}

func (g *gateRecorder) RecordTurn(_ context.Context, _ audit.Entry, rc *shim.Receipt, _ []shim.MemoryWrite) error {
	g.entered <- g.written.Load()
	<-g.release
	rc.AuditID = "evt_gate"
	return nil
}

// countingListener counts the bytes written to the connections it accepts.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{Conn: c, n: l.n}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.n.Add(int64(n))
	return n, err
}
