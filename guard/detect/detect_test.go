package detect_test

import (
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/guard/detect"
	"github.com/caduceus-dev/caduceus/guard/guardtest"
)

// TestRulesLookNearTheirKeywords: a rule runs on the text around its
// keywords, not on the whole text, yet each planted secret in the middle
// of 64 KB of prose full of other keyword hits ("… points." holds the
// vault token rule's "s.") is found as on its own, with the same rule and
// span.
func TestRulesLookNearTheirKeywords(t *testing.T) {
	d := detect.MustDefault()
	prose := strings.Repeat("The release adds faster startup, fewer allocations and new bench points. Thanks, all.\n", 380)
	tested := 0
	for _, v := range guardtest.Values {
		alone := d.Scan(v.Value, ^guard.Set(0))
		if len(alone) == 0 {
			continue // a value its kind's detector finds only in context
		}
		tested++
		text := prose + "here: " + v.Value + " ok\n" + prose
		at := len(prose) + len("here: ")
		var got []guard.Finding
		for _, f := range d.Scan(text, ^guard.Set(0)) {
			if f.Start >= at && f.End <= at+len(v.Value) {
				f.Start, f.End = f.Start-at, f.End-at
				got = append(got, f)
			}
		}
		if len(got) == 0 || got[0] != alone[0] {
			t.Errorf("%s in prose: found %+v, alone %+v", v.Kind, got, alone)
		}
	}
	if tested < 5 {
		t.Fatalf("only %d planted values are found on their own", tested)
	}
}
