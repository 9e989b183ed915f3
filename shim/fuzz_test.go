package shim

import (
	"encoding/json"
	"testing"
)

// FuzzDecodeProvision: any input is either refused with an error or gives a
// provision that compiles and re-validates.
func FuzzDecodeProvision(f *testing.F) {
	f.Add([]byte(`{"id":"P","triggers":{"keyword":{"any":["deploy"]},"regex":[{"pattern":"(?i)x+"}],"path":["a/**"]},"action":"shim","context_refs":["verb:x"]}`))
	f.Add([]byte(`{"id":"D","triggers":{"semantic":{"examples":["a"]}},"action":"respond_directly","response":{"text":"t"}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodeProvision(b)
		if err != nil {
			return
		}
		rs := compile([]Provision{p}, nil)
		_ = rs.signals("deploy x a/b", []string{"Bash"}, func() []string { return []string{"a/b"} })
		again, _ := json.Marshal(p)
		if _, err := DecodeProvision(again); err != nil {
			t.Fatalf("a decoded provision does not re-validate: %v\n%s", err, again)
		}
	})
}

func FuzzDecodeBundle(f *testing.F) {
	f.Add([]byte("provisions:\n  - id: P\n    action: shim\ncontext:\n  - ref: verb:x\n"))
	f.Add([]byte(`[{"id":"P"}]`))
	f.Add([]byte(`{"ref":"verb:x","kind":"verb","body":"b"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, es, err := decodeBundle(b)
		if err != nil {
			return
		}
		for _, raw := range append(ps, es...) {
			if !json.Valid(raw) {
				t.Fatalf("bundle item is not JSON: %q", raw)
			}
		}
	})
}

func FuzzParseVerdict(f *testing.F) {
	f.Add([]byte(`{"apply":true,"confidence":0.5}`))
	f.Add([]byte(`{"apply":false,"confidence":1e-3}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parseVerdict(b)
		if err == nil && (v.Confidence < 0 || v.Confidence > 1 || v.Confidence != v.Confidence) {
			t.Fatalf("accepted confidence %v", v.Confidence)
		}
	})
}
