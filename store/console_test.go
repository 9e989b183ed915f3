package store_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/relaysql"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

func TestConsoleSecretAndLogins(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		a, err := db.Console().Secret(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b, err := db.Console().Secret(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(a) != 32 || !bytes.Equal(a, b) {
			t.Fatalf("secret: %x then %x, want one 32-byte secret", a, b)
		}
		exp := time.Now().Add(time.Minute)
		first, err := db.Console().RedeemLogin(ctx, "n1", "slot-1", exp)
		if err != nil || !first {
			t.Fatalf("first redeem: %v %v", first, err)
		}
		again, err := db.Console().RedeemLogin(ctx, "n1", "slot-1", exp)
		if err != nil || again {
			t.Fatalf("second redeem: %v %v, want false", again, err)
		}
		if ok, err := db.Console().RedeemLogin(ctx, "n2", "slot-1", exp); err != nil || !ok {
			t.Fatalf("another nonce: %v %v", ok, err)
		}
	})
}

func TestAuditRecordAndRelayBuffered(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		_, key, err := auth.NewService(db.Keys(), nil, 0).Create(ctx, auth.Spec{Tenant: "slot-1", Scopes: contract.Scopes})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := db.Audit().Append(ctx, audit.Entry{Outcome: contract.AuditOutcome{At: contract.Timestamp(time.Now()),
			Identity: auth.CallerOf(key).Identity, Action: "keys.list", Resource: "keys", Outcome: contract.OutcomeAllow}})
		if err != nil {
			t.Fatal(err)
		}
		got, found, err := db.Audit().Record(ctx, rec.ID)
		if err != nil || !found || got.Hash != rec.Hash || got.Outcome.Action != "keys.list" || got.Tenant != "slot-1" {
			t.Fatalf("Record(%s) = %+v %v %v", rec.ID, got, found, err)
		}
		if _, found, err := db.Audit().Record(ctx, "evt_missing"); err != nil || found {
			t.Fatalf("Record(missing) found=%v err=%v", found, err)
		}

		now := time.Now()
		for i, tenant := range []contract.TenantSlot{"slot-1", "slot-2", "slot-1"} {
			ok, err := relaysql.New(db).Enqueue(ctx, relay.Buffered{ID: "rbuf_" + string(rune('a'+i)), Tenant: tenant, Platform: "telegram", Bot: "b", SessionKey: "k", Event: []byte(`{"type":"message","text":"hi"}`), CreatedAt: now}, 0)
			if err != nil || !ok {
				t.Fatal(ok, err)
			}
		}
		if _, err := relaysql.New(db).Lease(ctx, "slot-1", "rbuf_a", "rconn_1", now, now.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		one, err := relaysql.New(db).Buffered(ctx, "slot-1", 0)
		if err != nil || len(one) != 2 || one[0].ID != "rbuf_a" || one[0].LeaseOwner != "rconn_1" || one[1].LeaseOwner != "" || !one[1].LeaseUntil.IsZero() {
			t.Fatalf("Buffered(slot-1) = %+v %v", one, err)
		}
		all, err := relaysql.New(db).Buffered(ctx, "", 0)
		if err != nil || len(all) != 3 {
			t.Fatalf("Buffered(all) = %d %v", len(all), err)
		}
	})
}
