package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// PostgresCPU is the user and system CPU time of the Postgres server on
// this machine so far: every process named postgres, and through the
// postmaster's reaped-children times the backends that have ended. It
// fails when no such process is in /proc (a server elsewhere, or in a
// container of its own), where a database's CPU cannot be read.
func PostgresCPU() (time.Duration, error) {
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
