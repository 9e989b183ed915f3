package audit

import (
	"encoding/json"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/contract/contracttest"
)

// sealedParts are the hand-encoded parts of a sealed body.
type sealedParts struct {
	Outcome     contract.AuditOutcome
	Provenance  *contract.Provenance
	Redaction   *contract.Redaction
	Sensitivity contract.Sensitivity
}

// TestSealBodyCoversEveryField proves Seal's hand-written body equal to the
// canonical JSON of the reflective encoding over values with every field of
// the outcome and the provenance filled, at every depth, and with each
// field left empty in turn: a field added to either struct without its
// writer fails here rather than silently leaving the hash chain.
func TestSealBodyCoversEveryField(t *testing.T) {
	paths := contracttest.Fields[sealedParts]()
	for i, v := range contracttest.Variants[sealedParts]() {
		e := Entry{Outcome: v.Outcome, Provenance: v.Provenance, Redaction: v.Redaction, Sensitivity: v.Sensitivity, Payload: json.RawMessage(`{"b":[1,2],"a":"x"}`)}
		rec, err := Seal(e, "evt_01ABCDEFGHJKMNPQRSTVWXYZ0", 3, Genesis)
		if err != nil {
			t.Fatal(err)
		}
		whole, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(whole, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "prev_hash")
		delete(m, "hash")
		want, err := contract.CanonicalJSON(m)
		if err != nil {
			t.Fatal(err)
		}
		if string(rec.Body) != string(want) {
			what := "every field filled"
			if i > 0 {
				what = paths[i-1] + " left empty"
			}
			t.Fatalf("%s:\n body %s\n want %s", what, rec.Body, want)
		}
	}
}
