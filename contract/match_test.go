package contract

import (
	"regexp"
	"testing"
)

var matchers = []struct {
	name  string
	re    *regexp.Regexp
	match func(string) bool
}{
	{"timestamp", timestampRE(), matchTimestamp},
	{"action", actionRE(), matchAction},
	{"tenant slot", tenantSlotRE(), matchTenantSlot},
	{"user ref", userRefRE(), matchUserRef},
	{"sha256", sha256RE(), matchSHA256},
	{"id", idRE(), matchID},
}

var matcherSeeds = []string{
	"", "2026-12-01T00:00:00Z", "2026-12-01T00:00:00.123456Z", "2026-12-01T00:00:00.1234567Z", "2026-12-01T00:00:00.Z",
	"2026-12-01T00:00:00z", "2026-12-01 00:00:00Z", "2026-12-01T00:00:00Z\n", "shim.proxy", "shim.", ".proxy", "a.b.c", "keys_list.read_x",
	"slot-1", "slot-999", "slot-1000", "slot-", "slot-a", "usr_0123456789abcdef", "usr_0123456789abcdeF", "usr_0123456789abcde",
	"sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "sha256:",
	"conv_abcd", "conv_abc", "ab_c.d-e_f", "a_bcde", "abcdefg_bcde", "evt_01ABCDEFGHJKMNPQRSTVWXYZ0", "Evt_abcd", "ev-_abcd",
}

// TestMatchersAgreeWithPatterns: each hand-written matcher answers as its
// regexp on the seeds (FuzzMatchersAgreeWithPatterns goes on from them).
func TestMatchersAgreeWithPatterns(t *testing.T) {
	for _, s := range matcherSeeds {
		checkMatchers(t, s)
	}
}

func FuzzMatchersAgreeWithPatterns(f *testing.F) {
	for _, s := range matcherSeeds {
		f.Add(s)
	}
	f.Fuzz(checkMatchers)
}

func checkMatchers(t *testing.T, s string) {
	for _, m := range matchers {
		if got, want := m.match(s), m.re.MatchString(s); got != want {
			t.Errorf("%s %q: matcher %v, regexp %v", m.name, s, got, want)
		}
	}
}
