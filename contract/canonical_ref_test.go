package contract

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract/contracttest"
)

// referenceCanonical is the straightforward canonicalizer (decode into a
// tree, re-encode with sorted keys) that CanonicalJSON's one-pass scanner
// must agree with.
func referenceCanonical(raw []byte) ([]byte, bool) {
	if !json.Valid(raw) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if dec.Decode(&tree) != nil {
		return nil, false
	}
	var buf bytes.Buffer
	var write func(v any)
	write = func(v any) {
		switch x := v.(type) {
		case nil:
			buf.WriteString("null")
		case bool:
			buf.WriteString(strconv.FormatBool(x))
		case json.Number:
			buf.WriteString(x.String())
		case string:
			writeString(&buf, x)
		case []any:
			buf.WriteByte('[')
			for i, e := range x {
				if i > 0 {
					buf.WriteByte(',')
				}
				write(e)
			}
			buf.WriteByte(']')
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			buf.WriteByte('{')
			for i, k := range keys {
				if i > 0 {
					buf.WriteByte(',')
				}
				writeString(&buf, k)
				buf.WriteByte(':')
				write(x[k])
			}
			buf.WriteByte('}')
		}
	}
	write(tree)
	return buf.Bytes(), true
}

var canonicalSeeds = []string{
	`{"b":1,"a":[true,null,"x"]}`, `1.50`, `-0.0e+10`, `"\u00e9<>&\u2028"`, `[]`, `{}`, ` { "a" : { "c" : 1 , "b" : 2 } } `,
	`{"a":1,"a":2}`, `"\ud800"`, "\"\xff\"", `{`, `nul`, `01`, `1.`, `-`, `[1,]`, `{"a":1}}`, `"a\tb"`, "\"\x7f\"",
	`[1e5,2E-3,0.5]`, `{"z":{"y":[{"b":"\n","a":"\\"}]}}`,
}

func TestCanonicalMatchesReference(t *testing.T) {
	for _, s := range canonicalSeeds {
		checkAgainstReference(t, []byte(s))
	}
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	if _, err := CanonicalJSON(json.RawMessage(deep)); err == nil {
		t.Error("20,000 levels of nesting accepted")
	}
}

func checkAgainstReference(t *testing.T, b []byte) {
	t.Helper()
	want, ok := referenceCanonical(b)
	got, err := CanonicalJSON(json.RawMessage(b))
	switch {
	case ok && err != nil:
		t.Fatalf("%q: reference accepts (%s), CanonicalJSON refuses: %v", b, want, err)
	case !ok && err == nil:
		t.Fatalf("%q: invalid JSON accepted as %s", b, got)
	case ok && !bytes.Equal(got, want):
		t.Fatalf("%q:\n got %s\nwant %s", b, got, want)
	case err != nil && KindOf(err) != KindInvalid:
		t.Fatalf("%q: error kind %v", b, KindOf(err))
	}
}

// FuzzCanonicalMatchesReference: the one-pass canonicalizer and the tree
// canonicalizer accept the same documents and write the same bytes.
func FuzzCanonicalMatchesReference(f *testing.F) {
	for _, s := range canonicalSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkAgainstReference(t, b)
	})
}

// libraryCanonical is canonical JSON by encoding/json alone: decoded
// into a tree (numbers as written), re-encoded (map keys sorted, HTML
// escaping off).
func libraryCanonical(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(tree); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// BenchmarkCanonicalJSON compares the one-pass canonicalizer ("hand") with
// canonical JSON by encoding/json alone ("encoding_json",
// libraryCanonical), on a 20-action audit payload (~9 KB).
func BenchmarkCanonicalJSON(b *testing.B) {
	var actions []map[string]any
	for i := range 20 {
		actions = append(actions, map[string]any{
			"symbol": "S" + strconv.Itoa(i), "side": "buy", "status": "placed", "qty": 1.5, "ref_id": "0b7c6f0e-4f4a-4cc1-9f0a-5d6a1d3f9e2" + strconv.Itoa(i%10),
			"broker_calls": []any{map[string]any{"name": "review_equity_order", "outcome": "ok", "status": 200}, map[string]any{"name": "place_equity_order", "outcome": "ok", "status": 200}},
			"reason":       "breakout above the 20-day high; volume confirms",
		})
	}
	raw, _ := json.Marshal(map[string]any{"payload": map[string]any{"strategy": "bench", "intents": actions}, "envelope": map[string]any{"actions": actions, "aborted": nil}})
	got, err := CanonicalJSON(json.RawMessage(raw))
	if want, err2 := libraryCanonical(raw); err != nil || err2 != nil || !bytes.Equal(got, want) {
		b.Fatalf("the two differ (%v, %v)", err, err2)
	}
	b.Run("hand", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		contracttest.Loop(b, func() {
			if _, err := CanonicalJSON(json.RawMessage(raw)); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		contracttest.Loop(b, func() {
			if _, err := libraryCanonical(raw); err != nil {
				b.Fatal(err)
			}
		})
	})
}
