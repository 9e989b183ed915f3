package contract_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
)

// TestCanonicalJSONRefusesTruncatedInput states that CanonicalJSON refuses
// a document cut short anywhere — inside a key, after a key, after the
// colon, inside a string, inside an array — as invalid JSON, never by
// reading past the end.
func TestCanonicalJSONRefusesTruncatedInput(t *testing.T) {
	for _, in := range []string{`{`, `{"`, `{"a`, `{"a"`, `{"a" `, `{"a":`, `{"a":1`, `{"a":1,`, `"abc`, `"a\`, `"é`, `{"é`, `{"a":"é`, `[`, `[1`, `[1,`, `{"a":{"b"`} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("CanonicalJSON(%q) panicked: %v", in, p)
				}
			}()
			out, err := contract.CanonicalJSON(json.RawMessage(in))
			if e := contract.AsError(err); e == nil || e.Kind != contract.KindInvalid || e.Code != "bad_json" {
				t.Errorf("CanonicalJSON(%q) = %q, %v; want invalid bad_json", in, out, err)
			}
		}()
	}
}

// TestCanonicalJSONRefusesRawControlCharacters states the string rule: a
// raw control character (below U+0020) in a key or a value is refused, as
// JSON and encoding/json refuse it; escaped, it is accepted.
func TestCanonicalJSONRefusesRawControlCharacters(t *testing.T) {
	for _, in := range []string{"\"a\x01b\"", "{\"a\x1fb\":1}", "{\"k\":\"\x00\"}", "[\"ok\",\"\t\"]"} {
		_, err := contract.CanonicalJSON(json.RawMessage(in))
		if e := contract.AsError(err); e == nil || e.Kind != contract.KindInvalid || !strings.Contains(e.Message, "control character") {
			t.Errorf("CanonicalJSON(%q): %v, want a refusal naming the control character", in, err)
		}
		var v any
		if json.Unmarshal([]byte(in), &v) == nil {
			t.Errorf("encoding/json accepts %q: the rule is not JSON's", in)
		}
	}
	if out, err := contract.CanonicalJSON(json.RawMessage(`{"a\u0001b":"\t"}`)); err != nil || string(out) != `{"a\u0001b":"\t"}` {
		t.Errorf("escaped control characters: %s, %v", out, err)
	}
}

// TestCanonicalJSONSortsObjectsNestedAfterSiblings states that every
// object is sorted in place, also one nested after other members' values
// (so that its members' values sit past the start of the output).
func TestCanonicalJSONSortsObjectsNestedAfterSiblings(t *testing.T) {
	in := `{"z":1,"m":"long value before the object","b":{"y":22,"x":[3,{"q":"44","p":5}],"w":{}},"a":"s"}`
	want := `{"a":"s","b":{"w":{},"x":[3,{"p":5,"q":"44"}],"y":22},"m":"long value before the object","z":1}`
	out, err := contract.CanonicalJSON(json.RawMessage(in))
	if err != nil || string(out) != want {
		t.Fatalf("CanonicalJSON = %s, %v\nwant %s", out, err, want)
	}
}
