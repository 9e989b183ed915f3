package ledger_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/shimsql"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// journalShim is a whole shim forwarding through a gateway that leaves its
// closes to the turn's commit, on db, to a fake provider answering with
// usage (100 prompt and `completion` completion tokens).
type journalShim struct {
	h      http.Handler
	caller contract.Caller
	r      int64 // one request's reservation
}

var journalPrice = upstream.Price{Input: 2_000_000, Output: 8_000_000, MaxOutputTokens: 1000}

const journalBody = `{"model":"gpt-4.1","max_tokens":100,"messages":[{"role":"user","content":"hello"}]}`

func newJournalShim(t *testing.T, db *store.DB, completion int, budgets upstream.Budgets) journalShim {
	t.Helper()
	return newJournalShimUsage(t, db, 100, completion, budgets)
}

// newJournalShimUsage is newJournalShim with the provider reporting prompt
// and completion tokens.
func newJournalShimUsage(t *testing.T, db *store.DB, prompt, completion int, budgets upstream.Budgets) journalShim {
	t.Helper()
	return newJournalShimWith(t, db, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4.1","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":`+strconv.Itoa(prompt)+`,"completion_tokens":`+strconv.Itoa(completion)+`,"total_tokens":1}}`)
	}, budgets)
}

// newJournalShimWith is newJournalShim whose provider answers with answer.
func newJournalShimWith(t *testing.T, db *store.DB, answer http.HandlerFunc, budgets upstream.Budgets) journalShim {
	t.Helper()
	up := httptest.NewServer(answer)
	t.Cleanup(up.Close)
	conf := upstream.Config{
		Routes:  map[string]upstream.Route{"openai": {Kind: upstream.KindOpenAI, BaseURL: up.URL, Models: []string{"gpt-4.1"}}},
		Plans:   map[string]upstream.Plan{"main": {Failover: upstream.FailoverNone, Models: map[string][]upstream.Step{"gpt-4.1": {{Route: "openai"}}}}},
		Prices:  map[string]upstream.Price{"openai/gpt-4.1": journalPrice},
		Budgets: budgets,
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	quiet := slog.New(slog.DiscardHandler)
	gw := gateway.New(gateway.Config{Upstream: conf, Ledger: ledger.Of(db), Holds: ledger.Of(db), Client: client, Logger: quiet, DeferClose: true})
	svc := shim.New(shim.Config{Store: shimsql.New(db), Audit: db.Audit(), Turns: shimsql.New(db), Client: client, Gateway: gw})
	return journalShim{
		h: svc.Handler(wire.ChatCompletions),
		caller: contract.Caller{Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_0123456789abcdef", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
			KeyID: "0123456789abcdef", Scopes: []contract.Scope{contract.ScopeRoute}, Grants: []string{"openai/gpt-4.1"}},
		r: int64(journalPrice.MaxCost(int64(len(journalBody)), 100)),
	}
}

// send sends one chat request and returns the answer's status.
func (s journalShim) send(ctx context.Context) int { return s.sendBody(ctx, journalBody) }

// sendBody sends one chat request with body and returns the answer's status.
func (s journalShim) sendBody(ctx context.Context, body string) int {
	req := httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader([]byte(body))).WithContext(contract.WithCaller(ctx, s.caller))
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	return rec.Code
}

// count runs a COUNT(*) query on db.
func count(t *testing.T, db *store.DB, q string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(t.Context(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestJournalWritesTheSettlementAfterTheCommit: a turn's commit stores its
// receipt carrying the settlement, and no spend row yet; the journal's
// write adds the spend row, moves the totals and clears the receipt's
// ledger column; the stale sweep then finds nothing left to write.
func TestJournalWritesTheSettlementAfterTheCommit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		sp := ledger.Of(db)
		sp.HoldJournal()
		s := newJournalShim(t, db, 20, upstream.Budgets{Key: upstream.Limit{Day: 1_000_000_000}})
		if code := s.send(ctx); code != 200 {
			t.Fatalf("status %d", code)
		}
		const cost = 100*2 + 20*8
		if n := count(t, db, `SELECT COUNT(*) FROM shim_receipts WHERE ledger IS NOT NULL`); n != 1 {
			t.Fatalf("%d receipts carry settlements after the turn, want 1", n)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM shim_spend`); n != 0 {
			t.Fatalf("%d spend rows before the journal's write, want 0", n)
		}
		day := db.Now().UTC().Format("2006-01-02")
		// The read writes the journal first: the total is exact.
		if n := spendTotal(t, sp, "key:0123456789abcdef", day); n < cost {
			t.Fatalf("key day total %d, want at least the cost %d (and the lease)", n, cost)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM shim_spend WHERE state = 'settled' AND settled = `+strconv.Itoa(cost)); n != 1 {
			t.Fatalf("%d settled spend rows of %d, want 1", n, cost)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM shim_receipts WHERE ledger IS NOT NULL`); n != 0 {
			t.Fatalf("%d receipts still carry settlements after the write", n)
		}
		if _, err := sp.ReturnLeases(ctx); err != nil {
			t.Fatal(err)
		}
		if n := spendTotal(t, sp, "key:0123456789abcdef", day); n != cost {
			t.Fatalf("key day total %d once the lease is back, want the cost %d", n, cost)
		}
		db.Now = func() time.Time { return time.Now().Add(time.Hour) }
		if _, err := sp.ReleaseStale(ctx, time.Now().Add(-6*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM shim_spend`); n != 1 {
			t.Fatalf("%d spend rows after the sweep, want the one", n)
		}
		if n := spendTotal(t, sp, "key:0123456789abcdef", day); n != cost {
			t.Fatalf("key day total %d after the sweep, want the cost %d", n, cost)
		}
	})
}

// TestJournalOfADeadProcessIsWrittenByTheSweep: a process that dies after
// its turns committed and before its journal wrote them leaves the
// settlements in the receipts and its leases in the totals; another
// process's sweep writes the settlements once (a second sweep changes
// nothing) and releases the leases: the totals hold exactly the costs.
func TestJournalOfADeadProcessIsWrittenByTheSweep(t *testing.T) {
	openTwice(t, func(t *testing.T, dead, live *store.DB) {
		ctx := t.Context()
		spDead := ledger.Of(dead)
		spDead.HoldJournal()
		s := newJournalShim(t, dead, 20, upstream.Budgets{Tenant: upstream.Limit{Day: 1_000_000_000}})
		for range 3 {
			if code := s.send(ctx); code != 200 {
				t.Fatalf("status %d", code)
			}
		}
		spDead.DropJournal() // killed
		const cost = 100*2 + 20*8
		day := time.Now().UTC().Format("2006-01-02")
		sp := ledger.Of(live)
		if n := count(t, live, `SELECT COUNT(*) FROM shim_receipts WHERE ledger IS NOT NULL`); n != 3 {
			t.Fatalf("%d receipts carry settlements, want 3", n)
		}
		held := spendTotal(t, sp, "tenant:slot-1", day)
		if held < 3*s.r {
			t.Fatalf("tenant day total %d, want at least the three reservations of %d (the dead process's lease)", held, s.r)
		}
		// Within the minute its turns began, the sweep leaves them to their
		// process.
		if _, err := sp.ReleaseStale(ctx, time.Now().Add(-6*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if n := count(t, live, `SELECT COUNT(*) FROM shim_spend`); n != 0 {
			t.Fatalf("the sweep wrote %d spend rows of turns a few moments old", n)
		}
		live.Now = func() time.Time { return time.Now().Add(2 * time.Minute) }
		for range 2 {
			if _, err := sp.ReleaseStale(ctx, time.Now().Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			if n := count(t, live, `SELECT COUNT(*) FROM shim_spend WHERE state = 'settled' AND settled = `+strconv.Itoa(cost)); n != 3 {
				t.Fatalf("%d settled spend rows after the sweep, want 3", n)
			}
			if n := count(t, live, `SELECT COUNT(*) FROM shim_receipts WHERE ledger IS NOT NULL`); n != 0 {
				t.Fatalf("%d receipts still carry settlements after the sweep", n)
			}
			if n := spendTotal(t, sp, "tenant:slot-1", day); n != 3*cost {
				t.Fatalf("tenant day total %d after the sweep, want the three costs %d", n, 3*cost)
			}
		}
	})
}

// TestJournalLeavesACostPastItsReservationToTheCommit: an attempt a lease
// holds whose cost passes its reservation moves the totals in the turn's
// own commit, so that no other attempt reserves against a total that does
// not show that cost yet.
func TestJournalLeavesACostPastItsReservationToTheCommit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		sp := ledger.Of(db)
		sp.HoldJournal()
		// 5,000 completion tokens against max_tokens 100: the provider
		// billed past the bound.
		s := newJournalShim(t, db, 5000, upstream.Budgets{Key: upstream.Limit{Day: 1_000_000_000}})
		if code := s.send(ctx); code != 200 {
			t.Fatalf("status %d", code)
		}
		const cost = 100*2 + 5000*8
		if n := count(t, db, `SELECT COUNT(*) FROM shim_spend WHERE settled = `+strconv.Itoa(cost)); n != 1 {
			t.Fatalf("%d spend rows of %d right after the turn, want 1", n, cost)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM shim_receipts WHERE ledger IS NOT NULL`); n != 0 {
			t.Fatalf("%d receipts carry settlements, want none", n)
		}
	})
}

// TestJournalTwoShimsNeverOverspend: two whole shims on two stores of one
// database (two processes), their settlements left to their journals,
// answer 100 requests each at once against a tenant budget of 40½
// reservations: their reservations and settled costs never pass the
// budget, and once both wrote their journals and returned their leases the
// total is exactly the settled spend, one spend row per answer.
func TestJournalTwoShimsNeverOverspend(t *testing.T) {
	openTwice(t, func(t *testing.T, dbA, dbB *store.DB) {
		ctx := t.Context()
		const cost = 100*2 + 20*8
		var shims [2]journalShim
		var budget int64
		for p, db := range []*store.DB{dbA, dbB} {
			r := newJournalShim(t, db, 20, upstream.Budgets{}).r
			budget = 40*r + r/2
			shims[p] = newJournalShim(t, db, 20, upstream.Budgets{Tenant: upstream.Limit{Day: upstream.Microdollars(budget)}})
		}
		var mu sync.Mutex
		codes := map[int]int{}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 200 {
			wg.Go(func() {
				<-start
				code := shims[i%2].send(ctx)
				mu.Lock()
				codes[code]++
				mu.Unlock()
			})
		}
		close(start)
		wg.Wait()
		if codes[200]+codes[429] != 200 || codes[200] == 0 || codes[429] == 0 {
			t.Fatalf("answers %v: want 200s and 429s only, both", codes)
		}
		settled := int64(codes[200]) * cost
		if settled > budget {
			t.Fatalf("%d answered at %d each: %d past the budget %d", codes[200], cost, settled, budget)
		}
		spA, spB := ledger.Of(dbA), ledger.Of(dbB)
		day := time.Now().UTC().Format("2006-01-02")
		if n := spendTotal(t, spA, "tenant:slot-1", day) + 0; n > budget {
			t.Fatalf("tenant day total %d past the budget %d", n, budget)
		}
		for _, sp := range []*ledger.Ledger{spA, spB} {
			if _, err := sp.ReturnLeases(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n := spendTotal(t, spA, "tenant:slot-1", day); n != settled {
			t.Fatalf("tenant day total %d, want the settled %d", n, settled)
		}
		if n := count(t, dbA, `SELECT COUNT(*) FROM shim_spend WHERE state = 'settled'`); n != codes[200] {
			t.Fatalf("%d spend rows for %d answers", n, codes[200])
		}
		if n := count(t, dbA, `SELECT COUNT(*) FROM shim_receipts WHERE ledger IS NOT NULL`); n != 0 {
			t.Fatalf("%d receipts still carry settlements", n)
		}
		t.Logf("answers %v, settled %d of %d", codes, settled, budget)
	})
}

// TestJournalWrittenOnceWhenTheSweepCameFirst: a process whose journal
// did not write for longer than the sweep waits (it could not reach the
// store) finds its settlements written by another process's sweep when it
// writes them at last: each is counted once.
func TestJournalWrittenOnceWhenTheSweepCameFirst(t *testing.T) {
	openTwice(t, func(t *testing.T, slow, other *store.DB) {
		ctx := t.Context()
		spSlow := ledger.Of(slow)
		spSlow.HoldJournal()
		s := newJournalShim(t, slow, 20, upstream.Budgets{})
		for range 2 {
			if code := s.send(ctx); code != 200 {
				t.Fatalf("status %d", code)
			}
		}
		other.Now = func() time.Time { return time.Now().Add(2 * time.Minute) }
		sp := ledger.Of(other)
		if _, err := sp.ReleaseStale(ctx, time.Now().Add(-6*time.Hour)); err != nil {
			t.Fatal(err)
		}
		const cost = 100*2 + 20*8
		day := time.Now().UTC().Format("2006-01-02")
		if n := spendTotal(t, sp, "key:0123456789abcdef", day); n != 2*cost {
			t.Fatalf("key day total %d after the sweep, want %d", n, 2*cost)
		}
		// The slow process writes its journal now (a read asks for it).
		if n := spendTotal(t, spSlow, "key:0123456789abcdef", day); n != 2*cost {
			t.Fatalf("key day total %d once the slow process wrote its journal, want %d", n, 2*cost)
		}
		rows, err := spSlow.Spend(ctx, "slot-1", "", time.Time{})
		if err != nil || len(rows) != 1 || rows[0].Attempts != 2 || rows[0].Settled != 2*cost {
			t.Fatalf("spend %+v, %v", rows, err)
		}
	})
}

// TestRefusalLeavesNothingBehind: with a key budget of
// 2,000 µ$, a request without max_tokens (it may cost 8,132) is refused;
// then back-to-back requests with max_tokens 100 (966 reserved, 36 settled
// each) are all answered until the settled spend and one more reservation
// would pass the budget, and the first refused then leaves no reservation
// open and no lease holding anything. The journal is held, as a loaded
// process's is between its writes: a settlement it has not written yet
// still counts at its reservation, so a refusal must write it first.
func TestRefusalLeavesNothingBehind(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		now := time.Now().UTC()
		db.Now = func() time.Time { return now }
		sp := ledger.Of(db)
		sp.HoldJournal()
		const budget, cost = 2000, 10*2 + 2*8
		s := newJournalShimUsage(t, db, 10, 2, upstream.Budgets{Key: upstream.Limit{Day: budget}})
		if code := s.sendBody(ctx, `{"model":"gpt-4.1","messages":[{"role":"user","content":"hello"}]}`); code != 429 {
			t.Fatalf("without max_tokens: status %d, want 429", code)
		}
		var codes []int
		answered := 0
		for range 40 {
			code := s.send(ctx)
			codes = append(codes, code)
			if code == 200 {
				answered++
			}
			if code == 429 && int64(answered*cost)+s.r <= budget {
				t.Fatalf("answers %v: refused with %d settled and %d reserved, within the budget %d", codes, answered*cost, s.r, budget)
			}
			if code != 200 && code != 429 {
				t.Fatalf("answers %v", codes)
			}
		}
		if want := (budget-int(s.r))/cost + 1; answered != want {
			t.Fatalf("answers %v: %d answered, want %d", codes, answered, want)
		}
		rows, err := sp.Spend(ctx, "slot-1", "", time.Time{})
		if err != nil || len(rows) != 1 || rows[0].Open != 0 || rows[0].Settled != int64(answered*cost) {
			t.Fatalf("spend %+v, %v: want %d settled, nothing open", rows, err, answered*cost)
		}
		if returned, err := sp.ReturnLeases(ctx); err != nil || returned != 0 {
			t.Fatalf("the leases still held %d, %v", returned, err)
		}
		if n := spendTotal(t, sp, "key:0123456789abcdef", now.Format("2006-01-02")); n != int64(answered*cost) {
			t.Fatalf("key day total %d, want the settled %d", n, answered*cost)
		}
	})
}

// TestJournalKeepsAnEstimate: a stream the client left before its usage
// came settles at the gateway's estimate through the turn's commit and the
// journal, and the spend row says it is estimated.
func TestJournalKeepsAnEstimate(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx, cancel := context.WithCancel(t.Context())
		sp := ledger.Of(db)
		sp.HoldJournal()
		s := newJournalShimWith(t, db, func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello world!\"}}]}\n\n")
			w.(http.Flusher).Flush()
			cancel() // the client leaves once the first delta is out
			<-r.Context().Done()
		}, upstream.Budgets{Key: upstream.Limit{Day: 1_000_000_000}})
		req := httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader([]byte(`{"model":"gpt-4.1","stream":true,"max_tokens":100,"messages":[]}`))).
			WithContext(contract.WithCaller(ctx, s.caller))
		s.h.ServeHTTP(httptest.NewRecorder(), req)
		if n := count(t, db, `SELECT COUNT(*) FROM shim_receipts WHERE ledger LIKE '%"estimated":true%'`); n != 1 {
			t.Fatalf("%d receipts carry an estimated settlement, want 1", n)
		}
		rows, err := sp.Spend(t.Context(), "slot-1", "", time.Time{})
		if err != nil || len(rows) != 1 || rows[0].Settled == 0 || rows[0].Estimated != rows[0].Settled || rows[0].Settled >= rows[0].Reserved {
			t.Fatalf("spend %+v, %v: want an estimate below the reservation, marked", rows, err)
		}
	})
}
