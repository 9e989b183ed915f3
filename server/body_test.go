package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/server"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/shimgate"
	"github.com/caduceus-dev/caduceus/shim/shimsql"
	"github.com/caduceus-dev/caduceus/store"
)

// slowEnv is a Server with the shim gate on SQLite behind a real TCP
// listener that reports every connection it closes.
type slowEnv struct {
	url    string
	addr   string
	key    string
	srv    *server.Server
	closed chan struct{}
}

func newSlowEnv(t *testing.T, bodyTimeout, upstreamDelay time.Duration) *slowEnv {
	t.Helper()
	db, err := store.Open(t.Context(), "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // a provider that thinks for upstreamDelay
		case <-time.After(upstreamDelay):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[]}`)
	}))
	t.Cleanup(up.Close)
	keys := auth.NewService(db.Keys(), nil, auth.DefaultCacheTTL)
	token, _, err := keys.Create(t.Context(), auth.Spec{Tenant: "slot-1", Scopes: []contract.Scope{contract.ScopeRoute}})
	if err != nil {
		t.Fatal(err)
	}
	svc := shim.New(shim.Config{Store: shimsql.New(db), Audit: db.Audit(), Upstreams: map[string]shim.Upstream{"openai": {BaseURL: up.URL}}})
	srv := server.New(server.Config{Auth: keys, Audit: db.Audit(), Records: db.Audit(), Store: db, Routes: shimgate.New(shimgate.Config{Service: svc}).Routes(), BodyReadTimeout: bodyTimeout})
	e := &slowEnv{key: token, srv: srv, closed: make(chan struct{}, 1024)}
	hs := httptest.NewUnstartedServer(srv)
	hs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			e.closed <- struct{}{}
		}
	}
	hs.Start()
	t.Cleanup(hs.Close)
	e.url, e.addr = hs.URL, hs.Listener.Addr().String()
	return e
}

// slowClient opens a TCP connection and sends a chat-completions request's
// headers announcing a large body, then only the body's first byte.
func (e *slowEnv) slowClient(t *testing.T, key string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	auth := ""
	if key != "" {
		auth = "Authorization: Bearer " + key + "\r\n"
	}
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: caduceus\r\nContent-Type: application/json\r\n%sContent-Length: 100000\r\n\r\n{", auth)
	return c
}

// answer reads the server's response on c, then reads on to the end of the
// connection: it returns only once the server has closed it. The client's
// own deadline only turns a server that never lets go into a failure
// instead of a hung test.
func answer(t *testing.T, c net.Conn) int {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Fatalf("the server kept the connection open: %v", err)
	}
	return resp.StatusCode
}

// An unauthenticated client that sends its headers and then trickles its
// body is answered 401 at once, from the headers alone, and its connection
// is closed: hundreds of them hold nothing, and a real request still passes.
func TestSlowUnauthenticatedClientsAreDropped(t *testing.T) {
	e := newSlowEnv(t, time.Hour, 0) // the body deadline plays no part here
	const n = 200
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = e.slowClient(t, "")
	}
	for i, c := range conns {
		if code := answer(t, c); code != http.StatusUnauthorized {
			t.Fatalf("slow client %d: status %d, want 401", i, code)
		}
	}
	for range n {
		<-e.closed // the server released every one of them
	}
	req, _ := http.NewRequest("POST", e.url+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+e.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a real request after the slow clients: status %d", resp.StatusCode)
	}
}

// An authenticated client whose body stops arriving is answered 408 when the
// body deadline passes and its connection is closed; an answer at all proves
// the deadline, since the body never completes.
func TestSlowBodyDroppedAtDeadline(t *testing.T) {
	e := newSlowEnv(t, 200*time.Millisecond, 0)
	const n = 50
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = e.slowClient(t, e.key)
	}
	for i, c := range conns {
		if code := answer(t, c); code != http.StatusRequestTimeout {
			t.Fatalf("slow client %d: status %d, want 408", i, code)
		}
	}
	for range n {
		<-e.closed
	}
}

// A body that arrives in time is not bounded afterwards: the deadline is
// cleared once the body is read, so an upstream answer that takes longer
// than the body deadline still completes (were the deadline left set, the
// connection's background read would fail and cancel the upstream call).
func TestBodyDeadlineClearedAfterBody(t *testing.T) {
	e := newSlowEnv(t, 50*time.Millisecond, 300*time.Millisecond)
	// Several requests on one keep-alive connection, each answered after
	// the previous one's deadline would have passed.
	for range 3 {
		req, _ := http.NewRequest("POST", e.url+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+e.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
}
