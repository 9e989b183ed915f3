package edge_test

import (
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/edge"
)

// FuzzParseAdminKeys: the CADUCEUS_ADMIN_KEY secret either parses into
// valid tenants each with a well-formed token, or is refused with an error
// that says so; it never panics.
func FuzzParseAdminKeys(f *testing.F) {
	const tok = "cad_0123456789abcdef_abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst"
	for _, s := range []string{"", tok, "slot-3=" + tok, tok + ", slot-2=" + tok, "slot-x=" + tok, "slot-1=" + tok + " " + tok, "=", "cad_", ",,\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		keys, err := edge.ParseAdminKeys(s)
		if err != nil {
			if keys != nil {
				t.Fatalf("an error and keys: %v %v", err, keys)
			}
			return
		}
		for tenant, token := range keys {
			if !contract.ValidTenantSlot(string(tenant)) {
				t.Fatalf("tenant %q accepted", tenant)
			}
			if _, _, err := auth.ParseToken(token); err != nil {
				t.Fatalf("token %q accepted: %v", token, err)
			}
		}
	})
}

func TestParseAdminKeysRefusals(t *testing.T) {
	const tok = "cad_0123456789abcdef_abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst"
	keys, err := edge.ParseAdminKeys(tok + ",\n slot-3=" + tok)
	if err != nil || len(keys) != 2 || keys["slot-1"] != tok || keys["slot-3"] != tok {
		t.Fatalf("two keys: %v %v", keys, err)
	}
	for in, want := range map[string]string{
		"slot-x=" + tok:                    "not a tenant slot",
		"slot-2=cad_short":                 "the key of slot-2",
		tok + "," + tok:                    "slot-1 is given twice",
		"slot-2=" + tok + " slot-2=" + tok: "slot-2 is given twice",
	} {
		if _, err := edge.ParseAdminKeys(in); err == nil || !contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %q", in, err, want)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
