package auth

import (
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
)

// FuzzParseToken: any string either parses into a 16-hex id and a 52-char
// secret that rebuild the token, or is refused as unauthenticated.
func FuzzParseToken(f *testing.F) {
	f.Add("cad_0123456789abcdef_" + strings.Repeat("a", 52))
	f.Add("cad_0123456789abcdef_")
	f.Add("cad__")
	f.Add("Bearer cad_x")
	f.Add("cad_0123456789ABCDEF_" + strings.Repeat("a", 52))
	f.Fuzz(func(t *testing.T, tok string) {
		id, secret, err := ParseToken(tok)
		if err != nil {
			if contract.KindOf(err) != contract.KindUnauthenticated {
				t.Fatalf("ParseToken(%q) error kind %v", tok, contract.KindOf(err))
			}
			return
		}
		if "cad_"+id+"_"+secret != tok || len(id) != 16 || len(secret) != 52 || !isHex(id) {
			t.Fatalf("ParseToken(%q) = %q, %q", tok, id, secret)
		}
	})
}

func TestSpecValidate(t *testing.T) {
	ok := Spec{Tenant: "slot-1", Scopes: []contract.Scope{"route"}}
	cases := []struct {
		spec  Spec
		field string
	}{
		{ok, ""},
		{Spec{Tenant: "slot-1000", Scopes: ok.Scopes}, "tenant"},
		{Spec{Tenant: "slot-1"}, "scopes"},
		{Spec{Tenant: "slot-1", Scopes: []contract.Scope{"god"}}, "scopes"},
		{Spec{Tenant: "slot-1", Scopes: ok.Scopes, RunContext: "weekly"}, "context"},
		{Spec{Tenant: "slot-1", Scopes: ok.Scopes, Harness: "a b"}, "harness"},
	}
	for _, c := range cases {
		err := c.spec.Validate()
		if c.field == "" {
			if err != nil {
				t.Errorf("%+v: %v", c.spec, err)
			}
			continue
		}
		e := contract.AsError(err)
		if e == nil || e.Kind != contract.KindInvalid || e.Field != c.field {
			t.Errorf("%+v: got %v; want invalid field %s", c.spec, err, c.field)
		}
	}
}

func TestSubjectIsHashedUserRef(t *testing.T) {
	s := Subject("0123456789abcdef")
	if !contract.ValidUserRef(s) || strings.Contains(s, "0123456789abcdef") {
		t.Errorf("Subject = %s", s)
	}
	if Subject("a") == Subject("b") {
		t.Error("subjects collide")
	}
}
