package tradersql_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
	"github.com/caduceus-dev/caduceus/trader"
	"github.com/caduceus-dev/caduceus/trader/tradersql"
	"github.com/caduceus-dev/caduceus/trader/tradertest"
)

// TestDecisionsCarryTheContractVersion: a decision's answer and the decision
// and attempt stored for it carry contract_version (contract.Version), and
// the replay answers it; a decision stored before responses carried it (its
// row rewritten here as the old code wrote it) is still read and replayed
// as stored, without one, and that replay is a valid response.
func TestDecisionsCarryTheContractVersion(t *testing.T) {
	run := func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		st := tradersql.New(db)
		tradertest.Seed(t, st, tradertest.T1)
		svc, err := trader.New(st, trader.Options{})
		if err != nil {
			t.Fatal(err)
		}
		caller := tradertest.Caller(tradertest.T1, "hermes")
		apply := func(body []byte) trader.Response {
			t.Helper()
			r, err := svc.Apply(ctx, caller, body)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(r)
			if err := trader.ValidateResponse(b); err != nil {
				t.Errorf("%s: %v", b, err)
			}
			return r
		}
		decision := func(id, action string) []byte {
			return tradertest.Request(map[string]any{
				"decision_id": id, "concern_id": tradertest.Concern, "account_id": tradertest.Account, "market_symbol": tradertest.Market,
				"action": action, "reason": "contract version", "confidence": 0.7,
			})
		}

		first := apply(decision("cv-new", "pause"))
		again := apply(decision("cv-new", "pause"))
		if first.Status != trader.Applied || first.ContractVersion != contract.Version {
			t.Errorf("first answer: %s, contract_version %q, want %q", first.Status, first.ContractVersion, contract.Version)
		}
		if !again.Replayed || again.ContractVersion != contract.Version {
			t.Errorf("replay: replayed %v, contract_version %q, want %q", again.Replayed, again.ContractVersion, contract.Version)
		}
		view, err := svc.Decision(ctx, tradertest.T1, "cv-new")
		if err != nil {
			t.Fatal(err)
		}
		if view.Decision == nil || view.Decision.Response.ContractVersion != contract.Version {
			t.Errorf("stored decision: %+v", view.Decision)
		}
		for _, a := range view.Attempts {
			if a.Response.ContractVersion != contract.Version {
				t.Errorf("stored attempt %s: contract_version %q", a.ID, a.Response.ContractVersion)
			}
		}

		// A decision stored by the code before contract_version: its
		// response as that code encoded it.
		old := apply(decision("cv-old", "resume"))
		old.ContractVersion = ""
		raw, err := json.Marshal(old)
		if err != nil {
			t.Fatal(err)
		}
		var probe map[string]any
		if json.Unmarshal(raw, &probe); probe["contract_version"] != nil {
			t.Fatalf("the old encoding has contract_version: %s", raw)
		}
		if _, err := db.Exec(ctx, `UPDATE trader_decisions SET response = ? WHERE tenant = ? AND decision_id = ?`, string(raw), string(tradertest.T1), "cv-old"); err != nil {
			t.Fatal(err)
		}
		replay := apply(decision("cv-old", "resume"))
		if !replay.Replayed || replay.ContractVersion != "" || replay.Status != old.Status || replay.AppliedAt != old.AppliedAt {
			t.Errorf("replay of the old row: %+v\nstored %s", replay, raw)
		}
	}
	t.Run("sqlite", func(t *testing.T) { run(t, storetest.OpenSQLite(t)) })
	if dsn := os.Getenv(storetest.EnvPostgres); dsn != "" {
		t.Run("postgres", func(t *testing.T) { run(t, storetest.OpenPostgres(t, dsn)) })
	}
}
