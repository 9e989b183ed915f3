package guard_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/guard/detect"
	"github.com/caduceus-dev/caduceus/guard/guardtest"
)

// FuzzStream: however a text holding a planted value is split into
// writes, the stream never lets out a value that redacting the whole text
// removes.
func FuzzStream(f *testing.F) {
	f.Add("the key is ", " and more", uint8(0), []byte{3, 9, 1})
	f.Add("", "", uint8(2), []byte{1, 1, 1, 1, 1, 1, 1, 1})
	f.Add("mail: <", ">\n", uint8(3), []byte{200, 7})
	f.Add("x", "y", uint8(5), []byte{0, 0, 250})
	d := detect.MustDefault()
	f.Fuzz(func(t *testing.T, before, after string, which uint8, cuts []byte) {
		before, after = before[:min(len(before), 300)], after[:min(len(after), 300)]
		v := guardtest.Values[int(which)%len(guardtest.Values)].Value
		text := before + v + after
		whole, _ := guard.NewRedactor(d, all(guard.Redact), guard.Answer).Redact(text)
		if strings.Contains(whole, v) {
			return // the value does not stand as one here (e.g. inside a longer token)
		}
		s := guard.NewStream(guard.NewRedactor(d, all(guard.Redact), guard.Answer), 0)
		var out strings.Builder
		i := 0
		for _, c := range cuts {
			n := min(int(c)%64+1, len(text)-i)
			out.WriteString(s.Write(text[i : i+n]))
			i += n
			if i == len(text) {
				break
			}
		}
		out.WriteString(s.Write(text[i:]))
		out.WriteString(s.Flush())
		if strings.Contains(out.String(), v) {
			t.Fatalf("the stream let out %q:\n%q", v, out.String())
		}
	})
}

// FuzzRedactJSON: whatever document a client sends, RedactJSON never
// panics; a JSON document stays JSON, with the same shape (members,
// items, non-string values) as before; and a planted value standing in
// one of its strings does not come out.
func FuzzRedactJSON(f *testing.F) {
	f.Add(`{"model":"m","messages":[{"role":"user","content":"`, `"}],"n":1}`, uint8(0))
	f.Add(`[1,true,null,"`, `",{"a":["x"]}]`, uint8(2))
	f.Add(`{"a":"\u00e9\n`, `\"q"}`, uint8(4))
	f.Add(`not json "`, `" at all`, uint8(1))
	d := detect.MustDefault()
	f.Fuzz(func(t *testing.T, before, after string, which uint8) {
		before, after = before[:min(len(before), 400)], after[:min(len(after), 400)]
		v := guardtest.Values[int(which)%len(guardtest.Values)].Value
		doc := []byte(before + v + after)
		out, changed := guard.RedactJSON(doc, guard.NewRedactor(d, all(guard.Redact), guard.Request))
		if !changed && string(out) != string(doc) {
			t.Fatalf("unchanged, yet %q became %q", doc, out)
		}
		var in any
		if json.Unmarshal(doc, &in) != nil {
			return // not JSON: redacted as text, checked by FuzzStream's whole-text case
		}
		var got any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("JSON in, not JSON out: %v\n%q\n%q", err, doc, out)
		}
		if shape(in) != shape(got) {
			t.Fatalf("the document's shape changed:\n%s\n%s", shape(in), shape(got))
		}
		// A string holding v whose own redaction removes it (v stands as
		// a value there, not inside a longer token) must not let it out.
		gone := func(s string) bool {
			red, _ := guard.NewRedactor(d, all(guard.Redact), guard.Request).Redact(s)
			return !strings.Contains(red, v)
		}
		if inString(in, v, gone) && strings.Contains(string(out), v) {
			t.Fatalf("%q came out of %q as %q", v, doc, out)
		}
	})
}

// shape is v with every string replaced by "s": what redaction must keep.
func shape(v any) string {
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			return "s"
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		case map[string]any:
			for k := range x {
				x[k] = walk(x[k])
			}
		}
		return v
	}
	b, _ := json.Marshal(walk(v))
	return string(b)
}

// inString reports whether one of v's string values holds s and passes
// ok.
func inString(v any, s string, ok func(string) bool) bool {
	switch x := v.(type) {
	case string:
		return strings.Contains(x, s) && ok(x)
	case []any:
		for _, e := range x {
			if inString(e, s, ok) {
				return true
			}
		}
	case map[string]any:
		for _, e := range x {
			if inString(e, s, ok) {
				return true
			}
		}
	}
	return false
}
