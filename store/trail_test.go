package store_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
	"github.com/caduceus-dev/caduceus/trail"
)

// TestTrail reads conversations back through trail.New over the store, on
// SQLite and (when CADUCEUS_TEST_POSTGRES is set) Postgres: records of
// every gate filed by session key come back in chain order with their
// kinds and verification, per tenant; a record altered in the database
// unverifies itself and what follows (from genesis) or itself and what
// precedes (from a checkpoint).
func TestTrail(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testTrail(t, storetest.OpenSQLite(t)) })
	if dsn := os.Getenv(storetest.EnvPostgres); dsn != "" {
		t.Run("postgres", func(t *testing.T) { testTrail(t, storetest.OpenPostgres(t, dsn)) })
	}
}

func testTrail(t *testing.T, db *store.DB) {
	ctx := t.Context()
	const key = "agent:main:telegram:dm:42"
	log := db.Audit()
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	appendAs := func(tenant contract.TenantSlot, conversation, action, resource string, payload string) audit.Record {
		t.Helper()
		at = at.Add(time.Second)
		c := contract.Caller{
			Identity: contract.Identity{TenantSlot: tenant, Subject: "usr_0123456789abcdef", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
			Trace:    contract.Trace{Conversation: conversation, Route: "test " + action},
		}
		ts := contract.Timestamp(at)
		e := audit.Entry{Outcome: contract.AuditOutcome{At: ts, Identity: c.Identity, Action: action, Resource: resource, Outcome: contract.OutcomeAllow},
			Provenance: c.Provenance(contract.ActorUser, ts)}
		if payload != "" {
			e.Payload = []byte(payload)
		}
		rec, err := log.Append(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	var mine []audit.Record
	mine = append(mine, appendAs("slot-1", key, "relay.deliver", "telegram:42", `{"direction":"in","platform":"telegram","chat_id":"42","message_id":"7","conn":"c1","success":true}`))
	appendAs("slot-1", "", "keys.list", "/v1/admin/keys", "")                                             // no conversation
	appendAs("slot-1", "agent:main:telegram:dm:43", "relay.deliver", "telegram:43", `{"direction":"in"}`) // another one
	appendAs("slot-2", key, "relay.deliver", "telegram:42", `{"direction":"in"}`)                         // the same key in another tenant
	mine = append(mine, appendAs("slot-1", key, "shim.proxy", "receipt/rcpt_1", `{"id":"rcpt_1","protocol":"chat_completions","model":"gpt-4o-mini","decision":"forward","evaluated":2,"fired":[{"id":"PROV-DEPLOY","version":1,"action":"shim","tier":1,"reason":"keyword:deploy"}],"upstream":"openai","upstream_status":200,"overhead_us":40}`))
	mine = append(mine, appendAs("slot-1", contract.ConversationFor("slot-1", key), "trader.apply", "decision/d1", `{"id":"dec_1","decision_id":"d1","concern_id":"a:b","action":"switch","status":"applied","dry_run":false,"override":false,"response":{"ok":true,"status":"applied","validation":{"concern_match":true,"target_exists":true},"warnings":[],"errors":[],"result":{"mode_change":"applied","reconciled":true}}}`))
	mine = append(mine, appendAs("slot-1", key, "executor.tick", "strategist:s", `{"tick_id":"tick_1","strategy":"s","context":"cron","profile":"p","envelope":{"aborted":null,"actions":[{"intent_index":0,"symbol":"SPY","side":"buy","status":"placed","order_id":"ord-1"}]}}`))
	mine = append(mine, appendAs("slot-1", key, "relay.outbound", "telegram:42", `{"direction":"out","op":"send","platform":"telegram","chat_id":"42","message_id":"501","success":true}`))

	r := trail.New(db.Trail(), trail.Options{})
	tr, err := r.Get(ctx, "slot-1", key)
	if err != nil {
		t.Fatal(err)
	}
	wantKinds := []string{trail.KindInbound, trail.KindLLMTurn, trail.KindDecision, trail.KindTick, trail.KindOutbound}
	if len(tr.Events) != len(mine) || !tr.Verified || tr.SessionKey != key || tr.ConversationID != contract.ConversationFor("slot-1", key) || tr.Tenant != "slot-1" {
		t.Fatalf("trail: %+v", tr)
	}
	for i, ev := range tr.Events {
		if ev.AuditID != mine[i].ID || ev.AuditSeq != mine[i].Seq || ev.Kind != wantKinds[i] || !ev.Verified {
			t.Errorf("event %d: %+v, want record %s kind %s", i, ev, mine[i].ID, wantKinds[i])
		}
	}
	if s := tr.Events[1].Summary; !strings.Contains(s, "PROV-DEPLOY") || !strings.Contains(s, "gpt-4o-mini") {
		t.Errorf("llm turn summary: %s", s)
	}
	if s := tr.Events[2].Summary; !strings.Contains(s, "applied") || !strings.Contains(s, "validation passed") {
		t.Errorf("decision summary: %s", s)
	}
	if s := tr.Events[3].Summary; !strings.Contains(s, "SPY") || !strings.Contains(s, "placed") || !strings.Contains(s, "ord-1") {
		t.Errorf("tick summary: %s", s)
	}
	// By conv_ id too; the admin ("" tenant) finds the newest tenant's.
	if byID, err := r.Get(ctx, "slot-1", tr.ConversationID); err != nil || len(byID.Events) != len(mine) {
		t.Errorf("by conv_ id: %v %d events", err, len(byID.Events))
	}
	if all, err := r.Get(ctx, "", key); err != nil || all.Tenant != "slot-1" || len(all.Events) != len(mine) {
		t.Errorf("admin get: %v %+v", err, all)
	}
	// Tenant isolation.
	other, err := r.Get(ctx, "slot-2", key)
	if err != nil || len(other.Events) != 1 || other.ConversationID == tr.ConversationID {
		t.Errorf("slot-2's own conversation of the key: %v %+v", err, other)
	}
	if _, err := r.Get(ctx, "slot-3", key); !errors.Is(err, trail.ErrNotFound) {
		t.Errorf("a tenant without it: %v", err)
	}
	if _, err := r.Get(ctx, "slot-2", tr.ConversationID); !errors.Is(err, trail.ErrNotFound) {
		t.Errorf("slot-2 read slot-1's conv_ id: %v", err)
	}
	list, err := r.List(ctx, "slot-1", 10)
	if err != nil || len(list) != 2 || list[0].ConversationID != tr.ConversationID || list[0].Events != len(mine) || list[0].SessionKey != key ||
		strings.Join(gateNames(list[0].Gates), ",") != "relay,shim,trader,executor" {
		t.Fatalf("slot-1 list: %v %+v", err, list)
	}
	if list, _ := r.List(ctx, "slot-2", 10); len(list) != 1 || list[0].Tenant != "slot-2" {
		t.Errorf("slot-2 list: %+v", list)
	}
	if list, _ := r.List(ctx, "", 10); len(list) != 3 {
		t.Errorf("admin list: %+v", list)
	}
	if _, err := r.Get(ctx, "slot-1", "bad\nkey"); contract.KindOf(err) != contract.KindInvalid {
		t.Errorf("a key with a control character: %v", err)
	}

	// A checkpoint of the chains now; then one more record.
	_, priv, _ := ed25519.GenerateKey(nil)
	rep, err := audit.VerifyWith(ctx, log, audit.Options{})
	if err != nil || rep.Break != nil {
		t.Fatal(err, rep.Break)
	}
	cp, err := audit.Sign(priv, rep.Ends, at)
	if err != nil {
		t.Fatal(err)
	}
	last := appendAs("slot-1", key, "relay.outbound", "telegram:42", `{"direction":"out","op":"edit","success":true}`)
	mine = append(mine, last)

	// Alter the LLM turn's body in the database.
	if _, err := db.Exec(ctx, `UPDATE audit_records SET body = REPLACE(body, 'gpt-4o-mini', 'gpt-4o-maxi') WHERE id = ?`, mine[1].ID); err != nil {
		t.Fatal(err)
	}
	tr, err = r.Get(ctx, "slot-1", key)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Verified || !strings.Contains(tr.Break, mine[1].ID) || tr.Checkpoint != "" {
		t.Errorf("altered chain from genesis: verified %v break %q checkpoint %q", tr.Verified, tr.Break, tr.Checkpoint)
	}
	for i, ev := range tr.Events {
		if want := i < 1; ev.Verified != want {
			t.Errorf("from genesis: event %d verified %v, want %v", i, ev.Verified, want)
		}
	}
	// From the checkpoint: the records after the altered one still link up
	// to the hash it signed, and the one after the checkpoint follows it.
	anchored := trail.New(db.Trail(), trail.Options{Checkpoint: func(context.Context) (*audit.Checkpoint, error) { return &cp, nil }})
	tr, err = anchored.Get(ctx, "slot-1", key)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Verified || !strings.Contains(tr.Break, mine[1].ID) || tr.Checkpoint != cp.Name() {
		t.Errorf("altered chain from the checkpoint: verified %v break %q checkpoint %q", tr.Verified, tr.Break, tr.Checkpoint)
	}
	for i, ev := range tr.Events {
		if want := i > 1; ev.Verified != want {
			t.Errorf("from the checkpoint: event %d verified %v, want %v", i, ev.Verified, want)
		}
	}
	// Put it back: everything verifies from the checkpoint again.
	if _, err := db.Exec(ctx, `UPDATE audit_records SET body = REPLACE(body, 'gpt-4o-maxi', 'gpt-4o-mini') WHERE id = ?`, mine[1].ID); err != nil {
		t.Fatal(err)
	}
	if tr, err = anchored.Get(ctx, "slot-1", key); err != nil || !tr.Verified || tr.Break != "" || len(tr.Events) != len(mine) {
		t.Errorf("restored chain from the checkpoint: %v %+v", err, tr)
	}
}

func gateNames(gs []trail.Gate) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = string(g)
	}
	return out
}
