package bench

import (
	"fmt"
	"os"
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
	stats, err := allProcStats()
	if err != nil {
		return 0, err
	}
	var total time.Duration
	found := false
	for _, st := range stats {
		if st.comm != "postgres" {
			continue
		}
		total += st.cpu
		if st.ppid == 1 || !isPostgres(strconv.Itoa(st.ppid)) {
			total += st.children // the postmaster: its reaped backends
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
