package main

import (
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/internal/pgtest"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// distanceDelay is what the latency proxy adds each way in the distance
// tests: a managed Postgres a few milliseconds away.
const distanceDelay = 2 * time.Millisecond

// backgroundApp is the application_name of the store's pool for work no
// request waits for (store.DB.Background).
const backgroundApp = "caduceus background"

// cacheTables are the tables whose rows serve keeps in caches with a TTL
// (keys and their grants 5 s, holds 5 s, provisions and context entries
// 1 s): a read of one refills a cache, at most once per TTL per process,
// whichever request comes first.
var cacheTables = []string{"api_keys", "api_key_grants", "shim_holds", "shim_provisions", "shim_context"}

// TestGovernedTurnRoundTrips: one serve on Postgres, through a latency
// proxy that adds distanceDelay each way and counts round trips
// (pgtest.Proxy), answers governed chat completions (a plan, a price, a
// key budget served from leases, a receipt, its settlement and its audit
// record) from one client, one at a time. Each request, once the first
// three have leased and warmed the caches, waits for at most one round
// trip before its answer: the receipt's commit, against the chain head
// the process's last commit left (store/known.go) — BEGIN, the head's
// check (which locks it), the audit record, the receipt (its settlement
// in its ledger column), the head and the COMMIT, pipelined — not
// counting the round trips of the background pool (the spend journal,
// lease top-ups, the ledger sweep), which no request waits for, and a
// read that refills one of the caches with a TTL (cacheTables), which
// the test counts and reports apart. Every answered receipt is stored and
// the audit chain verifies.
func TestGovernedTurnRoundTrips(t *testing.T) {
	dsn := os.Getenv(storetest.EnvPostgres)
	if dsn == "" {
		t.Skip("CADUCEUS_TEST_POSTGRES not set; .ci/run sets it")
	}
	f := governedThroughProxy(t, dsn, `{day: 100}`)
	px, in, key, schema, data := f.px, f.in, f.key, f.schema, f.data
	px.Trace(true)

	const warm, measured = 3, 20
	var receipts []string
	var own, refills []int
	var last []pgtest.Trip
	for i := range warm + measured {
		px.Trips()
		receipts = append(receipts, governedTurn(t, in.url, key))
		if i < warm {
			continue
		}
		var mine, refill []pgtest.Trip
		for _, tr := range px.Trips() {
			switch {
			case tr.App == backgroundApp:
			case refillsCache(tr):
				refill = append(refill, tr)
			default:
				mine = append(mine, tr)
			}
		}
		own, refills, last = append(own, len(mine)), append(refills, len(refill)), mine
		if len(mine) > 1 {
			t.Errorf("request %d waited for %d round trips before its answer, want at most 1:\n%s", i, len(mine), trips(mine))
		}
	}
	t.Logf("round trips before the answer, by request (not counting cache refills): %v; cache refills: %v; the last request's:\n%s", own, refills, trips(last))
	if s := slices.Sorted(slices.Values(own)); s[len(s)/2] > 1 {
		t.Errorf("median %d round trips", s[len(s)/2])
	}

	// What was answered is stored, and the chain verifies.
	checkReceipts(t, schema, receipts)
	code, out, errOut := cli(t, "audit", "verify", "--store", schema, "--data", data)
	if code != 0 || !strings.HasPrefix(out, "ok: verified") {
		t.Errorf("audit verify: %d %s %s", code, out, errOut)
	}
}

// governedTurn sends one chat completion with key and returns its
// receipt id; anything but a 200 with one fails the test.
func governedTurn(t *testing.T, url, key string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4.1","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	r := resp.Header.Get("X-Caduceus-Receipt")
	if resp.StatusCode != 200 || r == "" {
		t.Fatalf("turn: %d (receipt %q) %s", resp.StatusCode, r, b)
	}
	return r
}

// refillsCache reports whether a round trip only reads cacheTables.
func refillsCache(tr pgtest.Trip) bool {
	if len(tr.Statements) == 0 {
		return false
	}
	for _, s := range tr.Statements {
		s = strings.TrimPrefix(s, "prepare: ") // on a connection that has not run it
		if !strings.HasPrefix(s, "SELECT ") || !slices.ContainsFunc(cacheTables, func(table string) bool {
			return strings.Contains(s, " FROM "+table+" ")
		}) {
			return false
		}
	}
	return true
}

// trips lists round trips one a line.
func trips(ts []pgtest.Trip) string {
	var b strings.Builder
	for _, tr := range ts {
		fmt.Fprintf(&b, "  %s\n", tr)
	}
	return b.String()
}

// checkReceipts fails the test unless every receipt of ids is stored in
// the Postgres store dsn names.
func checkReceipts(t *testing.T, dsn string, ids []string) {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM shim_receipts WHERE id = ANY($1)`, ids).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != len(ids) {
		t.Errorf("%d of %d answered receipts stored", n, len(ids))
	}
}

// EnvDistanceBench, set to a duration ("3s"), runs TestDistanceBench with
// that measured time per target per round.
const EnvDistanceBench = "CADUCEUS_DISTANCE_BENCH"

// EnvDistancePipeline, set to on, runs TestDistanceBench with the
// pipelined group commit (store.PipelineParam in the store's DSN).
const EnvDistancePipeline = "CADUCEUS_DISTANCE_PIPELINE"

// TestDistanceBench measures, and checks nothing timed: `caduceus bench`
// on Postgres at loopback and through the latency proxy (distanceDelay
// each way), at 1 connection (the latency each target adds over the fake
// upstream) and at 16 (throughput), each on a fresh schema, the four runs
// in turn (loopback then proxy, 1 connection then 16) and logged whole.
// It runs only when CADUCEUS_DISTANCE_BENCH holds the duration per target
// per round, on a quiet machine:
//
//	CADUCEUS_TEST_POSTGRES=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//	CADUCEUS_DISTANCE_BENCH=3s go test -count=1 -run TestDistanceBench -v -timeout 30m ./cmd/caduceus/
func TestDistanceBench(t *testing.T) {
	dsn, per := os.Getenv(storetest.EnvPostgres), os.Getenv(EnvDistanceBench)
	if dsn == "" || per == "" {
		t.Skip("a measurement: set CADUCEUS_TEST_POSTGRES and CADUCEUS_DISTANCE_BENCH (a duration per target per round) to run it")
	}
	if _, err := time.ParseDuration(per); err != nil {
		t.Fatalf("%s=%q: want a duration such as 3s", EnvDistanceBench, per)
	}
	for _, conns := range []string{"1", "16"} {
		for _, delay := range []time.Duration{0, distanceDelay} {
			schema := storetest.FreshSchema(t, dsn)
			where, storeDSN := "loopback", schema
			if delay > 0 {
				px := pgtest.NewProxy(t, schema, delay)
				where, storeDSN = fmt.Sprintf("through the proxy, %s each way", delay), px.DSN(schema)
			}
			if v := os.Getenv(EnvDistancePipeline); v != "" {
				storeDSN += "&" + store.PipelineParam + "=" + v
				where += ", pipelined"
			}
			code, out, errOut := cli(t, "bench", "--store", storeDSN, "--conns", conns, "--rounds", "3", "--duration", per, "--warmup", "1s")
			if code != 0 {
				t.Fatalf("bench %s, %s connections: %d\n%s\n%s", where, conns, code, out, errOut)
			}
			t.Logf("Postgres %s, %s connections:\n%s", where, conns, out)
		}
	}
}

// farServe is a governed serve whose store is through a pgtest.Proxy.
type farServe struct {
	px           *pgtest.Proxy
	in           *instance
	key          string // a route key of slot-1
	schema, data string // the store's own DSN (not through the proxy), the data directory
}

// governedThroughProxy starts serve on a fresh schema of dsn through a
// pgtest.Proxy adding distanceDelay each way, governed (one route, one
// plan, priced, a key budget of budget, the ledger swept every 5 m), and
// makes a route key for slot-1.
func governedThroughProxy(t *testing.T, dsn, budget string) farServe {
	t.Helper()
	f := farServe{schema: storetest.FreshSchema(t, dsn), data: t.TempDir()}
	f.px = pgtest.NewProxy(t, f.schema, distanceDelay)
	far := f.px.DSN(f.schema)
	upSrv := newHTTPServer(t, &fakeProvider{name: "openai"})
	file := writeConfig(t, f.data, oneRouteShim(upSrv, `{input: 0, output: 8, max_output_tokens: 100}`, budget)+"  ledger_sweep: 5m\n")
	f.key = newTenantKey(t, []string{"--store", far, "--data", f.data}, "slot-1", "--scopes", "route", "--models", "openai/gpt-4.1")
	f.in = start(t, "--store", far, "--config", file)
	return f
}
