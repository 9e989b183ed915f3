package store_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
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
	pgBefore, err := postgresCPU()
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
	pgAfter, err := postgresCPU()
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

// postgresCPU is the CPU time of the Postgres server: its processes' user
// and system time, and the postmaster's reaped children's.
func postgresCPU() (time.Duration, error) {
	procs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, err
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	var total time.Duration
	found := false
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open || s[open+1:close] != "postgres" {
			continue
		}
		fields := strings.Fields(s[close+2:]) // from field 3, state
		if len(fields) < 15 {
			continue
		}
		num := func(i int) time.Duration { n, _ := strconv.ParseInt(fields[i], 10, 64); return time.Duration(n) * tick }
		// fields[1] is ppid; utime, stime, cutime, cstime are stat fields
		// 14-17, here 11-14.
		total += num(11) + num(12)
		if fields[1] == "1" || !isPostgres(fields[1]) {
			total += num(13) + num(14) // the postmaster: its reaped backends
		}
		found = true
	}
	if !found {
		return 0, fmt.Errorf("no postgres process in /proc (is the server on this machine?)")
	}
	return total, nil
}

func isPostgres(pid string) bool {
	b, err := os.ReadFile("/proc/" + pid + "/comm")
	return err == nil && strings.TrimSpace(string(b)) == "postgres"
}
