package provsync

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
)

func TestParseSyncBundle(t *testing.T) {
	for _, tc := range []struct {
		in         string
		provs, ctx int
		field      string
	}{
		{`{"provisions":[{"id":"a"}],"context":[{"ref":"x:y"}],"context_entries":[{"ref":"x:z"}]}`, 1, 2, ""},
		{`{"provisions":null}`, 0, 0, ""},
		{`{}`, 0, 0, ""},
		{`[]`, 0, 0, "(root)"},
		{`{"provisions":{"id":"a"}}`, 0, 0, "/provisions"},
		{`{"provisions":[1]}`, 0, 0, "/provisions/0"},
		{`{"rules":[]}`, 0, 0, "/rules"},
		{`not json`, 0, 0, "(root)"},
	} {
		b, err := parseSyncBundle([]byte(tc.in))
		if tc.field != "" {
			e := contract.AsError(err)
			if err == nil || e.Kind != contract.KindInvalid || (tc.field != "(root)" && e.Field != tc.field) {
				t.Errorf("%s: error %v (field %q), want invalid naming %s", tc.in, err, e.Field, tc.field)
			}
			continue
		}
		if err != nil || len(b.Provisions) != tc.provs || len(b.Context) != tc.ctx {
			t.Errorf("%s: %d provisions, %d context, %v", tc.in, len(b.Provisions), len(b.Context), err)
		}
	}
}

func TestBlobDigest(t *testing.T) {
	h := strings.Repeat("ab", 32)
	for in, want := range map[string]string{
		"tessera://blobs/" + h:                       h,
		"tessera://blobs/" + strings.ToUpper(h):      h, // hex is case-insensitive
		"tessera://blobs/" + h[:63]:                  "",
		"tessera://blobs/" + h + "/x":                "",
		"http://blobs/" + h:                          "",
		"tessera://nouns/" + h:                       "",
		"tessera://blobs/" + strings.Repeat("g", 64): "",
	} {
		got, ok := blobDigest(in)
		if got != want || ok != (want != "") {
			t.Errorf("BlobDigest(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func FuzzParseSyncBundle(f *testing.F) {
	f.Add([]byte(`{"provisions":[{"id":"a","version":2,"fabric_governance":{"status":"verified"}}],"context":[{"ref":"x:y","body_uri":"tessera://blobs/00"}]}`))
	f.Add([]byte(`{"context_entries":[{}],"provisions":null}`))
	f.Add([]byte(`{"provisions":[{"id":1}], "provisions":[{}]}`))
	f.Add([]byte(`[{"id":"x"}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		sb, err := parseSyncBundle(b)
		if err != nil {
			if contract.KindOf(err) != contract.KindInvalid {
				t.Fatalf("error of kind %s: %v", contract.KindOf(err), err)
			}
			return
		}
		for _, r := range append(append([]json.RawMessage(nil), sb.Provisions...), sb.Context...) {
			var m map[string]any
			if err := json.Unmarshal(r, &m); err != nil {
				t.Fatalf("record %s is not an object: %v", r, err)
			}
			var meta syncMeta
			_ = json.Unmarshal(r, &meta) // must not panic
			if _, err := stripFields(r, "version"); err != nil {
				t.Fatalf("strip: %v", err)
			}
		}
	})
}
