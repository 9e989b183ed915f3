package contract

import (
	"strings"
	"testing"
)

// TestMatcherBoundaries: each hand-written matcher answers as its schema
// pattern at the edges of every character range it allows ('0' and '9',
// 'a' and 'z', 'A' and 'Z', and the bytes just outside them) and of every
// length it allows (the shortest, the longest, one less, one more).
func TestMatcherBoundaries(t *testing.T) {
	edges := []string{"0", "9", "a", "f", "g", "z", "A", "F", "Z", "/", ":", "`", "{", "@", "[", "-", ".", "_", ",", " "}
	var cases []string
	for _, c := range edges {
		cases = append(cases,
			// timestamp: a character at each digit place and in the fraction
			c+"026-12-01T00:00:00Z", "2026-12-0"+c+"T00:00:00Z", "2026-12-01T00:00:0"+c+"Z", "2026-12-01T00:00:00."+c+"Z",
			// action
			c+".b", "a."+c, c+c+"."+c,
			// tenant slot
			"slot-"+c, "slot-1"+c+"9",
			// user ref and sha256: a character among hex digits
			"usr_0123456789abcde"+c, "sha256:"+strings.Repeat("0", 63)+c,
			// id: a character in the prefix and in the rest
			c+"b_abcd", "ab_abc"+c, "ab_"+c+c+c+c,
		)
	}
	for n := 0; n <= 8; n++ {
		cases = append(cases, "2026-12-01T00:00:00."+strings.Repeat("1", n)+"Z", "slot-"+strings.Repeat("1", n))
	}
	for _, n := range []int{0, 1, 2, 3, 4, 5, 6, 7, 8} {
		cases = append(cases, strings.Repeat("a", n)+"_abcd")
	}
	for _, n := range []int{3, 4, 5, 79, 80, 81} {
		cases = append(cases, "ab_"+strings.Repeat("x", n))
	}
	for _, n := range []int{15, 16, 17, 63, 64, 65} {
		cases = append(cases, "usr_"+strings.Repeat("a", n))
	}
	for _, n := range []int{63, 64, 65} {
		cases = append(cases, "sha256:"+strings.Repeat("f", n))
	}
	cases = append(cases, "a.", ".a", "a..b", "a.b.", "_._", "2026-12-01T00:00:00", "2026-12-01T00:00:00.Z", "Z", "2026-12-01T00:00:00ZZ")
	for _, s := range cases {
		checkMatchers(t, s)
	}
}

// TestJSONValueStartsAtTheRangeEdges: a value that starts with any digit
// from 0 to 9 or '-' is a number to both the input rule and the
// canonicalizer; the bytes beside the digits ('/' and ':') start nothing.
func TestJSONValueStartsAtTheRangeEdges(t *testing.T) {
	for _, s := range []string{`0`, `9`, `-9`, `[9,0,-0]`, `{"a":9}`, `90.5e9`} {
		if err := CheckJSON([]byte(s)); err != nil {
			t.Errorf("CheckJSON(%s) = %v", s, err)
		}
		if got, err := CanonicalJSON([]byte(s)); err != nil || string(got) != s {
			t.Errorf("CanonicalJSON(%s) = %s, %v", s, got, err)
		}
	}
	for _, s := range []string{`/`, `:`, `[/]`, `{"a":/}`, `[:]`} {
		if err := CheckJSON([]byte(s)); AsError(err) == nil || AsError(err).Code != CodeBadJSON {
			t.Errorf("CheckJSON(%s) = %v, want bad_json", s, err)
		}
		if _, err := CanonicalJSON([]byte(s)); KindOf(err) != KindInvalid {
			t.Errorf("CanonicalJSON(%s) = %v, want invalid", s, err)
		}
	}
}

// TestCanonicalStringsDecodeAsEncodingJSON: a string is what encoding/json
// decodes it to: an escape or a non-ASCII byte is decoded (invalid UTF-8
// becomes U+FFFD, so "\x80" and "\ufffd" are one object key and sort
// where U+FFFD sorts), a space or DEL is kept, a control byte refused.
func TestCanonicalStringsDecodeAsEncodingJSON(t *testing.T) {
	for in, want := range map[string]string{
		"{\"\xc3\xa9\":1,\"\x80\":2}":     "{\"é\":1,\"\ufffd\":2}",
		"{\"\x80\":1,\"é\":2}":            "{\"é\":2,\"\ufffd\":1}",
		"{\"\x80\":1,\"\\ufffd\":2}":      "{\"\ufffd\":2}",
		`{"caf\u00e9 au lait":" a é "}`:   `{"café au lait":" a é "}`,
		"\"\\u0041\x7f b\"":               "\"A\x7f b\"",
		`["\u00e9\t"," \"x\" "]`:          `["é\t"," \"x\" "]`,
		"\"\xff \\n\"":                    "\"\ufffd \\n\"",
		`{"b\u00e9":1,"a\u00e9":2,"c":3}`: `{"aé":2,"bé":1,"c":3}`,
	} {
		got, err := CanonicalJSON([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("CanonicalJSON(%q) = %q, %v; want %q", in, got, err, want)
		}
		checkAgainstReference(t, []byte(in))
	}
	for _, in := range []string{"\"\\u00e9\x1f\"", "\"\\u00e9\x00\"", "\"é\x01\""} {
		if _, err := CanonicalJSON([]byte(in)); KindOf(err) != KindInvalid {
			t.Errorf("CanonicalJSON(%q) = %v, want invalid", in, err)
		}
	}
}
