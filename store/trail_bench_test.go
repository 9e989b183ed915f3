package store_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/store/storetest"
	"github.com/caduceus-dev/caduceus/trail"
)

// BenchmarkTrail reads one conversation of 20 records out of a tenant
// chain of 5,000 (250 conversations, interleaved) on SQLite, and one of 20
// records appended after a checkpoint of those: Get verifying from
// genesis, Get verifying from the checkpoint (only the conversation's span
// of the chain is re-hashed), audit.VerifyWith of the tenant for
// comparison, and List of the 50 most recent.
func BenchmarkTrail(b *testing.B) {
	db := storetest.OpenSQLite(b)
	ctx := b.Context()
	log := db.Audit()
	at := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	const convs, per = 250, 20
	add := func(conversation string) {
		at = at.Add(time.Millisecond)
		c := contract.Caller{Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_0123456789abcdef", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
			Trace: contract.Trace{Conversation: conversation, Route: "bench"}}
		ts := contract.Timestamp(at)
		if _, err := log.Append(ctx, audit.Entry{Outcome: contract.AuditOutcome{At: ts, Identity: c.Identity, Action: "shim.proxy", Resource: "receipt/r", Outcome: contract.OutcomeAllow},
			Provenance: c.Provenance(contract.ActorUser, ts), Payload: []byte(`{"id":"r","protocol":"chat_completions","model":"m","decision":"forward","fired":[]}`)}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range convs * per {
		add(fmt.Sprintf("agent:main:telegram:dm:%d", i%convs))
	}
	rep, err := audit.VerifyWith(ctx, log, audit.Options{})
	if err != nil || rep.Break != nil {
		b.Fatal(err, rep.Break)
	}
	_, priv, _ := ed25519.GenerateKey(nil)
	cp, err := audit.Sign(priv, rep.Ends, at)
	if err != nil {
		b.Fatal(err)
	}
	// A conversation after the checkpoint.
	for range per {
		add("agent:main:telegram:dm:recent")
	}
	get := func(b *testing.B, r trail.Reader, name string) {
		for b.Loop() {
			tr, err := r.Get(ctx, "slot-1", name)
			if err != nil || len(tr.Events) != per || !tr.Verified {
				b.Fatal(err, len(tr.Events), tr.Break)
			}
		}
	}
	genesis := trail.New(db.Trail(), trail.Options{})
	anchored := trail.New(db.Trail(), trail.Options{Checkpoint: func(context.Context) (*audit.Checkpoint, error) { return &cp, nil }})
	b.Run("get_from_genesis", func(b *testing.B) { get(b, genesis, "agent:main:telegram:dm:7") })
	b.Run("get_from_checkpoint", func(b *testing.B) { get(b, anchored, "agent:main:telegram:dm:7") })
	b.Run("get_recent_from_genesis", func(b *testing.B) { get(b, genesis, "agent:main:telegram:dm:recent") })
	b.Run("get_recent_from_checkpoint", func(b *testing.B) { get(b, anchored, "agent:main:telegram:dm:recent") })
	b.Run("audit_verify_tenant", func(b *testing.B) { // the baseline: caduceus audit verify --tenant
		for b.Loop() {
			if rep, err := audit.VerifyWith(ctx, log, audit.Options{Tenants: []contract.TenantSlot{"slot-1"}}); err != nil || rep.Break != nil {
				b.Fatal(err, rep.Break)
			}
		}
	})
	b.Run("list_50", func(b *testing.B) {
		r := trail.New(db.Trail(), trail.Options{})
		for b.Loop() {
			if l, err := r.List(ctx, "slot-1", 50); err != nil || len(l) != 50 {
				b.Fatal(err, len(l))
			}
		}
	})
}
