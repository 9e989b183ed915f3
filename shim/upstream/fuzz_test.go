package upstream

import (
	"testing"
	"time"
)

// FuzzParse: configuration bytes never panic, and an accepted configuration
// is valid and reaches every identity of every plan through one route.
func FuzzParse(f *testing.F) {
	f.Add([]byte(goodConfig))
	f.Add([]byte(balancedConfig))
	f.Add([]byte(`{"routes": {}}`))
	f.Add([]byte(`{"prices": {"a/b": {"input": "1.000001", "max_output_tokens": 1}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("parsed configuration does not validate: %v", err)
		}
		for _, p := range c.Plans {
			routeOf := map[string]string{}
			for m, steps := range p.Models {
				for _, st := range steps {
					if n := len(st.Balance); n != 0 && (n < MinBalance || n > MaxBalance || st.Route != "") {
						t.Fatalf("accepted a balance of %d members (route %q)", n, st.Route)
					}
					for _, mb := range st.Members() {
						id := c.MemberIdentity(mb, m)
						if r, ok := routeOf[id]; ok && r != mb.Route {
							t.Fatalf("%s through %s and %s", id, r, mb.Route)
						}
						routeOf[id] = mb.Route
						if mb.W() < 1 || mb.W() > MaxWeight {
							t.Fatalf("accepted weight %d", mb.Weight)
						}
					}
				}
			}
		}
	})
}

// FuzzParseDollars: an accepted amount formats back to the same value.
func FuzzParseDollars(f *testing.F) {
	for _, s := range []string{"0", "2.5", ".000001", "1000000000", "1e3", "-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseDollars(s)
		if err != nil {
			return
		}
		if m < 0 || m > MaxMicrodollars {
			t.Fatalf("%q -> %d out of range", s, m)
		}
		back, err := ParseDollars(m.String())
		if err != nil || back != m {
			t.Fatalf("%q -> %d -> %q -> %d, %v", s, m, m.String(), back, err)
		}
	})
}

// FuzzParseGrants: accepted grants are exact provider/model pairs.
func FuzzParseGrants(f *testing.F) {
	f.Add("openai/gpt-4.1,anthropic/claude-sonnet-4-5")
	f.Add("a/*")
	f.Fuzz(func(t *testing.T, s string) {
		gs, err := ParseGrants(s)
		if err != nil {
			return
		}
		for _, g := range gs {
			if err := CheckGrant(g); err != nil {
				t.Fatalf("accepted %q: %v", g, err)
			}
		}
	})
}

// FuzzRetryAfter: any Retry-After value reads as a delay between zero and
// a day, or as unreadable.
func FuzzRetryAfter(f *testing.F) {
	for _, v := range []string{"", "7", "junk", "999999999", "Mon, 30 Nov 2026 12:01:00 UTC", "-1", "1.5"} {
		f.Add(v)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := ParseRetryAfter(v, now)
		if !ok && d != 0 || d < 0 || d > 24*time.Hour {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v", v, d, ok)
		}
	})
}
