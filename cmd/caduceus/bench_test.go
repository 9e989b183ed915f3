package main

import (
	"strings"
	"testing"
)

// TestBenchRunsEveryTarget: `caduceus bench`, briefly, answers every
// request of every target (the figures themselves are not checked here:
// benchmarks are read by people, not asserted).
func TestBenchRunsEveryTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the load generator")
	}
	code, out, errOut := cli(t, "bench", "--rounds", "1", "--duration", "300ms", "--warmup", "0s", "--conns", "4", "--data", t.TempDir())
	if code != 0 {
		t.Fatalf("bench: %d\n%s\n%s", code, out, errOut)
	}
	for _, target := range []string{"upstream (fake, direct)", "bare-proxy", "caduceus (sqlite)", "caduceus governed (sqlite)", "governed+balance+rpm (sqlite)"} {
		var row string
		for line := range strings.Lines(out) {
			if strings.HasPrefix(line, target+" ") {
				row = line
			}
		}
		f := strings.Fields(strings.TrimPrefix(row, target))
		if len(f) < 4 || f[0] == "0" || f[3] != "0" {
			t.Errorf("%s: row %q (want requests answered and 0 errors)\n%s", target, row, out)
		}
	}
	if code, _, _ := cli(t, "bench", "--profile", "nothing"); code != 2 {
		t.Errorf("--profile nothing: exit %d, want 2", code)
	}
}
