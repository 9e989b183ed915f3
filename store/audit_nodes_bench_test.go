package store_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
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
	for p := range 3 {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run=^TestAuditAppendChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), "CADUCEUS_APPEND_CHILD_DSN="+schema, fmt.Sprintf("CADUCEUS_APPEND_CHILD_N=%d", per),
				fmt.Sprintf("CADUCEUS_APPEND_CHILD_P=%d", p))
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Errorf("child %d: %v\n%s", p, err, out)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	time.Sleep(500 * time.Millisecond) // the children's backends end and are reaped
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
}
