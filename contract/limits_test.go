package contract_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/caduceus-dev/caduceus/contract"
)

func deep(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

func TestCheckJSON(t *testing.T) {
	cases := []struct {
		in   string
		code string // "" = accepted
	}{
		{`{}`, ""},
		{` {"a":[1,2,{"b":null}],"c":"\u00e9\ud83d\ude00"} `, ""},
		{`"x"`, ""},
		{`-0.5e+10`, ""},
		{deep(contract.MaxJSONDepth), ""},
		{deep(contract.MaxJSONDepth + 1), contract.CodeTooDeep},
		{deep(9999), contract.CodeTooDeep},
		{deep(10000), contract.CodeTooDeep},
		{deep(10001), contract.CodeTooDeep},
		{"{\"a\":\"\xff\"}", contract.CodeBadUTF8},
		{"{\"\xc3\x28\":1}", contract.CodeBadUTF8},
		{`{"a":"\u0000"}`, contract.CodeNULCharacter},
		{"{\"a\":\"\x00\"}", contract.CodeNULCharacter},
		{`{"a":1,"a":2}`, contract.CodeDuplicateKey},
		{`{"a":1,"\u0061":2}`, contract.CodeDuplicateKey},
		{`{"o":{"k":1},"p":{"k":1}}`, ""},
		{`{"a":1}{"b":2}garbage`, contract.CodeTrailingData},
		{`{"a":1} x`, contract.CodeTrailingData},
		{``, contract.CodeBadJSON},
		{`{"a":}`, contract.CodeBadJSON},
		{`[1,]`, contract.CodeBadJSON},
		{`01`, contract.CodeTrailingData},
		{`{"a":tru}`, contract.CodeBadJSON},
		{`"\x"`, contract.CodeBadJSON},
	}
	for _, c := range cases {
		err := contract.CheckJSON([]byte(c.in))
		got := ""
		if err != nil {
			e := contract.AsError(err)
			if e.Kind != contract.KindInvalid {
				t.Errorf("%.40q: kind %v", c.in, e.Kind)
			}
			got = e.Code
		}
		if got != c.code {
			t.Errorf("CheckJSON(%.40q) = %q (%v), want %q", c.in, got, err, c.code)
		}
	}
	// Many keys (the map path) still find a duplicate.
	var b strings.Builder
	b.WriteString("{")
	for i := range 100 {
		b.WriteString(`"k` + strings.Repeat("x", i) + `":1,`)
	}
	b.WriteString(`"kxx":2}`)
	if err := contract.CheckJSON([]byte(b.String())); contract.AsError(err).Code != contract.CodeDuplicateKey {
		t.Errorf("duplicate among 100 keys: %v", err)
	}
}

// The canonical form of any accepted input, wrapped as deep as a record
// wraps it, still seals: the two limits agree.
func TestRecordDepthCoversInputDepth(t *testing.T) {
	in := deep(contract.MaxJSONDepth)
	if err := contract.CheckJSON([]byte(in)); err != nil {
		t.Fatal(err)
	}
	wrapped := strings.Repeat(`{"w":`, contract.RecordWrapDepth) + in + strings.Repeat(`}`, contract.RecordWrapDepth)
	if _, err := contract.CanonicalJSON(json.RawMessage(wrapped)); err != nil {
		t.Fatalf("a record of an accepted input cannot be sealed: %v", err)
	}
}

func TestIsJSONMediaType(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json": true, "application/json; charset=utf-8": true, "Application/JSON": true,
		"application/problem+json": true, "text/plain": false, "application/x-www-form-urlencoded": false,
		"multipart/form-data; boundary=x": false, "application/jsonx": false, ";;": false,
	} {
		if got := contract.IsJSONMediaType(ct); got != want {
			t.Errorf("IsJSONMediaType(%q) = %v", ct, got)
		}
	}
}

// FuzzCheckJSON: whatever CheckJSON accepts is valid JSON, valid UTF-8,
// decodes without duplicate keys into the same value encoding/json sees,
// and CheckJSON never panics.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,{"b":"c"}]}`, `{"a":1,"a":2}`, "\"\xff\"", deep(300), `{"a":1}x`, `"\u0000"`, `1e5`, `-0`, `{"\u0061":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := contract.CheckJSON(b)
		if err != nil {
			if contract.AsError(err).Kind != contract.KindInvalid {
				t.Fatalf("non-invalid error %v", err)
			}
			return
		}
		if !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		if !utf8.Valid(b) {
			t.Fatalf("accepted invalid UTF-8 %q", b)
		}
		if _, err := contract.CanonicalJSON(json.RawMessage(b)); err != nil {
			t.Fatalf("accepted input does not canonicalize: %v", err)
		}
	})
}

// BenchmarkCheckJSON: the input rule's cost on an 8 KB LLM-sized request.
func BenchmarkCheckJSON(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"model":"gpt-4o","messages":[`)
	for i := 0; sb.Len() < 8000; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(`{"role":"user","content":"deploy the payments service to staging please, and check the logs for E1234 errors"}`)
	}
	sb.WriteString(`],"stream":false}`)
	doc := []byte(sb.String())
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if err := contract.CheckJSON(doc); err != nil {
			b.Fatal(err)
		}
	}
}
