package contract

import (
	"fmt"
	"slices"
	"strings"
)

// A grant lets a key (or every key of a tenant) use one model identity,
// "provider/model", through the shim's gateway (Caller.Granted). The rules
// for writing one live here, beside the Caller that holds them, so the
// keys (package auth) and the gateway's configuration (shim/upstream) check
// them alike. Errors name the bad grant and carry no package prefix: the
// caller wraps them.

// SplitIdentity splits provider/model at the first slash (model names may
// hold slashes). It returns an error naming s when either side is empty,
// s holds a space or control character or is longer than 200 bytes, or the
// provider is not lowercase letters, digits, '-' or '_'.
func SplitIdentity(s string) (provider, model string, err error) {
	provider, model, ok := strings.Cut(s, "/")
	if !ok || provider == "" || model == "" {
		return "", "", fmt.Errorf("%q is not provider/model", s)
	}
	if strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }) || len(s) > 200 {
		return "", "", fmt.Errorf("%q is not provider/model (no spaces or control characters, at most 200 bytes)", s)
	}
	if !ValidName(provider) {
		return "", "", fmt.Errorf("provider %q in %q must be lowercase letters, digits, '-' or '_'", provider, s)
	}
	return provider, model, nil
}

// CheckGrant checks one grant: an exact provider/model pair, or an
// explicit pattern the operator wrote, whose model ends with one '*' and
// has no other ("openai/gpt-4.1*": every dated snapshot of gpt-4.1;
// "local/*": every model of that provider); no contributor-tier model.
func CheckGrant(g string) error {
	_, model, err := SplitIdentity(g)
	if err != nil {
		return err
	}
	if i := strings.IndexByte(g, '*'); i >= 0 && i != len(g)-1 {
		return fmt.Errorf("grant %q: a pattern has one '*', at the end of the model (openai/gpt-4.1*)", g)
	}
	if strings.Contains(strings.ToLower(model), "contributor") {
		return fmt.Errorf("grant %q: contributor-tier models are refused", g)
	}
	return nil
}

// CheckGrants checks every grant (CheckGrant) and returns them as they are
// held: sorted and without duplicates. The first bad one is the error.
func CheckGrants(grants []string) ([]string, error) {
	for _, g := range grants {
		if err := CheckGrant(g); err != nil {
			return nil, err
		}
	}
	out := slices.Clone(grants)
	slices.Sort(out)
	return slices.Compact(out), nil
}

// MatchModel reports whether name (a model or a provider/model identity)
// is pattern: equal to it, or, when pattern ends with '*', starting with
// what precedes the '*'.
func MatchModel(pattern, name string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, prefix)
	}
	return pattern == name
}

// ValidName reports whether s is a configuration name: 1 to 64 lowercase
// letters, digits, '-' or '_'.
func ValidName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
