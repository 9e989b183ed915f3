package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestThreeProcessesOnOnePostgres: three serve processes on one Postgres
// schema, with one config, take governed LLM turns (streamed and not) from
// 300 clients at once, 100 on each, against one key's daily budget of 250
// turns. Every turn costs exactly what it reserved (no input
// price, 100 output tokens asked and reported), so the ledger's promise is
// exact: the spend settled across the three never passes the budget, equals
// the answered turns' cost, and every answer a client got has its receipt
// and spend row; the processes stop with no reservation open and the
// tenant's one audit chain, appended by all three, verifies.
func TestThreeProcessesOnOnePostgres(t *testing.T) {
	dsn := os.Getenv(storetest.EnvPostgres)
	if dsn == "" {
		t.Skip("CADUCEUS_TEST_POSTGRES not set; .ci/run sets it")
	}
	if testing.Short() {
		t.Skip("starts three serve processes")
	}
	pg := storetest.FreshSchema(t, dsn)
	up := &fakeProvider{name: "openai"}
	upSrv := newHTTPServer(t, up)
	data := t.TempDir()
	const budgetMicros, turnMicros = 200_000, 100 * 8 // $0.20; 100 output tokens at $8 a million
	file := writeConfig(t, data, oneRouteShim(upSrv, `{input: 0, output: 8, max_output_tokens: 100}`, `{day: 0.2}`))
	storeArgs := []string{"--store", pg, "--data", data}
	code, out, errOut := cli(t, append([]string{"keys", "create", "--tenant", "slot-1", "--scopes", "route", "--models", "openai/gpt-4.1"}, storeArgs...)...)
	if code != 0 {
		t.Fatalf("keys create: %s", errOut)
	}
	key := strings.TrimSpace(out)

	var procs []*proc
	for range 3 {
		procs = append(procs, startProc(t, nil, append([]string{"--config", file}, storeArgs...)...))
	}

	var (
		mu        sync.Mutex
		receipts  []string
		answered  [3]int
		refused   atomic.Int64
		unexpects []string
		wg        sync.WaitGroup
	)
	client := &http.Client{Timeout: 30 * time.Second}
	deadline := time.Now().Add(4 * time.Second)
	for c := range 300 {
		p := c % 3
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				body := fmt.Sprintf(`{"model":"gpt-4.1","max_tokens":100,"stream":%v,"messages":[{"role":"user","content":"turn %d of client %d"}]}`, (i+c)%2 == 0, i, c)
				req, _ := http.NewRequest("POST", procs[p].url+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					t.Errorf("process %d: %v", p, err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				mu.Lock()
				switch {
				case resp.StatusCode == 200:
					receipts = append(receipts, resp.Header.Get("X-Caduceus-Receipt"))
					answered[p]++
				case strings.Contains(string(b), "budget"):
					refused.Add(1)
				default:
					unexpects = append(unexpects, fmt.Sprintf("process %d: %d %s", p, resp.StatusCode, b))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, p := range procs {
		p.stop(t)
	}
	for _, u := range unexpects[:min(len(unexpects), 5)] {
		t.Errorf("neither an answer nor a budget refusal: %s", u)
	}
	for p, n := range answered {
		if n == 0 {
			t.Errorf("process %d answered nothing", p)
		}
	}
	if refused.Load() == 0 {
		t.Fatalf("the budget never ran out (%d answered): the test did not reach the limit", len(receipts))
	}

	db, err := store.Open(context.Background(), pg, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	one := func(q string) int64 {
		t.Helper()
		got, err := store.AppendRows([]int64(nil), store.QueryRows(t.Context(), db, "sum", store.ScanValue[int64], q))
		if err != nil || len(got) != 1 {
			t.Fatalf("%s: %v %v", q, got, err)
		}
		return got[0]
	}
	settled := one(`SELECT COALESCE(SUM(settled), 0) FROM shim_spend WHERE state <> 'reserved'`)
	if settled > budgetMicros {
		t.Errorf("settled %d µ$ across three processes, past the budget of %d", settled, budgetMicros)
	}
	if want := int64(len(receipts)) * turnMicros; settled != want {
		t.Errorf("settled %d µ$ for %d answered turns of %d µ$ (want %d)", settled, len(receipts), turnMicros, want)
	}
	if open := one(`SELECT COUNT(*) FROM shim_spend WHERE state = 'reserved'`); open != 0 {
		t.Errorf("%d reservations open after every process stopped", open)
	}
	stored := map[string]bool{}
	ids, err := store.AppendRows([]string(nil), store.QueryRows(t.Context(), db, "ids", store.ScanValue[string], `SELECT id FROM shim_receipts`))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		stored[id] = true
	}
	for _, id := range receipts {
		if !stored[id] {
			t.Errorf("answered receipt %s is not in the store", id)
		}
	}
	if code, out, errOut := cli(t, append([]string{"audit", "verify"}, storeArgs...)...); code != 0 {
		t.Errorf("audit verify: %d %s %s", code, out, errOut)
	}
	t.Logf("answered %v (%d in all, %d µ$ of %d), %d refused for the budget", answered, len(receipts), settled, budgetMicros, refused.Load())
}

// TestThreeProcessesShareHoldsRevocationsAndSpend: three serve processes
// on one Postgres schema. A key revoked through one is refused by the other
// two, which had it cached; a provider's 429 seen by one holds the model in
// the other two, which then refuse without calling the provider; and
// /v1/spend agrees on all three.
func TestThreeProcessesShareHoldsRevocationsAndSpend(t *testing.T) {
	dsn := os.Getenv(storetest.EnvPostgres)
	if dsn == "" {
		t.Skip("CADUCEUS_TEST_POSTGRES not set; .ci/run sets it")
	}
	if testing.Short() {
		t.Skip("starts three serve processes")
	}
	pg := storetest.FreshSchema(t, dsn)
	up := &fakeProvider{name: "openai"}
	upSrv := newHTTPServer(t, up)
	data := t.TempDir()
	file := writeConfig(t, data, oneRouteShim(upSrv, `{input: 0, output: 8, max_output_tokens: 100}`, `{day: 10}`))
	storeArgs := []string{"--store", pg, "--data", data}
	code, out, errOut := cli(t, append([]string{"keys", "create", "--tenant", "slot-1", "--scopes", "admin,route", "--models", "openai/gpt-4.1"}, storeArgs...)...)
	if code != 0 {
		t.Fatalf("keys create: %s", errOut)
	}
	admin := strings.TrimSpace(out)
	var procs []*proc
	for range 3 {
		procs = append(procs, startProc(t, nil, append([]string{"--config", file}, storeArgs...)...))
	}
	a, b, c := procs[0], procs[1], procs[2]
	client := &http.Client{Timeout: 30 * time.Second}
	do := func(p *proc, method, path, key, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, p.url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(got)
	}
	turn := func(p *proc, key string) (int, string) {
		return do(p, "POST", "/v1/chat/completions", key, `{"model":"gpt-4.1","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`)
	}

	// Revocation: a route key used (and so cached) on all three, revoked
	// through c.
	st, body := do(c, "POST", "/v1/admin/keys", admin, `{"tenant":"slot-1","scopes":["route"],"models":["openai/gpt-4.1"]}`)
	if st != http.StatusCreated {
		t.Fatalf("create a key through c: %d %s", st, body)
	}
	var made struct{ Key, ID string }
	if err := json.Unmarshal([]byte(body), &made); err != nil {
		t.Fatal(err)
	}
	for i, p := range procs {
		if st, body := turn(p, made.Key); st != 200 {
			t.Fatalf("process %d before the revocation: %d %s", i, st, body)
		}
	}
	if st, body := do(c, "DELETE", "/v1/admin/keys/"+made.ID, admin, ""); st/100 != 2 {
		t.Fatalf("revoke through c: %d %s", st, body)
	}
	revoked := time.Now()
	answered := 3 // the turns of the key before its revocation
	for i, p := range []*proc{a, b} {
		for {
			st, _ := turn(p, made.Key)
			if st == http.StatusUnauthorized {
				t.Logf("process %d refused the revoked key %v after the revocation answered", i, time.Since(revoked))
				break
			}
			if st != 200 {
				t.Fatalf("process %d: %d for the key being revoked", i, st)
			}
			answered++ // taken before the notification arrived: spent
			if time.Since(revoked) > auth.DefaultCacheTTL {
				t.Fatalf("process %d still took the revoked key after %v (its cache TTL): no notification reached it", i, time.Since(revoked))
			}
		}
	}

	// /v1/spend agrees on every process: each writes its settlements
	// through its own journal (at most journalDelay, 20 ms, after the
	// answer), so the three agree once those are written.
	var spends []string
	for start := time.Now(); ; {
		spends = spends[:0]
		for _, p := range procs {
			st, body := do(p, "GET", "/v1/spend", admin, "")
			if st != 200 {
				t.Fatalf("spend: %d %s", st, body)
			}
			spends = append(spends, body)
		}
		want := fmt.Sprintf(`"attempts":%d,"reserved_microdollars":%d,"settled_microdollars":%[2]d`, answered, answered*800)
		if spends[0] == spends[1] && spends[1] == spends[2] && strings.Contains(spends[0], want) {
			t.Logf("/v1/spend agreed on the three processes %v after the last answer", time.Since(start))
			break
		}
		if time.Since(start) > 2*time.Second {
			t.Fatalf("/v1/spend differs between processes (or misses the %d turns) 2 s after the answers:\n%s\n%s\n%s", answered, spends[0], spends[1], spends[2])
		}
		time.Sleep(5 * time.Millisecond)
	}

	// Holds: the provider answers 429 (Retry-After 120) to b; after the
	// 100 ms the issue allows, a and c refuse without calling it. Their
	// copies of the holds are read just before (once their listeners are
	// surely up, which drops a copy), so only a notification tells them.
	for range 2 {
		for i, p := range procs {
			if st, body := turn(p, admin); st != 200 {
				t.Fatalf("process %d before the hold: %d %s", i, st, body)
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	up.fail.Store(429)
	before := up.calls.Load()
	if st, body := turn(b, admin); st != http.StatusTooManyRequests {
		t.Fatalf("b's turn with the provider limiting: %d %s", st, body)
	}
	if n := up.calls.Load() - before; n != 1 {
		t.Fatalf("b called the provider %d times, want 1", n)
	}
	time.Sleep(100 * time.Millisecond)
	for i, p := range []*proc{a, c, a, c} {
		if st, body := turn(p, admin); st != http.StatusTooManyRequests {
			t.Errorf("turn %d on a or c during the hold: %d %s", i, st, body)
		}
	}
	if n := up.calls.Load() - before; n != 1 {
		t.Errorf("the provider was called %d times while held, want only b's one", n)
	}
}

// TestKillOneOfThreeUnderLoad: three serve processes on one Postgres
// schema take governed turns from 12 clients; one is killed with SIGKILL in
// the middle. Every turn a client got an answer for has its receipt and
// its settled spend row (the dead process's unwritten settlements are
// written from its receipts by the survivors' sweep), the dead process's
// budget leases go back to the budget (shim.ledger_sweep: 1s, so it is
// taken for dead after 6 s of silence), the day total is exactly what was
// settled once the survivors stop, and the tenant's audit chain verifies.
// Six more clients send trader decisions and executor ticks to the three:
// every one acknowledged, on the victim too, is in the store.
func TestKillOneOfThreeUnderLoad(t *testing.T) {
	dsn := os.Getenv(storetest.EnvPostgres)
	if dsn == "" {
		t.Skip("CADUCEUS_TEST_POSTGRES not set; .ci/run sets it")
	}
	if testing.Short() {
		t.Skip("starts three serve processes")
	}
	pg := storetest.FreshSchema(t, dsn)
	up := &fakeProvider{name: "openai"}
	upSrv := newHTTPServer(t, up)
	data := t.TempDir()
	const turnMicros = 100 * 8
	file := writeConfig(t, data, oneRouteShim(upSrv, `{input: 0, output: 8, max_output_tokens: 100}`, `{day: 100}`)+"  ledger_sweep: 1s\n")
	storeArgs := []string{"--store", pg, "--data", data}
	key := newKey(t, storeArgs, "--scopes", "route", "--models", "openai/gpt-4.1")
	opKey := newKey(t, storeArgs, "--scopes", "route,operate")
	cronKey := newKey(t, storeArgs, "--scopes", "operate", "--context", "cron", "--harness", "autotrader")
	if code, out, errOut := cli(t, append([]string{"trader", "import", "testdata/strategies.yaml"}, storeArgs...)...); code != 0 {
		t.Fatalf("trader import: %s %s", out, errOut)
	}
	var procs []*proc
	for range 3 {
		procs = append(procs, startProc(t, nil, append([]string{"--config", file, "--skills", exSkills, "--scenario", exScenario}, storeArgs...)...))
	}
	victim := procs[1]

	var (
		mu               sync.Mutex
		receipts         []string
		decisions, ticks []string
		answered         [3]int
		failed           [3]int
		victimAcks       [2]int // decisions, ticks the victim acknowledged
		wg               sync.WaitGroup
	)
	client := &http.Client{Timeout: 30 * time.Second}
	// The clients run until 1.5 s after the kill, which comes once the
	// victim has acknowledged turns, decisions and ticks (or 20 s).
	var stopAt atomic.Int64
	stopAt.Store(time.Now().Add(time.Hour).UnixNano())
	running := func() bool { return time.Now().UnixNano() < stopAt.Load() }
	modes := []string{"normal", "reduced", "defensive"}
	// Six more clients, two per process: trader decisions and executor
	// ticks, each recording what it was acknowledged.
	for c := range 6 {
		p := c % 3
		wg.Go(func() {
			for i := 0; running(); i++ {
				var path, k, body, id string
				var hdr []string
				if c < 3 {
					id = fmt.Sprintf("dec_kill_%d_%d", c, i)
					path, k = "/v1/trader/decisions", opKey
					body = decisionBody(id, modes[i%3], "kill test")
				} else {
					id = fmt.Sprintf("tick-kill-%d-%06d", c, i)
					path, k, hdr = "/v1/executor/ticks", cronKey, []string{"Idempotency-Key", id}
					body = tickBody("kill test")
				}
				req, _ := http.NewRequest("POST", procs[p].url+path, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+k)
				req.Header.Set("Content-Type", "application/json")
				for j := 0; j+1 < len(hdr); j += 2 {
					req.Header.Set(hdr[j], hdr[j+1])
				}
				resp, err := client.Do(req)
				if err != nil {
					if p != 1 {
						t.Errorf("process %d: %s: %v", p, path, err)
						return
					}
					time.Sleep(10 * time.Millisecond) // the victim is gone
					continue
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 {
					if p != 1 {
						t.Errorf("process %d: %s: %d %s %v", p, path, resp.StatusCode, b, err)
						return
					}
					continue // cut by the kill: not acknowledged
				}
				mu.Lock()
				if c < 3 {
					decisions = append(decisions, id)
				} else {
					ticks = append(ticks, id)
				}
				if p == 1 {
					victimAcks[c/3]++
				}
				mu.Unlock()
			}
		})
	}
	for c := range 12 {
		p := c % 3
		wg.Go(func() {
			for i := 0; running(); i++ {
				body := fmt.Sprintf(`{"model":"gpt-4.1","max_tokens":100,"stream":%v,"messages":[{"role":"user","content":"turn %d of client %d"}]}`, i%2 == 0, i, c)
				req, _ := http.NewRequest("POST", procs[p].url+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					mu.Lock()
					failed[p]++
					mu.Unlock()
					if p == 1 {
						time.Sleep(10 * time.Millisecond) // the victim is gone
						continue
					}
					t.Errorf("process %d: %v", p, err)
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				mu.Lock()
				switch {
				case err == nil && resp.StatusCode == 200:
					receipts = append(receipts, resp.Header.Get("X-Caduceus-Receipt"))
					answered[p]++
				case p == 1:
					failed[p]++ // cut by the kill: not acknowledged
				default:
					t.Errorf("process %d: %d %s", p, resp.StatusCode, b)
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(1500 * time.Millisecond)
	for waited := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		ready := answered[1] > 0 && victimAcks[0] > 0 && victimAcks[1] > 0
		mu.Unlock()
		if ready || time.Since(waited) > 20*time.Second {
			break
		}
	}
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	stopAt.Store(killed.Add(1500 * time.Millisecond).UnixNano())
	wg.Wait()
	if answered[1] == 0 || answered[0] == 0 || answered[2] == 0 || victimAcks[0] == 0 || victimAcks[1] == 0 {
		t.Fatalf("answered %v turns, the victim %d decisions and %d ticks: every process must answer before the kill", answered, victimAcks[0], victimAcks[1])
	}

	db, err := store.Open(context.Background(), pg, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	one := func(q string) int64 {
		t.Helper()
		got, err := store.AppendRows([]int64(nil), store.QueryRows(t.Context(), db, "n", store.ScanValue[int64], q))
		if err != nil || len(got) != 1 {
			t.Fatalf("%s: %v %v", q, got, err)
		}
		return got[0]
	}
	// The survivors take the victim for dead after six silent sweeps and
	// release its leases (its holder row goes), and write what its journal
	// left in its receipts.
	for {
		holders := one(`SELECT COUNT(*) FROM shim_ledger_holders`)
		pending := one(`SELECT COUNT(*) FROM shim_receipts WHERE ledger IS NOT NULL`)
		if holders == 2 && pending == 0 {
			t.Logf("the victim's leases released and settlements written %v after the kill", time.Since(killed).Round(time.Millisecond))
			break
		}
		if time.Since(killed) > 30*time.Second {
			t.Fatalf("30 s after the kill: %d lease holders (want the 2 survivors), %d receipts with unwritten settlements", holders, pending)
		}
		time.Sleep(100 * time.Millisecond)
	}
	procs[0].stop(t)
	procs[2].stop(t)

	stored := map[string]bool{}
	ids, err := store.AppendRows([]string(nil), store.QueryRows(t.Context(), db, "ids", store.ScanValue[string], `SELECT id FROM shim_receipts`))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		stored[id] = true
	}
	for _, id := range receipts {
		if !stored[id] {
			t.Errorf("answered receipt %s is not in the store", id)
		}
	}
	// Every stored receipt is one answered turn (some of the victim's were
	// committed but never reached their client), each settled once.
	settled := one(`SELECT COALESCE(SUM(settled), 0) FROM shim_spend WHERE state = 'settled'`)
	if want := int64(len(ids)) * turnMicros; settled != want {
		t.Errorf("settled %d µ$ for %d stored receipts of %d µ$ (want %d)", settled, len(ids), turnMicros, want)
	}
	if held := one(`SELECT COALESCE(SUM(amount), 0) FROM shim_spend_leases WHERE state = 'open'`); held != 0 {
		t.Errorf("open leases hold %d µ$ after the survivors stopped and the victim was swept", held)
	}
	if day := one(`SELECT COALESCE(SUM(amount), 0) FROM shim_spend_totals WHERE scope LIKE 'key:%' AND length(period) = 10`); day != settled {
		t.Errorf("the day totals hold %d µ$, the settled spend is %d: the victim's leases still count", day, settled)
	}
	for what, q := range map[string]string{"decision": `SELECT decision_id FROM trader_decisions`,
		"tick": `SELECT key FROM idempotency WHERE scope = 'executor.tick' AND result IS NOT NULL`} {
		got, err := store.AppendRows([]string(nil), store.QueryRows(t.Context(), db, what, store.ScanValue[string], q))
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, id := range got {
			have[id] = true
		}
		acked := decisions
		if what == "tick" {
			acked = ticks
		}
		for _, id := range acked {
			if !have[id] {
				t.Errorf("acknowledged %s %s is not in the store", what, id)
			}
		}
	}
	if code, out, errOut := cli(t, append([]string{"audit", "verify"}, storeArgs...)...); code != 0 {
		t.Errorf("audit verify: %d %s %s", code, out, errOut)
	}
	t.Logf("answered %v, cut %d on the victim; %d receipts stored (%d acknowledged); %d decisions and %d ticks acknowledged (the victim's: %v)",
		answered, failed[1], len(ids), len(receipts), len(decisions), len(ticks), victimAcks)
}
