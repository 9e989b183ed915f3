package executor_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
)

// TestKeyBoundAccount (seed 001, 1.1: profile-bound strategists use
// HERMES_PROFILE_ACCOUNT, else the default account): over HTTP and MCP
// (TickAs) a key bound to an account trades that account; a tick naming
// another is refused deny account_not_bound on /account, before any broker
// call and without a record; naming the bound one is fine. An unbound key
// trades the account its tick names, else the default. A manifest pinned
// to another account than the key's aborts account_lock_failed. A
// malformed account is invalid bad_account.
func TestKeyBoundAccount(t *testing.T) {
	const def, second = "619508153", "777000222"
	caller := func(account string) contract.Caller {
		return contract.Caller{Identity: identity("slot-1"), Scopes: []contract.Scope{contract.ScopeOperate}, RunContext: contract.RunCron, Harness: "autotrader", Account: account}
	}
	in := func(payload, account string) executor.TickInput {
		return executor.TickInput{Payload: json.RawMessage(payload), Account: account}
	}
	for _, c := range []struct {
		name, bound, named, payload string
		account                     string // traded; "" when refused
		aborted                     string
		code                        string
		kind                        contract.Kind
	}{
		{name: "bound", bound: second, payload: buyNVDA, account: second},
		{name: "bound, naming it", bound: second, named: second, payload: buyNVDA, account: second},
		{name: "bound, naming another", bound: second, named: def, payload: buyNVDA, code: "account_not_bound", kind: contract.KindDeny},
		{name: "unbound", payload: buyNVDA, account: def},
		{name: "unbound, naming one", named: second, payload: buyNVDA, account: second},
		{name: "bound, manifest pins another", bound: def, payload: `{"strategy":"pinned","intents":[]}`, account: second, aborted: executor.AbortAccountLockFailed},
		{name: "bound, manifest pins it", bound: second, payload: `{"strategy":"pinned","intents":[]}`, account: second},
		{name: "malformed", named: "no spaces allowed", payload: buyNVDA, code: "bad_account", kind: contract.KindInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newKeyed(t)
			env, err := k.ex.TickAs(t.Context(), caller(c.bound), in(c.payload, c.named))
			if c.code != "" {
				e := contract.AsError(err)
				if e == nil || e.Kind != c.kind || e.Code != c.code || e.Field != "/account" || env.TickID != "" {
					t.Fatalf("%+v, %v; want %s %s on /account", env, err, c.kind, c.code)
				}
				if c.code == "account_not_bound" && (!strings.Contains(e.Message, c.bound) || !strings.Contains(e.Message, c.named)) {
					t.Errorf("message %q does not name both accounts", e.Message)
				}
				if n := len(k.sim.AllOrders()); n != 0 || len(k.log.Records("slot-1")) != 0 {
					t.Errorf("a refused tick left %d orders, %d records", n, len(k.log.Records("slot-1")))
				}
				return
			}
			if err != nil || env.AccountNumber != c.account {
				t.Fatalf("%+v, %v; want account %s", env, err, c.account)
			}
			if c.aborted != "" {
				if env.Aborted == nil || *env.Aborted != c.aborted || !hasNoteWith(env.Notes, "bound to account "+c.bound) {
					t.Fatalf("aborted %v, notes %q; want %s naming the binding", env.Aborted, env.Notes, c.aborted)
				}
				return
			}
			if env.Aborted != nil {
				t.Fatalf("aborted %s: %q", *env.Aborted, env.Notes)
			}
			for _, a := range env.Actions {
				if a.Status != executor.StatusPlaced {
					t.Errorf("action %+v; want placed", a)
				}
			}
			for _, o := range k.sim.AllOrders() {
				if o.AccountNumber != c.account {
					t.Errorf("order %s in account %s; want %s", o.ID, o.AccountNumber, c.account)
				}
			}
		})
	}
	// The account is part of a keyed tick's input: the same key naming
	// another account is a conflict.
	k := newKeyed(t)
	first := in(buyNVDA, second)
	first.IdempotencyKey = "acct-key-0001"
	if _, err := k.ex.TickAs(t.Context(), caller(""), first); err != nil {
		t.Fatal(err)
	}
	other := first
	other.Account = def
	if _, err := k.ex.TickAs(t.Context(), caller(""), other); contract.KindOf(err) != contract.KindConflict {
		t.Errorf("same key, another account: %v; want a conflict", err)
	}
}

func hasNoteWith(notes []string, s string) bool {
	for _, n := range notes {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}
