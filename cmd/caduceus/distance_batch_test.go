package main

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/internal/pgtest"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestGovernedBatchRoundTrips: one serve on Postgres through the latency
// proxy, 16 clients sending governed chat completions at once. It counts,
// from the proxy's trace, what reaches Postgres on the request path: each
// group commit (a round trip carrying a COMMIT that is not the
// background pool's) must be one round trip — BEGIN, its heads' checks,
// its turns' writes and the COMMIT together — and carry on average more
// than one turn; any other round trip of the request path is a cache
// refill (cacheTables), a prepare, or pgx's liveness ping of a
// connection that sat idle in the pool for over a second (stdlib's
// ResetSession; at most once a connection per second of the run, which
// the test checks). It logs the counts.
func TestGovernedBatchRoundTrips(t *testing.T) {
	dsn := os.Getenv(storetest.EnvPostgres)
	if dsn == "" {
		t.Skip("CADUCEUS_TEST_POSTGRES not set; .ci/run sets it")
	}
	f := governedThroughProxy(t, dsn, `{day: 1000}`)
	px, in, key, schema := f.px, f.in, f.key, f.schema

	const conns, each = 16, 15
	turns := func() []string {
		var mu sync.Mutex
		var ids []string
		var wg sync.WaitGroup
		for range conns {
			wg.Go(func() {
				for range each {
					r := governedTurn(t, in.url, key)
					mu.Lock()
					ids = append(ids, r)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return ids
	}
	turns() // warm: leases, caches, known heads
	px.Trace(true)
	px.Trips()
	began := time.Now()
	ids := turns()
	wall := time.Since(began)
	px.Trace(false)
	all := px.Trips()

	var tl batchTally
	for _, tr := range all {
		tl.add(tr)
	}
	t.Logf("%d turns in %v (%.0f a second, on this machine): %d round trips: %d background, %d cache refills %v, %d prepares, %d liveness pings, %d group commits of %d receipts (%.1f turns a commit)",
		len(ids), wall, float64(len(ids))/wall.Seconds(), len(all), tl.background, tl.refills, tl.refilled, tl.prepares, len(tl.pings), len(tl.sizes), tl.receipts, float64(tl.receipts)/float64(max(len(tl.sizes), 1)))
	perConn := map[int]int{}
	for _, tr := range tl.pings {
		perConn[tr.Conn]++
	}
	for conn, n := range perConn {
		if limit := 1 + int(wall/time.Second); n > limit {
			t.Errorf("conn %d pinged %d times in %v, want at most %d (once per second idle)", conn, n, wall, limit)
		}
	}
	t.Logf("group commit round trip: %s; of it, the server: %s; the proxy beyond its %v each way: %s",
		quantiles(tl.took), quantiles(tl.server), distanceDelay, quantiles(tl.excess))
	hist := map[int]int{}
	for _, n := range tl.sizes {
		hist[n]++
	}
	for _, n := range slices.Sorted(maps.Keys(hist)) {
		t.Logf("  commits of %d turns: %d", n, hist[n])
	}
	if len(tl.others) > 0 {
		t.Errorf("%d round trips of the request path that are neither a group commit in one round trip, a cache refill nor a prepare:\n%s", len(tl.others), trips(tl.others[:min(len(tl.others), 30)]))
	}
	if tl.receipts != len(ids) {
		t.Errorf("%d receipts written by one-round-trip group commits, want %d", tl.receipts, len(ids))
	}
	if len(tl.sizes)*2 > len(ids) {
		t.Errorf("%d group commits for %d turns: want at least 2 turns a commit", len(tl.sizes), len(ids))
	}
	checkReceipts(t, schema, ids)
}

// batchTally sorts a trace's round trips.
type batchTally struct {
	background, refills, prepares, receipts int
	refilled                                map[string]int
	sizes                                   []int // turns of each group commit
	took, server, excess                    []time.Duration
	pings, others                           []pgtest.Trip
}

func (tl *batchTally) add(tr pgtest.Trip) {
	switch {
	case tr.App == backgroundApp:
		tl.background++
	case refillsCache(tr):
		tl.refills++
		if tl.refilled == nil {
			tl.refilled = map[string]int{}
		}
		tl.refilled[strings.TrimPrefix(tr.Statements[0], "prepare: ")]++
	case !slices.ContainsFunc(tr.Statements, func(s string) bool { return !strings.HasPrefix(s, "prepare: ") }):
		// A connection of the pool preparing statements it has not run
		// before (pgx's statement cache), once per connection.
		tl.prepares++
	case len(tr.Statements) == 1 && tr.Statements[0] == "-- ping":
		// pgx's stdlib pings a connection idle for over a second before
		// handing it out again; at 16 clients the pool's deeper
		// connections sit idle between bursts.
		tl.pings = append(tl.pings, tr)
	case len(tr.Statements) > 1 && tr.Statements[0] == "BEGIN" && tr.Statements[len(tr.Statements)-1] == "COMMIT":
		n := 0
		for _, s := range tr.Statements {
			if strings.HasPrefix(s, "INSERT INTO shim_receipts") {
				n++
			}
		}
		tl.receipts += n
		tl.sizes = append(tl.sizes, n)
		tl.took, tl.server = append(tl.took, tr.Took), append(tl.server, tr.Server)
		tl.excess = append(tl.excess, tr.Took-tr.Server-2*distanceDelay)
	default:
		tl.others = append(tl.others, tr)
	}
}

// quantiles describes ds.
func quantiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	ds = slices.Sorted(slices.Values(ds))
	r := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
	return fmt.Sprintf("min %v, median %v, p90 %v, max %v", r(ds[0]), r(ds[len(ds)/2]), r(ds[len(ds)*9/10]), r(ds[len(ds)-1]))
}
