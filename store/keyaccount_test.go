package store_test

import (
	"testing"

	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestKeyAccount: a key may be bound to a broker account; the account is
// stored with the key (as its harness and run context are), read back by
// Key and ListKeys, and handed to the caller it verifies as. A key without
// one has none. A malformed account is refused, naming the field, and
// nothing is stored.
func TestKeyAccount(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		svc := auth.NewService(db.Keys(), nil, 0)
		token, key, err := svc.Create(ctx, auth.Spec{Tenant: "slot-4", Scopes: []contract.Scope{contract.ScopeOperate}, Harness: "autotrader", RunContext: contract.RunCron, Account: "777000222"})
		if err != nil {
			t.Fatal(err)
		}
		caller, err := svc.Verify(ctx, token)
		if err != nil || caller.Account != "777000222" {
			t.Fatalf("caller %+v, %v; want account 777000222", caller, err)
		}
		got, err := db.Keys().Key(ctx, key.ID)
		if err != nil || got.Account != "777000222" || got.Harness != "autotrader" {
			t.Fatalf("stored key %+v, %v", got, err)
		}
		_, plain, err := svc.Create(ctx, auth.Spec{Tenant: "slot-4", Scopes: []contract.Scope{contract.ScopeOperate}})
		if err != nil {
			t.Fatal(err)
		}
		keys, err := svc.List(ctx)
		if err != nil || len(keys) != 2 {
			t.Fatalf("list %+v, %v", keys, err)
		}
		for _, k := range keys {
			want := ""
			if k.ID == key.ID {
				want = "777000222"
			}
			if k.Account != want {
				t.Errorf("listed key %s has account %q, want %q", k.ID, k.Account, want)
			}
		}
		if p, _ := db.Keys().Key(ctx, plain.ID); p.Account != "" {
			t.Errorf("a key created without an account has %q", p.Account)
		}
		for _, bad := range []string{"has space", "a,b", "x\n", string(make([]byte, 65))} {
			_, _, err := svc.Create(ctx, auth.Spec{Tenant: "slot-4", Scopes: []contract.Scope{contract.ScopeOperate}, Account: bad})
			if e := contract.AsError(err); e == nil || e.Kind != contract.KindInvalid || e.Code != "bad_account" || e.Field != "account" {
				t.Errorf("account %q: %v; want invalid bad_account on field account", bad, err)
			}
		}
		if keys, _ := svc.List(ctx); len(keys) != 2 {
			t.Errorf("%d keys after the refusals, want 2", len(keys))
		}
	})
}

// TestKeyAccountUpgradesAnOldDataDirectory: a SQLite data directory made
// before keys had an account (no account column, migration not recorded)
// upgrades when it is opened: its keys keep working, with no account, and
// new keys may be bound to one.
func TestKeyAccountUpgradesAnOldDataDirectory(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	db, err := store.Open(ctx, "", dir)
	if err != nil {
		t.Fatal(err)
	}
	svc := auth.NewService(db.Keys(), nil, 0)
	oldToken, old, err := svc.Create(ctx, auth.Spec{Tenant: "slot-1", Scopes: []contract.Scope{contract.ScopeOperate}, Harness: "autotrader"})
	if err != nil {
		t.Fatal(err)
	}
	// Back to the schema of the previous release.
	for _, q := range []string{`ALTER TABLE api_keys DROP COLUMN account`, `DELETE FROM schema_migrations WHERE name = '040_key_account'`} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	db, err = store.Open(ctx, "", dir)
	if err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	defer db.Close()
	svc = auth.NewService(db.Keys(), nil, 0)
	caller, err := svc.Verify(ctx, oldToken)
	if err != nil || caller.KeyID != old.ID || caller.Account != "" || caller.Harness != "autotrader" {
		t.Fatalf("old key after the upgrade: %+v, %v", caller, err)
	}
	token, _, err := svc.Create(ctx, auth.Spec{Tenant: "slot-1", Scopes: []contract.Scope{contract.ScopeOperate}, Account: "619508153"})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := svc.Verify(ctx, token); err != nil || c.Account != "619508153" {
		t.Fatalf("new bound key after the upgrade: %+v, %v", c, err)
	}
}
