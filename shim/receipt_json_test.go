package shim_test

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/contract/contracttest"
	"github.com/caduceus-dev/caduceus/shim"
)

// TestReceiptCanonicalCoversEveryField proves the receipt's hand-written
// canonical JSON equal to contract.CanonicalJSON of its encoding/json form,
// with every field filled at every depth and with each left empty in turn:
// a field added to the receipt (or to what it holds) without its writer
// fails here instead of leaving the audit record.
func TestReceiptCanonicalCoversEveryField(t *testing.T) {
	paths := contracttest.Fields[shim.Receipt]()
	variants := contracttest.Variants[shim.Receipt]()
	// Nil lists (null) and floats encoding/json writes in exponent form.
	small, large := 1e-9, 1e21
	variants = append(variants, shim.Receipt{},
		shim.Receipt{Fired: []shim.Fired{{Confidence: &small}, {Confidence: &large}}, Shimmed: []shim.Shimmed{}})
	for i, r := range variants {
		var got bytes.Buffer
		r.WriteCanonicalJSON(&got)
		raw, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		want, err := contract.CanonicalJSON(json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != string(want) {
			what := "every field filled"
			switch {
			case i > len(paths):
				what = "extra case"
			case i > 0:
				what = paths[i-1] + " left empty"
			}
			t.Fatalf("%s:\n got  %s\n want %s", what, got.String(), want)
		}
	}
}

// TestReceiptCanonicalNaN: a confidence encoding/json cannot write is null,
// so the record still seals.
func TestReceiptCanonicalNaN(t *testing.T) {
	nan := math.NaN()
	var b bytes.Buffer
	shim.Receipt{Fired: []shim.Fired{{Confidence: &nan}}}.WriteCanonicalJSON(&b)
	if !json.Valid(b.Bytes()) || !bytes.Contains(b.Bytes(), []byte(`"confidence":null`)) {
		t.Fatalf("NaN confidence: %s", b.String())
	}
}
