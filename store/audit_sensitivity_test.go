package store_test

import (
	"fmt"
	"testing"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestAuditChainFromBeforeSensitivity: a chain written before records
// carried a sensitivity and a redaction (bodies as the earlier Seal wrote
// them: the canonical JSON of id, outcome, payload, seq and tenant, which
// TestSealBodyIsCanonical pinned) still verifies, records appended to it
// carry both (the action's sensitivity by default, the entry's own when it
// names one), and the whole chain verifies; a record with a sensitivity or
// redaction the schema refuses is not appended.
func TestAuditChainFromBeforeSensitivity(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		prev := audit.Genesis
		for seq := int64(1); seq <= 3; seq++ {
			e := entry("slot-1", "keys.create", fmt.Sprint("key/old", seq), map[string]any{"n": seq})
			id := contract.NewID(contract.PrefixEvent)
			body, err := contract.CanonicalJSON(map[string]any{"id": id, "outcome": e.Outcome, "payload": e.Payload, "seq": seq, "tenant": "slot-1"})
			if err != nil {
				t.Fatal(err)
			}
			hash, err := audit.Link(prev, body)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(ctx, `INSERT INTO audit_records (tenant, seq, id, at, action, resource, outcome, body, prev_hash, hash)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, "slot-1", seq, id, e.Outcome.At, e.Outcome.Action, e.Outcome.Resource, string(e.Outcome.Outcome), string(body), prev, hash); err != nil {
				t.Fatal(err)
			}
			prev = hash
		}
		if _, err := db.Exec(ctx, `INSERT INTO audit_heads (tenant, seq, hash) VALUES (?, ?, ?)`, "slot-1", 3, prev); err != nil {
			t.Fatal(err)
		}
		wantWhole(t, db, audit.Options{})

		if _, err := db.Audit().Append(ctx, entry("slot-1", "trader.apply", "decision/d1", nil)); err != nil {
			t.Fatal(err)
		}
		relay := entry("slot-1", "relay.deliver", "telegram:42", map[string]any{"content_sha256": contract.SHA256([]byte("hi"))})
		relay.Redaction = &contract.Redaction{Level: contract.RedactionPartial, Reason: "message text kept as its sha256"}
		if _, err := db.Audit().Append(ctx, relay); err != nil {
			t.Fatal(err)
		}
		own := entry("slot-1", "keys.list", "keys", nil)
		own.Sensitivity = contract.SensitivityPublic
		if _, err := db.Audit().Append(ctx, own); err != nil {
			t.Fatal(err)
		}
		for _, bad := range []func(*audit.Entry){
			func(e *audit.Entry) { e.Sensitivity = "secret" },
			func(e *audit.Entry) { e.Redaction = &contract.Redaction{Level: "most"} },
		} {
			e := entry("slot-1", "keys.list", "keys", nil)
			bad(&e)
			if _, err := db.Audit().Append(ctx, e); err == nil {
				t.Errorf("appended %+v", e)
			}
		}
		rep := wantWhole(t, db, audit.Options{})
		if rep.Records != 6 {
			t.Fatalf("verified %d records, want 6", rep.Records)
		}
		recs, err := db.Audit().Tail(ctx, store.AuditFilter{Tenant: "slot-1", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		got := map[int64]string{}
		for _, r := range recs {
			got[r.Seq] = string(r.Sensitivity)
			if r.Redaction != nil {
				got[r.Seq] += "/" + string(r.Redaction.Level) + ":" + r.Redaction.Reason
			}
		}
		want := map[int64]string{1: "", 2: "", 3: "", 4: "sensitive", 5: "personal/partial:message text kept as its sha256", 6: "public"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("sensitivity and redaction by seq %v, want %v", got, want)
		}
	})
}
