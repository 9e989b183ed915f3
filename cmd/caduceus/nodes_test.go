package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
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
	// answer, which its receipt's commit put there), and a read of the
	// spend writes that process's journal first; so once each process has
	// answered one read, the three agree.
	spend := func(p *proc) string {
		t.Helper()
		st, body := do(p, "GET", "/v1/spend", admin, "")
		if st != 200 {
			t.Fatalf("spend: %d %s", st, body)
		}
		return body
	}
	for _, p := range procs {
		spend(p)
	}
	spends := []string{spend(a), spend(b), spend(c)}
	want := fmt.Sprintf(`"attempts":%d,"reserved_microdollars":%d,"settled_microdollars":%[2]d`, answered, answered*800)
	if spends[0] != spends[1] || spends[1] != spends[2] || !strings.Contains(spends[0], want) {
		t.Fatalf("/v1/spend differs between processes (or misses the %d turns) once each wrote its journal:\n%s\n%s\n%s", answered, spends[0], spends[1], spends[2])
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
		// A serve process says nothing when its holds listener is up: no event to wait for.
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
	// The 100 ms is the bound on the hold reaching the other processes: the time itself is under test.
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
// schema take governed turns of three tenants (slot-1, slot-2, slot-3)
// from 12 clients, each taking the tenants in turn, so every process's
// group commits hold several tenants' audit chain heads at once; one
// process is killed with SIGKILL in the middle. For each tenant, every
// turn a client got an answer for has its receipt and its settled spend
// row (the dead process's unwritten settlements are written from its
// receipts by the survivors' sweep), the dead process's budget leases go
// back to the budget (shim.ledger_sweep: 1s, so it is taken for dead after
// 6 s of silence), the day totals are exactly what was settled once the
// survivors stop, and the tenant's audit chain verifies. Six more clients
// send the three tenants' trader decisions and executor ticks to the
// three: every one acknowledged, on the victim too, is in the store. No
// client gets, and no process logs, a deadlock or a serialization failure,
// and Postgres detects no deadlock in the processes' database (the test's
// own): the group commits lock the tenants' chain heads in one order.
func TestKillOneOfThreeUnderLoad(t *testing.T) {
	dsn := os.Getenv(storetest.EnvPostgres)
	if dsn == "" {
		t.Skip("CADUCEUS_TEST_POSTGRES not set; .ci/run sets it")
	}
	if testing.Short() {
		t.Skip("starts three serve processes")
	}
	// A database of its own, so that its deadlock count is the test's.
	pg := freshDatabase(t, dsn)
	up := &fakeProvider{name: "openai"}
	upSrv := newHTTPServer(t, up)
	data := t.TempDir()
	const turnMicros = 100 * 8
	file := writeConfig(t, data, oneRouteShim(upSrv, `{input: 0, output: 8, max_output_tokens: 100}`, `{day: 100}`)+"  ledger_sweep: 1s\n")
	storeArgs := []string{"--store", pg, "--data", data}
	tenants := []string{"slot-1", "slot-2", "slot-3"}
	type tenantKeys struct{ route, op, cron string }
	keys := make([]tenantKeys, len(tenants))
	for i, tenant := range tenants {
		keys[i] = tenantKeys{
			route: newTenantKey(t, storeArgs, tenant, "--scopes", "route", "--models", "openai/gpt-4.1"),
			op:    newTenantKey(t, storeArgs, tenant, "--scopes", "route,operate"),
			cron:  newTenantKey(t, storeArgs, tenant, "--scopes", "operate", "--context", "cron", "--harness", "autotrader"),
		}
		if code, out, errOut := cli(t, append([]string{"trader", "import", "testdata/strategies.yaml", "--tenant", tenant}, storeArgs...)...); code != 0 {
			t.Fatalf("trader import --tenant %s: %s %s", tenant, out, errOut)
		}
	}
	db, err := store.Open(context.Background(), pg, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	one := func(q string, args ...any) int64 {
		t.Helper()
		got, err := store.AppendRows([]int64(nil), store.QueryRows(t.Context(), db, "n", store.ScanValue[int64], q, args...))
		if err != nil || len(got) != 1 {
			t.Fatalf("%s: %v %v", q, got, err)
		}
		return got[0]
	}
	strs := func(q string, args ...any) map[string]bool {
		t.Helper()
		got, err := store.AppendRows([]string(nil), store.QueryRows(t.Context(), db, "ids", store.ScanValue[string], q, args...))
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		set := map[string]bool{}
		for _, s := range got {
			set[s] = true
		}
		return set
	}
	const deadlocksQ = `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`
	deadlocks := one(deadlocksQ)

	var procs []*proc
	for range 3 {
		procs = append(procs, startProc(t, nil, append([]string{"--config", file, "--skills", exSkills, "--scenario", exScenario}, storeArgs...)...))
	}
	const victim = 1

	// acked is what the clients were answered for one tenant.
	type acked struct{ receipts, decisions, ticks []string }
	var (
		mu          sync.Mutex
		byTenant    = make([]acked, len(tenants))
		answered    [3]int // turns, by process
		victimTurns = make([]int, len(tenants))
		victimAcks  [2]int // decisions, ticks the victim acknowledged
		cut         int    // the victim's exchanges the kill cut
		wg          sync.WaitGroup
	)
	client := &http.Client{Timeout: 30 * time.Second}
	// post sends body to path on process p with key (and the header pairs
	// hdr) and returns the answer's header when it is a 200 read whole. An
	// exchange with the victim that failed (the kill cut it) returns nil;
	// any other failure, and any answer but a 200 on any process, fails
	// the test and returns stop.
	killed := make(chan struct{})
	post := func(p int, tenant, path, key, body string, hdr ...string) (h http.Header, stop bool) {
		req, _ := http.NewRequest("POST", procs[p].url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		for j := 0; j+1 < len(hdr); j += 2 {
			req.Header.Set(hdr[j], hdr[j+1])
		}
		resp, err := client.Do(req)
		var b []byte
		if err == nil {
			b, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		switch {
		case err != nil && p == victim:
			mu.Lock()
			cut++
			mu.Unlock()
			<-killed // the victim is gone (or about to be): its client stops
			return nil, true
		case err != nil:
			t.Errorf("process %d, %s %s: %v", p, tenant, path, err)
			return nil, true
		case resp.StatusCode != 200 && storeConflictRE.Match(b):
			t.Errorf("process %d, %s %s: a deadlock or serialization failure reached the client: %d %s", p, tenant, path, resp.StatusCode, b)
			return nil, true
		case resp.StatusCode != 200:
			t.Errorf("process %d, %s %s: %d %s", p, tenant, path, resp.StatusCode, b)
			return nil, true
		}
		return resp.Header, false
	}
	// The clients run until 1.5 s after the kill, which comes in the
	// middle of the load, once the victim has acknowledged 20 turns of
	// every tenant, 3 decisions and 3 ticks (ready, or 20 s) and every
	// process has written its lease holder's row; the victim's clients
	// stop at their first exchange the kill cut.
	ready := make(chan struct{})
	isReady := sync.OnceFunc(func() { close(ready) })
	checkReady := func() { // under mu
		if slices.Min(victimTurns) >= 20 && victimAcks[0] >= 3 && victimAcks[1] >= 3 {
			isReady()
		}
	}
	var stopAt atomic.Int64
	stopAt.Store(time.Now().Add(time.Hour).UnixNano())
	running := func() bool { return time.Now().UnixNano() < stopAt.Load() }
	modes := []string{"normal", "reduced", "defensive"}
	// Six more clients, two per process: trader decisions and executor
	// ticks of the tenants in turn, each recording what it was
	// acknowledged.
	for c := range 6 {
		p := c % 3
		wg.Go(func() {
			for i := 0; running(); i++ {
				ti := (c + i) % len(tenants)
				var h http.Header
				var stop bool
				var id string
				if c < 3 {
					id = fmt.Sprintf("dec_kill_%d_%d", c, i)
					h, stop = post(p, tenants[ti], "/v1/trader/decisions", keys[ti].op, decisionBody(id, modes[i%3], "kill test"))
				} else {
					id = fmt.Sprintf("tick-kill-%d-%06d", c, i)
					h, stop = post(p, tenants[ti], "/v1/executor/ticks", keys[ti].cron, tickBody("kill test"), "Idempotency-Key", id)
				}
				if stop {
					return
				}
				if h == nil {
					continue
				}
				mu.Lock()
				if c < 3 {
					byTenant[ti].decisions = append(byTenant[ti].decisions, id)
				} else {
					byTenant[ti].ticks = append(byTenant[ti].ticks, id)
				}
				if p == victim {
					victimAcks[c/3]++
					checkReady()
				}
				mu.Unlock()
			}
		})
	}
	// Twelve turn clients, four per process, each starting at another
	// tenant.
	for c := range 12 {
		p := c % 3
		wg.Go(func() {
			for i := 0; running(); i++ {
				ti := (c/3 + i) % len(tenants)
				body := fmt.Sprintf(`{"model":"gpt-4.1","max_tokens":100,"stream":%v,"messages":[{"role":"user","content":"turn %d of client %d"}]}`, i%2 == 0, i, c)
				h, stop := post(p, tenants[ti], "/v1/chat/completions", keys[ti].route, body)
				if stop {
					return
				}
				if h == nil {
					continue
				}
				mu.Lock()
				byTenant[ti].receipts = append(byTenant[ti].receipts, h.Get("X-Caduceus-Receipt"))
				answered[p]++
				if p == victim {
					victimTurns[ti]++
					checkReady()
				}
				mu.Unlock()
			}
		})
	}
	select {
	case <-ready:
	case <-time.After(20 * time.Second): // the check below says what is missing
	}
	var holders, pending int64
	awaitRows(t, pg, []string{"shim_ledger_holders"}, 30*time.Second,
		func() string { return fmt.Sprintf("%d lease holders before the kill, want 3", holders) },
		func() bool { holders = one(`SELECT COUNT(*) FROM shim_ledger_holders`); return holders == 3 })
	if err := procs[victim].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	close(killed)
	killedAt := time.Now()
	stopAt.Store(killedAt.Add(1500 * time.Millisecond).UnixNano())
	wg.Wait()
	if slices.Contains(answered[:], 0) || slices.Contains(victimTurns, 0) || victimAcks[0] == 0 || victimAcks[1] == 0 {
		t.Fatalf("answered %v turns (the victim's by tenant: %v), the victim %d decisions and %d ticks: every process must answer, the victim every tenant, before the kill",
			answered, victimTurns, victimAcks[0], victimAcks[1])
	}
	for ti, a := range byTenant {
		if len(a.receipts) == 0 || len(a.decisions) == 0 || len(a.ticks) == 0 {
			t.Fatalf("%s: %d turns, %d decisions and %d ticks acknowledged: the load must span every tenant", tenants[ti], len(a.receipts), len(a.decisions), len(a.ticks))
		}
	}

	// The survivors take the victim for dead after six silent sweeps and
	// release its leases (its holder row goes), and write what its journal
	// left in its receipts: checked at every write to those tables.
	awaitRows(t, pg, []string{"shim_ledger_holders", "shim_receipts"}, 30*time.Second,
		func() string {
			return fmt.Sprintf("after the kill, %d lease holders (want the 2 survivors), %d receipts with unwritten settlements", holders, pending)
		}, func() bool {
			holders = one(`SELECT COUNT(*) FROM shim_ledger_holders`)
			pending = one(`SELECT COUNT(*) FROM shim_receipts WHERE ledger IS NOT NULL`)
			return holders == 2 && pending == 0
		})
	t.Logf("the victim's leases released and settlements written %v after the kill", time.Since(killedAt).Round(time.Millisecond))
	procs[0].stop(t)
	procs[2].stop(t)

	// A deadlock or serialization failure a process retried away is not
	// seen by its client, but one its retries did not end is logged (a
	// turn's receipt not stored, a write refused).
	for i, p := range procs {
		n := 0
		for line := range strings.Lines(p.stderr.String()) {
			if storeConflictRE.MatchString(line) {
				if n++; n <= 3 {
					t.Errorf("process %d logged a deadlock or serialization failure: %s", i, strings.TrimSpace(line))
				}
			}
		}
	}
	if held := one(`SELECT COALESCE(SUM(amount), 0) FROM shim_spend_leases WHERE state = 'open'`); held != 0 {
		t.Errorf("open leases hold %d µ$ after the survivors stopped and the victim was swept", held)
	}
	for ti, tenant := range tenants {
		a := byTenant[ti]
		stored := strs(`SELECT id FROM shim_receipts WHERE tenant = ?`, tenant)
		for _, id := range a.receipts {
			if !stored[id] {
				t.Errorf("%s: answered receipt %s is not in the store", tenant, id)
			}
		}
		// Every stored receipt is one answered turn (some of the victim's
		// were committed but never reached their client), each settled
		// once.
		settled := one(`SELECT COALESCE(SUM(settled), 0) FROM shim_spend WHERE tenant = ? AND state = 'settled'`, tenant)
		if want := int64(len(stored)) * turnMicros; settled != want {
			t.Errorf("%s: settled %d µ$ for %d stored receipts of %d µ$ (want %d)", tenant, settled, len(stored), turnMicros, want)
		}
		if open := one(`SELECT COUNT(*) FROM shim_spend WHERE tenant = ? AND state = 'reserved'`, tenant); open != 0 {
			t.Errorf("%s: %d reservations open after the survivors stopped and the victim was swept", tenant, open)
		}
		if held := one(`SELECT COALESCE(SUM(l.amount), 0) FROM shim_spend_leases l JOIN api_keys k ON l.scope = 'key:' || k.id
			WHERE k.tenant = ? AND l.state = 'open'`, tenant); held != 0 {
			t.Errorf("%s: its keys' open leases hold %d µ$", tenant, held)
		}
		if day := one(`SELECT COALESCE(SUM(s.amount), 0) FROM shim_spend_totals s JOIN api_keys k ON s.scope = 'key:' || k.id
			WHERE k.tenant = ? AND length(s.period) = 10`, tenant); day != settled {
			t.Errorf("%s: its keys' day totals hold %d µ$, its settled spend is %d: the victim's leases still count", tenant, day, settled)
		}
		for what, q := range map[string]string{"decision": `SELECT decision_id FROM trader_decisions WHERE tenant = ?`,
			"tick": `SELECT key FROM idempotency WHERE tenant = ? AND scope = 'executor.tick' AND result IS NOT NULL`} {
			have := strs(q, tenant)
			acked := a.decisions
			if what == "tick" {
				acked = a.ticks
			}
			for _, id := range acked {
				if !have[id] {
					t.Errorf("%s: acknowledged %s %s is not in the store", tenant, what, id)
				}
			}
		}
		code, out, errOut := cli(t, append([]string{"audit", "verify", "--tenant", tenant}, storeArgs...)...)
		var records, chains int
		if _, err := fmt.Sscanf(out, "ok: verified %d records in %d tenants", &records, &chains); code != 0 || err != nil || chains != 1 || records < len(stored) {
			t.Errorf("%s: audit verify: %d %s %s (want its chain whole, with at least its %d receipts' records)", tenant, code, out, errOut, len(stored))
		}
		t.Logf("%s: %d receipts stored (%d acknowledged), %d decisions and %d ticks acknowledged; its chain of %d records verifies",
			tenant, len(stored), len(a.receipts), len(a.decisions), len(a.ticks), records)
	}
	// A deadlock the processes retried away reached no client, but
	// Postgres counted it (each stalled both transactions for its
	// deadlock_timeout). The count is read last, seconds after the load
	// and once every process has stopped: a Postgres backend reports its
	// deadlocks to the statistics as it goes on, or as it exits.
	if n := one(deadlocksQ) - deadlocks; n != 0 {
		t.Errorf("Postgres detected %d deadlocks in the processes' database", n)
	}
	t.Logf("answered %v turns (the victim's by tenant: %v), cut %d exchanges on the victim; the victim acknowledged %d decisions and %d ticks",
		answered, victimTurns, cut, victimAcks[0], victimAcks[1])
}

// storeConflictRE finds a Postgres deadlock or serialization failure in an
// answer or a log line.
var storeConflictRE = regexp.MustCompile(`(?i)deadlock|could not serialize|SQLSTATE 40(001|P01)`)
