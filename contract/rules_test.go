package contract

import (
	"errors"
	"strings"
	"testing"
)

// TestKindNames: every published kind has its name; a kind past the last
// one names its number instead of another kind's name.
func TestKindNames(t *testing.T) {
	for k, want := range map[Kind]string{
		KindInternal: "internal", KindInvalid: "invalid", KindDeny: "deny", KindNotFound: "not_found",
		KindConflict: "conflict", KindFlagOff: "flag_off", KindUnauthenticated: "unauthenticated",
		KindPrecondition: "precondition_required", KindPrecondition + 1: "kind(8)", 255: "kind(255)",
	} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}

// TestErrorText: an error reads "code: message: cause"; without a message
// it falls back to its kind's name, and a part left empty is left out.
func TestErrorText(t *testing.T) {
	cause := errors.New("disk full")
	for _, c := range []struct {
		e    *Error
		want string
	}{
		{&Error{Kind: KindConflict, Code: "stale_revision", Message: "revision 3 is stale", Err: cause}, "stale_revision: revision 3 is stale: disk full"},
		{&Error{Kind: KindConflict, Code: "stale_revision", Message: "revision 3 is stale"}, "stale_revision: revision 3 is stale"},
		{&Error{Kind: KindDeny}, "deny"},
		{&Error{Kind: KindNotFound, Err: cause}, "not_found: disk full"},
		{Internal(cause), "internal: internal error: disk full"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
	if !errors.Is(Internal(cause), cause) {
		t.Error("an internal error does not unwrap to its cause")
	}
}

// TestRefusalAtEndOfInputSaysSo: a document cut off where a ',' or the
// closing bracket belongs is refused as ending early, at the offset where
// it ends; any other byte there is refused as the wrong separator.
func TestRefusalAtEndOfInputSaysSo(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`[1`, "unexpected end of input at offset 2"},
		{`[1 `, "unexpected end of input at offset 3"},
		{`{"a":1`, "unexpected end of input at offset 6"},
		{`[1 2]`, "expected ',' or ']' at offset 3"},
		{`{"a":1 "b":2}`, "expected ',' or '}' at offset 7"},
	} {
		err := CheckJSON([]byte(c.in))
		if err == nil || !strings.HasSuffix(AsError(err).Message, c.want) || AsError(err).Code != CodeBadJSON {
			t.Errorf("CheckJSON(%q) = %v, want bad_json ...%q", c.in, err, c.want)
		}
	}
	for _, c := range []struct{ in, want string }{
		{`[1`, "unexpected end of input in an array at offset 2"},
		{`{"a":1`, "unexpected end of input in an object at offset 6"},
		{`[1 2]`, "expected ',' or ']' in an array at offset 3"},
		{`{"a":1 "b":2}`, "expected ',' or '}' in an object at offset 7"},
	} {
		_, err := CanonicalJSON([]byte(c.in))
		if err == nil || !strings.HasSuffix(AsError(err).Message, c.want) {
			t.Errorf("CanonicalJSON(%q) = %v, want ...%q", c.in, err, c.want)
		}
	}
}

// TestDuplicateKeyRefusalClipsLongKeys: the refusal of a duplicate key
// quotes a key of up to 64 bytes whole and a longer one as its first 64
// bytes and "…", cut back to a character boundary, never inside one.
func TestDuplicateKeyRefusalClipsLongKeys(t *testing.T) {
	for _, c := range []struct{ key, quoted string }{
		{strings.Repeat("k", 64), strings.Repeat("k", 64)},
		{strings.Repeat("k", 65), strings.Repeat("k", 64) + "…"},
		// "é" is 2 bytes: bytes 63 and 64 of this key are one character.
		{strings.Repeat("k", 63) + "éz", strings.Repeat("k", 63) + "…"},
		{strings.Repeat("é", 40), strings.Repeat("é", 32) + "…"},
		{strings.Repeat("☕", 30), strings.Repeat("☕", 21) + "…"},
	} {
		doc := `{"` + c.key + `":1,"` + c.key + `":2}`
		err := CheckJSON([]byte(doc))
		e := AsError(err)
		if e == nil || e.Code != CodeDuplicateKey || !strings.Contains(e.Message, `"`+c.quoted+`"`) {
			t.Errorf("duplicate %q: %v, want the key quoted as %q", c.key, err, c.quoted)
		}
	}
}

// TestCheckRunIDRule: a run id is 1 to 120 characters (not bytes) of valid
// UTF-8 without a control character.
func TestCheckRunIDRule(t *testing.T) {
	for s, ok := range map[string]bool{
		"cron-7": true, strings.Repeat("é", 120): true, strings.Repeat("x", 120): true,
		"": false, strings.Repeat("é", 121): false, strings.Repeat("x", 121): false,
		"\xff": false, "a\tb": false, "a\x7fb": false, "a\u0085b": false,
	} {
		err := CheckRunID("--run-id", s)
		if (err == nil) != ok {
			t.Errorf("CheckRunID(%.20q) = %v, want ok %v", s, err, ok)
		}
		if err != nil && (AsError(err).Code != "bad_run_id" || !strings.Contains(err.Error(), "--run-id")) {
			t.Errorf("CheckRunID(%.20q) = %v, want bad_run_id naming --run-id", s, err)
		}
	}
}

// TestUnmarshalInstanceRefusesNonJSON: what is not JSON is an invalid
// bad_json error; JSON decodes with its numbers kept exact for the
// validator.
func TestUnmarshalInstanceRefusesNonJSON(t *testing.T) {
	if _, err := UnmarshalInstance([]byte(`{"a":`)); AsError(err) == nil || AsError(err).Code != "bad_json" || KindOf(err) != KindInvalid {
		t.Errorf("UnmarshalInstance(bad) = %v", err)
	}
	inst, err := UnmarshalInstance([]byte(`{"revision":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := Def("revision").ValidateInstance(inst.(map[string]any)["revision"]); err != nil {
		t.Errorf("a decoded revision 1 does not validate: %v", err)
	}
}
