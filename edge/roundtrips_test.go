package edge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/edge"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/shimstore"
	"github.com/caduceus-dev/caduceus/store/port"
)

// callLog records the calls the edge makes to its database, each a round
// trip at the Worker (d1.go: Query is one prepare().raw(), Exec one
// run(), Batch one batch()), as "query TABLE", "exec TABLE" or
// "batch[N] TABLE TABLE ..." (the table each statement reads or writes).
type callLog struct {
	port.DB
	mu    sync.Mutex
	calls []string
}

// table is the table a statement reads or writes.
func table(q string) string {
	f := strings.Fields(q)
	for i, w := range f {
		switch strings.ToUpper(w) {
		case "FROM", "INTO", "UPDATE":
			if i+1 < len(f) {
				return strings.Trim(f[i+1], "(,")
			}
		}
	}
	return "?"
}

func (c *callLog) add(s string) {
	c.mu.Lock()
	c.calls = append(c.calls, s)
	c.mu.Unlock()
}

func (c *callLog) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = nil
	return out
}

func (c *callLog) Query(ctx context.Context, q string, args ...any) ([]port.Row, error) {
	c.add("query " + table(q))
	return c.DB.Query(ctx, q, args...)
}

func (c *callLog) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	c.add("exec " + table(q))
	return c.DB.Exec(ctx, q, args...)
}

func (c *callLog) Batch(ctx context.Context, stmts []port.Statement) error {
	s := fmt.Sprintf("batch[%d]", len(stmts))
	for _, st := range stmts {
		s += " " + table(st.SQL)
	}
	c.add(s)
	return c.DB.Batch(ctx, stmts)
}

// The database calls each kind of turn makes, one by one: each is a round
// trip the Worker waits for on D1 (docs/edge.md, "CPU per request"). The
// provisions (and the context entries a shim renders) are reused for the
// shim's RulesTTL, so a turn after it also reads them again: the tenant's
// and the builtins' in one statement (shim.ProvisionPairLister); the
// clock here moves only when the test moves it.
func TestTurnRoundTrips(t *testing.T) {
	upstreamURL := chatUpstream(t)
	db := &callLog{DB: open(t)}
	var clock atomic.Int64
	clock.Store(time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	const admin = "cad_0123456789abcdef_abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst"
	admins, err := edge.ParseAdminKeys(admin)
	if err != nil {
		t.Fatal(err)
	}
	e, err := edge.New(edge.Config{DB: db, AdminKeys: admins, Now: now, Upstreams: map[string]shim.Upstream{"openai": {BaseURL: upstreamURL + "/v1"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e)
	defer srv.Close()
	post := func(key, path, body string) string { return postAs(t, srv.URL, key, path, body) }
	key := seedTurns(t, srv.URL, admin)

	// The key with its grants (one statement), then the turn's one batch:
	// its audit record, sealed onto where the edge's last append left the
	// chain (no read of its head: TestChainEndRemembered), and the
	// chain's new head, its receipt, and the outcomes (memory) it resolves
	// and opens.
	key2 := []string{"query api_keys"}
	head := []string{}
	for _, c := range []struct {
		name, body string
		warm, ttl  []string // a turn within the rules' TTL; the first after it
	}{
		{"direct", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"how do I get a refund?"}]}`,
			concat(key2, head, []string{"batch[5] audit_records audit_heads shim_receipts shim_outcomes shim_outcomes"}),
			concat(key2, []string{"query shim_provisions"}, head, []string{"batch[5] audit_records audit_heads shim_receipts shim_outcomes shim_outcomes"})},
		{"shimmed", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"please deploy the payments service"}]}`,
			concat(key2, head, []string{"batch[5] audit_records audit_heads shim_receipts shim_outcomes shim_outcomes"}),
			concat(key2, []string{"query shim_provisions", "query shim_context"}, head, []string{"batch[5] audit_records audit_heads shim_receipts shim_outcomes shim_outcomes"})},
		{"forwarded", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello"}]}`,
			concat(key2, head, []string{"batch[4] audit_records audit_heads shim_receipts shim_outcomes"}),
			concat(key2, []string{"query shim_provisions"}, head, []string{"batch[4] audit_records audit_heads shim_receipts shim_outcomes"})},
	} {
		t.Run(c.name, func(t *testing.T) {
			post(key, "/v1/chat/completions", c.body)
			db.take()
			for range 3 {
				post(key, "/v1/chat/completions", c.body)
				if got := db.take(); !slices.Equal(got, c.warm) {
					t.Fatalf("a turn within the rules' TTL made %d calls:\n  %s\nwant %d:\n  %s", len(got), strings.Join(got, "\n  "), len(c.warm), strings.Join(c.warm, "\n  "))
				}
			}
			clock.Add(int64(2 * time.Second))
			post(key, "/v1/chat/completions", c.body)
			if got := db.take(); !slices.Equal(got, c.ttl) {
				t.Fatalf("the first turn after the rules' TTL made %d calls:\n  %s\nwant %d:\n  %s", len(got), strings.Join(got, "\n  "), len(c.ttl), strings.Join(c.ttl, "\n  "))
			}
		})
	}
}

func concat(lists ...[]string) []string { return slices.Concat(lists...) }

// An append seals onto where the same trail's last append left the chain
// without reading its head, and is still sealed onto the head the
// database holds when the chain moved since: forward, by another writer
// (an isolate), or back (the database restored to an earlier state), or
// when its head row is gone. Each time the chain verifies whole.
func TestChainEndRemembered(t *testing.T) { checkChainEndRemembered(t, open) }

func checkChainEndRemembered(t *testing.T, open opener) {
	db := &callLog{DB: open(t)}
	ctx := context.Background()
	a, b := port.NewAudit(db), port.NewAudit(db)
	appendOK := func(trail *port.Audit, wantSeq int64, wantCalls ...string) audit.Record {
		t.Helper()
		db.take()
		rec, err := trail.Append(ctx, entry("slot-1", "shim.proxy"))
		if err != nil || rec.Seq != wantSeq {
			t.Fatalf("append: seq %d, %v; want seq %d", rec.Seq, err, wantSeq)
		}
		if got := db.take(); !slices.Equal(got, wantCalls) {
			t.Fatalf("append at seq %d made the calls\n  %s\nwant\n  %s", wantSeq, strings.Join(got, "\n  "), strings.Join(wantCalls, "\n  "))
		}
		rep, err := audit.Verify(ctx, a, nil)
		if err != nil || rep.Records != wantSeq || rep.Break != nil {
			t.Fatalf("verify after seq %d: %+v %v", wantSeq, rep, err)
		}
		return rec
	}
	const (
		read  = "query audit_heads"
		write = "batch[2] audit_records audit_heads"
		first = "query audit_records" // the chain's last record, when it has no head row
	)
	appendOK(a, 1, read, first, write)
	r2 := appendOK(a, 2, write)
	appendOK(b, 3, read, write)
	// a's end (2) is stale: its batch fails, a reads the head and seals again.
	appendOK(a, 4, write, read, write)
	appendOK(a, 5, write)
	// Restored to seq 2: a's end (5) is ahead of the chain.
	if err := db.Batch(ctx, []port.Statement{
		{SQL: `DELETE FROM audit_records WHERE tenant = 'slot-1' AND seq > 2`},
		{SQL: `UPDATE audit_heads SET seq = 2, hash = ? WHERE tenant = 'slot-1'`, Args: []any{r2.Hash}},
	}); err != nil {
		t.Fatal(err)
	}
	if r3 := appendOK(a, 3, write, read, write); r3.PrevHash != r2.Hash {
		t.Fatalf("after the restore: sealed onto %q, want record 2's %q", r3.PrevHash, r2.Hash)
	}
	// The head row gone: sealed onto the chain's last record.
	if _, err := db.Exec(ctx, `DELETE FROM audit_heads WHERE tenant = 'slot-1'`); err != nil {
		t.Fatal(err)
	}
	appendOK(a, 4, write, read, first, write)
	r5 := appendOK(a, 5, write)
	// Told where the chain ends (Keys.HeadsTo: a key's read), b seals there;
	// told of an end older than its own, a keeps its own.
	b.SawHead("slot-1", r5.Seq, r5.Hash)
	r6 := appendOK(b, 6, write)
	a.SawHead("slot-1", r6.Seq, r6.Hash)
	a.SawHead("slot-1", r5.Seq, r5.Hash)
	appendOK(a, 7, write)
	// Told of an end the chain has left (a read before b's append), b's
	// batch fails and it reads the head.
	b.SawHead("slot-1", 7, r5.Hash)
	appendOK(b, 8, write, read, write)
	// Told of a hash that is none, b reads the head.
	b.SawHead("slot-1", 9, "not-a-hash")
	appendOK(b, 9, read, write)
}

// Two isolates on one database, taking turns of one tenant in turn: each
// turn still makes two round trips, the key's read telling its isolate
// where the chain ends (port.Keys.HeadsTo), and the chain is whole.
func TestTurnRoundTripsTwoIsolates(t *testing.T) {
	upstreamURL := chatUpstream(t)
	shared := open(t)
	const admin = "cad_0123456789abcdef_abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst"
	admins, err := edge.ParseAdminKeys(admin)
	if err != nil {
		t.Fatal(err)
	}
	var dbs [2]*callLog
	var urls [2]string
	for i := range dbs {
		dbs[i] = &callLog{DB: shared}
		e, err := edge.New(edge.Config{DB: dbs[i], AdminKeys: admins, Upstreams: map[string]shim.Upstream{"openai": {BaseURL: upstreamURL + "/v1"}}})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(e)
		defer srv.Close()
		urls[i] = srv.URL
	}
	post := func(i int, key, path, body string) string { return postAs(t, urls[i], key, path, body) }
	key := newKey(t, urls[0], admin)
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello"}]}`
	post(0, key, "/v1/chat/completions", body)
	// Isolate 1's first request presents a tenant key: it adopts no admin
	// key, so it reads api_keys once, for its own key.
	dbs[1].take()
	post(1, key, "/v1/chat/completions", body)
	first := dbs[1].take()
	if n := countOf(first, "query api_keys"); n != 1 {
		t.Fatalf("isolate 1's first request, with a tenant key, read api_keys %d times, want once:\n  %s", n, strings.Join(first, "\n  "))
	}
	// Its first request with the admin key adopts it: one read more.
	dbs[1].take()
	newKey(t, urls[1], admin)
	if n := countOf(dbs[1].take(), "query api_keys"); n != 2 {
		t.Fatalf("isolate 1's first request with the admin key read api_keys %d times, want twice (the adoption's read, the key's)", n)
	}
	want := []string{"query api_keys", "batch[4] audit_records audit_heads shim_receipts shim_outcomes"}
	for n := range 6 {
		i := n % 2
		dbs[i].take()
		post(i, key, "/v1/chat/completions", body)
		if got := dbs[i].take(); !slices.Equal(got, want) {
			t.Fatalf("turn %d at isolate %d made the calls\n  %s\nwant\n  %s", n, i, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
	rep, err := audit.Verify(context.Background(), port.NewAudit(shared), nil)
	if err != nil || rep.Break != nil || rep.Records < 9 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

// countOf counts calls equal to call.
func countOf(calls []string, call string) int {
	n := 0
	for _, c := range calls {
		if c == call {
			n++
		}
	}
	return n
}

// ListProvisionPair reads what ListProvisions reads of each tenant, in one
// statement.
func TestProvisionPair(t *testing.T) { checkProvisionPair(t, open) }

func checkProvisionPair(t *testing.T, open opener) {
	db := &callLog{DB: open(t)}
	ctx := context.Background()
	st := shimstore.New(db, nil)
	for _, p := range []struct {
		tenant contract.TenantSlot
		id     string
	}{{"slot-1", "PROV-B"}, {"slot-1", "PROV-A"}, {"slot-2", "PROV-C"}, {"system", "PROV-S"}} {
		if _, err := st.CreateProvision(ctx, p.tenant, shim.Provision{ID: p.id, Action: "respond_directly", Response: &shim.Response{Text: p.id}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, pair := range [][2]contract.TenantSlot{{"slot-1", "system"}, {"slot-2", "system"}, {"slot-3", "system"}, {"slot-1", "slot-3"}} {
		a, b := pair[0], pair[1]
		wantA, err := st.ListProvisions(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		wantB, err := st.ListProvisions(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		db.take()
		gotA, gotB, err := st.ListProvisionPair(ctx, a, b)
		if err != nil {
			t.Fatal(err)
		}
		if calls := db.take(); len(calls) != 1 {
			t.Fatalf("ListProvisionPair made %d calls: %v", len(calls), calls)
		}
		js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
		if js(gotA) != js(wantA) || js(gotB) != js(wantB) {
			t.Fatalf("pair %v: %v %v, want %v %v", pair, gotA, gotB, wantA, wantB)
		}
	}
}
