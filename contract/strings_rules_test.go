package contract_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
)

// trickyStrings are strings whose JSON form is not themselves between
// quotes, and the printable-ASCII edges that are.
var trickyStrings = []string{
	"", "plain", " ", "~", "\"", `\`, `""`, "a\"b", `a\b`, "tab\there", "nl\n", "\x00", "\x1f", "\x7f", "é", "✓",
	"\u2028", "\u2029", "x\xffy", "\xc3", "\x80", "a\x80b", "<tag> & </tag>", "mixed \"é\" \\ \u2028 \x01",
}

// encodingJSON is s as encoding/json writes it without HTML escaping.
func encodingJSON(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// TestWriteJSONStringIsEncodingJSON states WriteJSONString's rule: s is
// written exactly as encoding/json writes it without HTML escaping — '"',
// '\\' and control characters escaped, U+2028 and U+2029 escaped, invalid
// UTF-8 as U+FFFD, DEL and other printable bytes as themselves.
func TestWriteJSONStringIsEncodingJSON(t *testing.T) {
	for _, s := range trickyStrings {
		var b bytes.Buffer
		contract.WriteJSONString(&b, s)
		if want := encodingJSON(t, s); b.String() != want {
			t.Errorf("WriteJSONString(%q) = %s, want %s", s, b.String(), want)
		}
	}
}

// TestCanonicalStringsAreEncodingJSONs states the same rule for the keys
// and values CanonicalJSON writes: each, decoded from its escaped form, is
// written as encoding/json writes the decoded string.
func TestCanonicalStringsAreEncodingJSONs(t *testing.T) {
	for _, s := range trickyStrings {
		esc, err := json.Marshal(s) // escaped input: every string arrives valid
		if err != nil {
			t.Fatal(err)
		}
		want := encodingJSON(t, string([]rune(s))) // invalid UTF-8 is U+FFFD once decoded
		for _, doc := range []struct{ in, want string }{
			{string(esc), want},
			{`{` + string(esc) + `:1}`, `{` + want + `:1}`},
			{`["x",` + string(esc) + `]`, `["x",` + want + `]`},
		} {
			out, err := contract.CanonicalJSON(json.RawMessage(doc.in))
			if err != nil || string(out) != doc.want {
				t.Errorf("CanonicalJSON(%s) = %s, %v; want %s", doc.in, out, err, doc.want)
			}
		}
	}
}
