package edge_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/edge"
	"github.com/caduceus-dev/caduceus/store/port"
)

// heldDB is an edge database whose first query containing match is held
// (held closes when it arrives) until release closes; reads counts the
// queries containing match.
type heldDB struct {
	port.DB
	match         string
	reads         atomic.Int64
	held, release chan struct{}
}

func (h *heldDB) Query(ctx context.Context, q string, args ...any) ([]port.Row, error) {
	if strings.Contains(q, h.match) && h.reads.Add(1) == 1 {
		close(h.held)
		<-h.release
	}
	return h.DB.Query(ctx, q, args...)
}

const hangAdmin = "cad_0123456789abcdef_abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst"

// serveHeld sends one request to a fresh edge whose first query
// containing match is held, then others more at once, and fails unless
// the others are all answered, and reach the database (reads queries
// matching, in all), while the first is still held: in a Worker, a
// request that waits on I/O another request's context does is canceled
// as hung ("the Workers runtime canceled this request because it detected
// that your Worker's code had hung"), so at the edge no request waits on
// another's (docs/edge.md). warm, when set, is served first, unheld, and
// the edge's clock then moved past the shim's RulesTTL. Every request must
// be answered 200.
func serveHeld(t *testing.T, match string, reads int64, warm func(e *edge.Edge) int, others int, send func(e *edge.Edge) int) {
	db := &heldDB{DB: open(t), match: match, held: make(chan struct{}), release: make(chan struct{})}
	admins, err := edge.ParseAdminKeys(hangAdmin)
	if err != nil {
		t.Fatal(err)
	}
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	e, err := edge.New(edge.Config{DB: db, AdminKeys: admins, Offline: true, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if warm != nil {
		db.reads.Add(1) // not held
		if code := warm(e); code/100 != 2 {
			t.Fatalf("warming up: %d", code)
		}
		db.reads.Store(0)
		skew.Store(int64(time.Minute))
	}
	first := make(chan int, 1)
	go func() { first <- send(e) }()
	release := sync.OnceFunc(func() { close(db.release) })
	defer func() { release(); <-first }() // when the test fails below
	// The first request is held in its query, or answered without one.
	select {
	case <-db.held:
	case code := <-first:
		first <- code // what the deferred receive takes
		t.Fatalf("the first request was answered %d without a query matching %q", code, match)
	}
	done := make(chan int, others)
	for range others {
		go func() { done <- send(e) }()
	}
	// A bound for the test to fail at, not a pause: the others need no
	// more than their own queries on a local SQLite file.
	bound := time.After(30 * time.Second)
	for i := range others {
		select {
		case code := <-done:
			if code != http.StatusOK {
				t.Errorf("a concurrent request: %d", code)
			}
		case <-bound:
			t.Fatalf("%d of %d concurrent requests answered while the first was held in its query matching %q: the others wait on the first's I/O", i, others, match)
		}
	}
	if n := db.reads.Load(); n < reads {
		t.Errorf("%d queries matching %q (want %d or more) by %d requests while the first was held in one", n, match, reads, 1+others)
	}
	release()
	if code := <-first; code != http.StatusOK {
		t.Errorf("the first request: %d", code)
	}
	first <- http.StatusOK // what the deferred receive takes
}

// request serves one request with key and returns its status and body.
func request(e *edge.Edge, key, method, path, body string) (int, string) {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+key)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-Caduceus-Harness", "claude-code")
	w := httptest.NewRecorder()
	e.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// TestEdgeConcurrentAdoption: the first requests of an isolate each adopt
// the admin key; none waits for the adoption another has in flight.
func TestEdgeConcurrentAdoption(t *testing.T) {
	// Each reads the key to adopt it (then again to verify it).
	serveHeld(t, "FROM api_keys", 4, nil, 3, func(e *edge.Edge) int {
		code, _ := request(e, hangAdmin, "GET", "/v1/provisions", "")
		return code
	})
}

// TestEdgeConcurrentProvisionReads: turns that find the provisions stale
// together each read them; none waits for the read another has in flight
// (shim.Config.OwnReads).
func TestEdgeConcurrentProvisionReads(t *testing.T) {
	var key string
	provision := func(e *edge.Edge) int {
		code, made := request(e, hangAdmin, "POST", "/v1/admin/keys", `{"tenant":"slot-1","scopes":["route","configure"],"harness":"claude-code"}`)
		i := strings.Index(made, "cad_")
		if code != http.StatusCreated || i < 0 || len(made) < i+73 {
			return code
		}
		key = made[i : i+73]
		code, _ = request(e, key, "POST", "/v1/provisions", `{"id":"PROV-REFUNDS","triggers":{"keyword":{"any":["refund"]}},"action":"respond_directly","response":{"text":"Refunds take 14 days."}}`)
		return code
	}
	// The first reads them (slot-1's and the builtins' in one statement,
	// shim.ProvisionPairLister), held; the second reads them again and
	// caches them for the third and fourth, unless those overlap it and
	// read them too.
	serveHeld(t, "FROM shim_provisions", 2, provision, 3, func(e *edge.Edge) int {
		code, _ := request(e, key, "POST", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"how do I get a refund?"}]}`)
		return code
	})
}
