package contract_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
)

// deepValue is n arrays around one number: the number sits n levels deep.
func deepValue(n int) string { return strings.Repeat("[", n) + "1" + strings.Repeat("]", n) }

// deepObject is n objects around one number.
func deepObject(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }

// TestRecordDepthLimitIsInclusive states CanonicalJSON's depth rule: a
// value MaxRecordDepth levels deep is sealed (the deepest input CheckJSON
// accepts, holding a value, wrapped RecordWrapDepth levels by a record),
// one level more is refused as too deep, for arrays and objects alike.
func TestRecordDepthLimitIsInclusive(t *testing.T) {
	in := deepValue(contract.MaxJSONDepth)
	if err := contract.CheckJSON([]byte(in)); err != nil {
		t.Fatalf("the deepest accepted input: %v", err)
	}
	wrapped := strings.Repeat(`{"w":`, contract.RecordWrapDepth) + in + strings.Repeat(`}`, contract.RecordWrapDepth)
	if out, err := contract.CanonicalJSON(json.RawMessage(wrapped)); err != nil || string(out) != wrapped {
		t.Fatalf("a record of the deepest accepted input, a value at depth %d: %v", contract.MaxRecordDepth, err)
	}
	if out, err := contract.CanonicalJSON(json.RawMessage(deepValue(contract.MaxRecordDepth))); err != nil || string(out) != deepValue(contract.MaxRecordDepth) {
		t.Fatalf("a value at depth MaxRecordDepth: %v", err)
	}
	if out, err := contract.CanonicalJSON(json.RawMessage(deepObject(contract.MaxRecordDepth))); err != nil || string(out) != deepObject(contract.MaxRecordDepth) {
		t.Fatalf("a value MaxRecordDepth objects deep: %v", err)
	}
	for _, in := range []string{deepValue(contract.MaxRecordDepth + 1), deepObject(contract.MaxRecordDepth + 1)} {
		_, err := contract.CanonicalJSON(json.RawMessage(in))
		if e := contract.AsError(err); e == nil || e.Kind != contract.KindInvalid || !strings.Contains(e.Message, "nesting too deep") {
			t.Fatalf("a value at depth MaxRecordDepth+1 (%.10s...): %v, want invalid, nesting too deep", in, err)
		}
	}
}
