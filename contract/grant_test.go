package contract

import (
	"slices"
	"strings"
	"testing"
)

// TestSplitIdentityRule: an identity is provider/model split at the first
// slash, both sides non-empty, no space or control character, at most 200
// bytes, and a provider of lowercase letters, digits, '-' or '_'.
func TestSplitIdentityRule(t *testing.T) {
	atLimit := "p/" + strings.Repeat("m", 198)
	for _, c := range []struct{ in, provider, model string }{
		{"openrouter/meta/llama-3", "openrouter", "meta/llama-3"},
		{"a-b_9/x", "a-b_9", "x"},
		{atLimit, "p", strings.Repeat("m", 198)},
		{"p/m~", "p", "m~"},
	} {
		p, m, err := SplitIdentity(c.in)
		if err != nil || p != c.provider || m != c.model {
			t.Errorf("SplitIdentity(%.40q) = %q, %q, %v; want %q, %q", c.in, p, m, err, c.provider, c.model)
		}
	}
	for _, bad := range []string{
		"gpt-4", "/m", "p/", "/", "",
		atLimit + "m", // 201 bytes
		"p/m x", "p/m\t", "p/m\x00", "p/m\x7f", "p/m\x1f",
		"Open/m", "p.q/m", "p q/m",
	} {
		if p, m, err := SplitIdentity(bad); err == nil {
			t.Errorf("SplitIdentity(%.40q) = %q, %q; want a refusal", bad, p, m)
		}
	}
}

// TestCheckGrantPatternRule: a grant is an exact pair or a pattern whose
// model ends with its only '*'; contributor-tier models are refused in any
// case.
func TestCheckGrantPatternRule(t *testing.T) {
	for _, g := range []string{"openai/gpt-4.1", "openai/gpt-4.1*", "local/*", "openrouter/meta/*"} {
		if err := CheckGrant(g); err != nil {
			t.Errorf("CheckGrant(%q) = %v, want nil", g, err)
		}
	}
	for _, g := range []string{"openai/*gpt", "openai/gpt*4*", "openai/g*t", "openai/**", "openai", "openai/gpt contributor",
		"openai/contributor-1", "openai/gpt-Contributor", "openai/CONTRIBUTOR*"} {
		if err := CheckGrant(g); err == nil {
			t.Errorf("CheckGrant(%q) = nil, want a refusal", g)
		}
	}
}

// TestCheckGrantsHeldSortedOnce: grants are held sorted, each once; one bad
// grant refuses the lot.
func TestCheckGrantsHeldSortedOnce(t *testing.T) {
	got, err := CheckGrants([]string{"b/x", "a/y*", "b/x", "a/y"})
	if err != nil || !slices.Equal(got, []string{"a/y", "a/y*", "b/x"}) {
		t.Errorf("CheckGrants = %q, %v", got, err)
	}
	if got, err := CheckGrants([]string{"a/y", "b/x*y"}); err == nil || got != nil {
		t.Errorf("CheckGrants with a bad grant = %q, %v; want a refusal", got, err)
	}
	if got, err := CheckGrants(nil); err != nil || len(got) != 0 {
		t.Errorf("CheckGrants(nil) = %q, %v", got, err)
	}
}

// TestGrantedMatchesExactOrPattern: a caller holds an identity by an equal
// grant or by a pattern it starts with; nothing else.
func TestGrantedMatchesExactOrPattern(t *testing.T) {
	c := Caller{Grants: []string{"openai/gpt-4.1*", "local/llama"}}
	for id, want := range map[string]bool{
		"openai/gpt-4.1": true, "openai/gpt-4.1-2025-04-14": true, "openai/gpt-4o": false,
		"local/llama": true, "local/llama-2": false, "local/llam": false, "openai/gpt-4": false,
	} {
		if got := c.Granted(id); got != want {
			t.Errorf("Granted(%q) = %v, want %v", id, got, want)
		}
	}
	if (Caller{}).Granted("local/llama") {
		t.Error("a caller without grants holds one")
	}
}

// TestValidNameRule: a configuration name is 1 to 64 of a-z, 0-9, '-', '_'
// (the ends of each range included, their neighbours not).
func TestValidNameRule(t *testing.T) {
	for s, want := range map[string]bool{
		"a": true, "z": true, "0": true, "9": true, "-": true, "_": true, "a-b_9": true,
		strings.Repeat("x", 64): true, strings.Repeat("x", 65): false, "": false,
		"`": false, "{": false, "/": false, ":": false, "A": false, "Z": false, ".": false, "é": false, "a b": false,
	} {
		if got := ValidName(s); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", s, got, want)
		}
	}
}
