package executorsql_test

import (
	"encoding/json"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestTickEnvelopesCarryTheContractVersion: a tick's envelope, the one
// stored with its idempotency key and the one in its audit record carry
// contract_version (contract.Version), and the replay answers it; an
// envelope stored before envelopes carried it (its row rewritten here as
// the old code stored it) is still read and replayed as stored, without
// it, and that replay is a valid envelope.
func TestTickEnvelopesCarryTheContractVersion(t *testing.T) {
	envelope, err := contract.LoadSchema("executor.schema.json#/$defs/envelope")
	if err != nil {
		t.Fatal(err)
	}
	valid := func(t *testing.T, what string, env executor.Envelope) {
		t.Helper()
		b, _ := json.Marshal(env)
		if err := envelope.ValidateJSON(b); err != nil {
			t.Errorf("%s: %v\n%s", what, err, b)
		}
	}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ex := paperExecutor(t, db)
		ctx := t.Context()
		first, err := ex.TickAs(ctx, tickCaller, buySPY(t, "cv-key-00001", ""))
		if err != nil || first.Replay || first.ContractVersion != contract.Version {
			t.Fatalf("first: contract_version %q (replay %v), %v; want %q", first.ContractVersion, first.Replay, err, contract.Version)
		}
		valid(t, "first", first)
		again, err := ex.TickAs(ctx, tickCaller, buySPY(t, "cv-key-00001", ""))
		if err != nil || !again.Replay || again.ContractVersion != contract.Version {
			t.Fatalf("replay: contract_version %q (replay %v), %v; want %q", again.ContractVersion, again.Replay, err, contract.Version)
		}
		valid(t, "replay", again)
		var stored string
		if err := db.QueryRow(ctx, `SELECT result FROM idempotency WHERE tenant = ? AND scope = ? AND key = ?`,
			string(tickCaller.Identity.TenantSlot), executor.TickKeyScope, "cv-key-00001").Scan(&stored); err != nil {
			t.Fatal(err)
		}
		var probe map[string]any
		if err := json.Unmarshal([]byte(stored), &probe); err != nil || probe["contract_version"] != contract.Version {
			t.Errorf("stored envelope: %v %.200s", err, stored)
		}
		unkeyed, err := ex.TickAs(ctx, tickCaller, executor.TickInput{Payload: []byte(`{"strategy":"momentum","intents":[]}`)})
		if err != nil || unkeyed.ContractVersion != contract.Version {
			t.Fatalf("tick without a key: contract_version %q, %v", unkeyed.ContractVersion, err)
		}
		ticks, _ := tickRecords(t, db, tickCaller.Identity.TenantSlot)
		if len(ticks) != 2 {
			t.Fatalf("%d tick records, want 2", len(ticks))
		}
		for _, r := range ticks {
			if r.Envelope.ContractVersion != contract.Version {
				t.Errorf("audit record of tick %s: contract_version %q", r.TickID, r.Envelope.ContractVersion)
			}
		}

		// An envelope stored by the code before contract_version.
		old, err := ex.TickAs(ctx, tickCaller, buySPY(t, "cv-key-00002", "old"))
		if err != nil {
			t.Fatal(err)
		}
		old.ContractVersion = ""
		raw, _ := json.Marshal(old)
		if _, err := db.Exec(ctx, `UPDATE idempotency SET result = ? WHERE tenant = ? AND scope = ? AND key = ?`,
			string(raw), string(tickCaller.Identity.TenantSlot), executor.TickKeyScope, "cv-key-00002"); err != nil {
			t.Fatal(err)
		}
		replay, err := ex.TickAs(ctx, tickCaller, buySPY(t, "cv-key-00002", "old"))
		if err != nil || !replay.Replay || replay.ContractVersion != "" || replay.TickID != old.TickID {
			t.Fatalf("replay of the old envelope: %+v, %v", replay, err)
		}
		valid(t, "replay of the old envelope", replay)
	})
}
