package memory

import (
	"regexp"
	"strings"
	"testing"
)

// projectPattern is what wellFormedProject accepts, as a regular
// expression: the oracle the loop is held to.
var projectPattern = regexp.MustCompile(`^[A-Za-z0-9._:/-]{1,120}$`)

func TestProjectTag(t *testing.T) {
	for _, c := range []struct{ header, want string }{
		{"payments", "payments"},
		{"acme/api:v2.1_x-y", "acme/api:v2.1_x-y"},
		{strings.Repeat("p", 120), strings.Repeat("p", 120)},
		{strings.Repeat("p", 121), DefaultProject},
		{"", DefaultProject},
		{"has space", DefaultProject},
		{"ümlaut", DefaultProject},
		{"semi;colon", DefaultProject},
		{"new\nline", DefaultProject},
	} {
		if got := projectTag(c.header); got != c.want {
			t.Errorf("projectTag(%q) = %q, want %q", c.header, got, c.want)
		}
	}
}

func FuzzWellFormedProject(f *testing.F) {
	for _, s := range []string{"payments", "acme/api:v2.1_x-y", "", "a b", "ü", strings.Repeat("x", 120), strings.Repeat("x", 121), "\x00", "@"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := wellFormedProject(s), projectPattern.MatchString(s); got != want {
			t.Fatalf("wellFormedProject(%q) = %v, the pattern says %v", s, got, want)
		}
	})
}
