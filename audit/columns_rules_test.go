package audit

import (
	"testing"
)

// TestColumnsAreCheckedInsideTheOutcomeOnly states CheckColumns' rule: a
// stored column (at, action, resource, outcome) is checked against the
// record's outcome object only, found by a string-aware scan — an honest
// row whose strings hold braces, brackets and quotes agrees with its body,
// and a tampered column does not pass because the payload carries the
// tampered value under the same key.
func TestColumnsAreCheckedInsideTheOutcomeOnly(t *testing.T) {
	payload := map[string]any{
		"action": "keys.delete", "at": "2020-01-01T00:00:00Z", "outcome": "deny", "resource": "key/9",
		"nested": map[string]any{"action": "keys.delete", "list": []any{"}", "]", "{", "["}},
	}
	e := sample("slot-1", payload, nil)
	e.Outcome.Resource = `key/{1}] "x" [y`
	e.Outcome.Reason = `} ] { [ \" "`
	rec, err := Seal(e, "evt_00000001", 1, Genesis)
	if err != nil {
		t.Fatal(err)
	}
	row := RowOf(rec)
	if why := CheckColumns(row); why != "" {
		t.Fatalf("an honest row: %s", why)
	}
	for name, tamper := range map[string]func(r *Row){
		"action":   func(r *Row) { r.Action = "keys.delete" },
		"at":       func(r *Row) { r.At = "2020-01-01T00:00:00Z" },
		"outcome":  func(r *Row) { r.Outcome = "deny" },
		"resource": func(r *Row) { r.Resource = "key/9" },
	} {
		r := row
		tamper(&r)
		if why := CheckColumns(r); why == "" {
			t.Errorf("column %s tampered to the payload's value passed the check", name)
		}
	}
}
