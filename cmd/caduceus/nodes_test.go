package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestThreeProcessesOnOnePostgres: three serve processes on one Postgres
// schema, with one config, take governed LLM turns (streamed and not) from
// 12 clients, four on each, against one key's daily budget that runs out
// while they answer. Every turn costs exactly what it reserved (no input
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
	for c := range 12 {
		p := c % 3
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				body := fmt.Sprintf(`{"model":"gpt-4.1","max_tokens":100,"stream":%v,"messages":[{"role":"user","content":"turn %d of client %d"}]}`, i%2 == 0, i, c)
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
