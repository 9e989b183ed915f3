package store_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/bench"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// BenchmarkAuditAppendPostgresThreeProcesses: three processes (this test
// binary run again, each with its own pool and group commit) append b.N
// records in all, 16 at once each, to one tenant's chain in one Postgres
// schema. It reports appends per second across the three, and the
// Postgres server's CPU per append (its processes' user and system time,
// read from /proc, the backends that ended counted through the
// postmaster's reaped-children times); the chain must verify.
//
//	CADUCEUS_TEST_POSTGRES=postgres://... go test -run '^$' -bench AuditAppendPostgresThreeProcesses -benchtime 30000x ./store/
func BenchmarkAuditAppendPostgresThreeProcesses(b *testing.B) {
	dsn := os.Getenv(storetest.EnvPostgres)
	if dsn == "" {
		b.Skip("needs " + storetest.EnvPostgres)
	}
	schema := storetest.FreshSchema(b, dsn)
	db, err := store.Open(context.Background(), schema, "")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	per := (b.N + 2) / 3
	pgBefore, err := bench.PostgresCPU()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var backends []int // the children's, as they reported them
	for p := range 3 {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run=^TestAuditAppendChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), "CADUCEUS_APPEND_CHILD_DSN="+schema, fmt.Sprintf("CADUCEUS_APPEND_CHILD_N=%d", per),
				fmt.Sprintf("CADUCEUS_APPEND_CHILD_P=%d", p))
			out, err := cmd.CombinedOutput()
			if err != nil {
				b.Errorf("child %d: %v\n%s", p, err, out)
				return
			}
			m := childBackendsRE.FindSubmatch(out)
			if m == nil {
				b.Errorf("child %d named no backends:\n%s", p, out)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for f := range strings.SplitSeq(string(m[1]), ",") {
				pid, _ := strconv.Atoi(f)
				backends = append(backends, pid)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	storetest.AwaitBackendsGone(b, dsn, backends...) // the children's backends have ended and been reaped
	pgAfter, err := bench.PostgresCPU()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(3*per)/elapsed.Seconds(), "appends/s")
	b.ReportMetric(float64((pgAfter-pgBefore).Microseconds())/float64(3*per), "pg-cpu-µs/append")
	rep, err := audit.Verify(context.Background(), db.Audit(), nil)
	if err != nil || rep.Break != nil || rep.Records != int64(3*per) {
		b.Fatalf("after three processes' appends: %+v %v (want %d records)", rep, err, 3*per)
	}
}

// TestAuditAppendChild is a process of BenchmarkAuditAppendPostgresThreeProcesses.
func TestAuditAppendChild(t *testing.T) {
	dsn := os.Getenv("CADUCEUS_APPEND_CHILD_DSN")
	if dsn == "" {
		t.Skip("run by BenchmarkAuditAppendPostgresThreeProcesses")
	}
	n, _ := strconv.Atoi(os.Getenv("CADUCEUS_APPEND_CHILD_N"))
	p := os.Getenv("CADUCEUS_APPEND_CHILD_P")
	// Its connections carry a name of their own, so that it can name its
	// backends to the benchmark, which waits for them to end.
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	app := "caduceus-append-child-" + p
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	dsn = u.String()
	db, err := store.Open(context.Background(), dsn, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	log := db.Audit()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				k := next.Add(1)
				if k > int64(n) {
					return
				}
				if _, err := log.Append(context.Background(), entry("slot-1", "keys.list", fmt.Sprintf("p%s-%d", p, k), nil)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	pids, err := store.AppendRows([]string(nil), store.QueryRows(context.Background(), db, "backend", store.ScanValue[string],
		`SELECT pid::text FROM pg_stat_activity WHERE application_name = ?`, app))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("backends %s\n", strings.Join(pids, ","))
}

// childBackendsRE finds the backends a TestAuditAppendChild names.
var childBackendsRE = regexp.MustCompile(`(?m)^backends ([0-9,]+)$`)
