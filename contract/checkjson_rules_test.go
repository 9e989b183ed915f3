package contract_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
)

// TestCheckJSONNamesTheFirstBadByte states the bad_utf8 refusal's rule: it
// names the offset of the first byte that is not UTF-8 — after valid
// multi-byte characters, and after a literal U+FFFD, which is valid.
func TestCheckJSONNamesTheFirstBadByte(t *testing.T) {
	for in, off := range map[string]int{
		"\xff":                   0,
		`"ab` + "\xff" + `"`:     3,
		`"é✓` + "\xc3(" + `"`:    6,
		`"` + "\uFFFD\xfe" + `"`: 4,
		`["x",` + "\x80]":        5,
	} {
		err := contract.CheckJSON([]byte(in))
		e := contract.AsError(err)
		if e == nil || e.Code != contract.CodeBadUTF8 || !strings.Contains(e.Message, "offset "+strconv.Itoa(off)+")") {
			t.Errorf("CheckJSON(%q) = %v, want bad_utf8 at offset %d", in, err, off)
		}
	}
}

// TestCheckJSONRefusesTruncatedInput states that the input rule refuses a
// document cut short anywhere as bad_json, never by reading past its end.
func TestCheckJSONRefusesTruncatedInput(t *testing.T) {
	for _, in := range []string{`{`, `{ `, `{"`, `{"a`, `{"a"`, `{"a" `, `{"a":`, `{"a":1`, `{"a":1,`, `{"a":1, `, `"abc`, `"é`, `"a\`, `"\u`, `"\u00`, `"\u004`, `[`, `[1`, `[1,`, `[1, `, `1e`, `1E`, `[1e`, `1.`, `-`} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("CheckJSON(%q) panicked: %v", in, p)
				}
			}()
			b := []byte(in)
			b = b[:len(b):len(b)] // nothing readable past the end
			if e := contract.AsError(contract.CheckJSON(b)); e == nil || e.Code != contract.CodeBadJSON {
				t.Errorf("CheckJSON(%q) = %v, want bad_json", in, e)
			}
		}()
	}
}

// TestCheckJSONDepthCountsObjects states the depth rule for objects as for
// arrays: MaxJSONDepth objects deep is accepted, one more is too_deep.
func TestCheckJSONDepthCountsObjects(t *testing.T) {
	deepObj := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	if err := contract.CheckJSON([]byte(deepObj(contract.MaxJSONDepth))); err != nil {
		t.Errorf("MaxJSONDepth objects deep: %v", err)
	}
	if e := contract.AsError(contract.CheckJSON([]byte(deepObj(contract.MaxJSONDepth + 1)))); e == nil || e.Code != contract.CodeTooDeep {
		t.Errorf("MaxJSONDepth+1 objects deep: %v, want too_deep", e)
	}
}

// TestDuplicateKeyRefusalClipsLongKeys states how the duplicate_key
// refusal names the key: whole up to 64 bytes, cut at 64 bytes (never
// inside a character) and marked with "…" beyond.
func TestDuplicateKeyRefusalClipsLongKeys(t *testing.T) {
	for key, named := range map[string]string{
		strings.Repeat("k", 64):                    `"` + strings.Repeat("k", 64) + `"`,
		strings.Repeat("k", 65):                    `"` + strings.Repeat("k", 64) + `…"`,
		strings.Repeat("k", 63) + "é":              `"` + strings.Repeat("k", 63) + `…"`,
		strings.Repeat("k", 62) + "é" + "tail-end": `"` + strings.Repeat("k", 62) + `é…"`,
	} {
		in := `{"` + key + `":1,"` + key + `":2}`
		e := contract.AsError(contract.CheckJSON([]byte(in)))
		if e == nil || e.Code != contract.CodeDuplicateKey || !strings.Contains(e.Message, "the key "+named+" more than once") {
			t.Errorf("duplicate key of %d bytes: %v, want it named %s", len(key), e, named)
		}
	}
}

// TestCheckJSONAcceptsEveryPrintableByte states the string rule's other
// side: every printable ASCII byte but '"' and '\\' stands for itself in a
// string (the space, the lowest, and '~', the highest, included), in a
// value and in a key, in short strings and past the 8-byte fast path.
func TestCheckJSONAcceptsEveryPrintableByte(t *testing.T) {
	for c := byte(0x20); c < 0x7f; c++ {
		if c == '"' || c == '\\' {
			continue
		}
		s := string([]byte{'x', c})
		for _, in := range []string{`"` + s + `"`, `{"` + s + `":1}`, `"0123456789abcdef` + s + `"`} {
			if err := contract.CheckJSON([]byte(in)); err != nil {
				t.Errorf("CheckJSON(%q) = %v", in, err)
			}
		}
	}
}

// TestCheckJSONUnicodeEscapeDigits states the \u escape's rule: four hex
// digits, 0-9, a-f and A-F, each range's ends included; the bytes just
// outside them are a bad escape.
func TestCheckJSONUnicodeEscapeDigits(t *testing.T) {
	for _, esc := range []string{`\u0009`, `\u9a9f`, `\uf0A0`, `\uFFFd`, `\u00aF`} {
		if err := contract.CheckJSON([]byte(`"` + esc + `"`)); err != nil {
			t.Errorf("escape %s: %v", esc, err)
		}
	}
	for _, c := range []byte{'/', ':', '`', 'g', '@', 'G'} {
		in := `"\u00` + string(c) + `1"`
		if e := contract.AsError(contract.CheckJSON([]byte(in))); e == nil || e.Code != contract.CodeBadJSON || !strings.Contains(e.Message, `bad \u escape`) {
			t.Errorf("CheckJSON(%s) = %v, want a bad \\u escape", in, e)
		}
	}
}
