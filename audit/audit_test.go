package audit

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
)

func sample(tenant contract.TenantSlot, payload any, prov *contract.Provenance) Entry {
	return Entry{
		Outcome: contract.AuditOutcome{
			At:       contract.Timestamp(time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)),
			Identity: contract.Identity{TenantSlot: tenant, Subject: "usr_0123456789abcdef", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
			Action:   "trader.apply", Resource: `decision/é"\u2028<x>`, Outcome: contract.OutcomeAllow,
		},
		Provenance: prov,
		Payload:    payload,
	}
}

// TestSealBodyIsCanonical: the hand-written body equals the canonical JSON
// of the record, with and without payload, provenance and reason.
func TestSealBodyIsCanonical(t *testing.T) {
	prov := &contract.Provenance{Surface: contract.SurfaceChat, Actor: contract.Actor{Type: contract.ActorUser, ID: "u1"}, RecordedAt: "2026-11-29T20:00:00Z", RunID: "r1"}
	full := &contract.Provenance{Surface: contract.SurfaceTelegram, Actor: contract.Actor{Type: contract.ActorOperator, ID: "op\"1", Display: "Ôp <x>"},
		RecordedAt: "2026-11-29T20:00:00.5Z", SessionID: "s", ConversationID: "conv_abcd", MessageID: "m", RunID: "r",
		Route: &contract.Route{Requested: "fast", ResolvedTarget: "t", Provider: contract.ProviderLocal, Effort: contract.EffortHigh},
		Build: &contract.Build{Commit: strings.Repeat("a", 40), ImageDigest: contract.SHA256(nil)}}
	sparse := &contract.Provenance{Surface: contract.SurfaceAPI, Actor: contract.Actor{Type: contract.ActorUser, ID: "u"}, RecordedAt: "2026-11-29T20:00:00Z",
		Route: &contract.Route{Requested: "x"}, Build: &contract.Build{}}
	cases := []Entry{
		sample("slot-1", nil, nil),
		sample("slot-1", map[string]any{"z": 1, "a": []any{"x", 2.5}}, prov),
		sample("slot-2", json.RawMessage(`{"b": 1, "a": "\u00e9"}`), nil),
		sample("slot-3", nil, full),
		sample("slot-3", nil, sparse),
	}
	cases[2].Outcome.Reason = "stale_revision"
	for i, e := range cases {
		rec, err := Seal(e, "evt_01ABCDEFGHJKMNPQRSTVWXYZ0", 7, Genesis)
		if err != nil {
			t.Fatal(err)
		}
		want, err := contract.CanonicalJSON(rec)
		if err != nil {
			t.Fatal(err)
		}
		// Record's JSON has prev_hash and hash too; the body excludes them.
		var m map[string]any
		json.Unmarshal(want, &m)
		delete(m, "prev_hash")
		delete(m, "hash")
		want, _ = contract.CanonicalJSON(m)
		if string(rec.Body) != string(want) {
			t.Errorf("case %d:\n body %s\n want %s", i, rec.Body, want)
		}
		back, err := Decode(rec.Body)
		if err != nil || back.Outcome != e.Outcome || back.Seq != 7 {
			t.Errorf("case %d: decode %+v %v", i, back, err)
		}
	}
}

func TestChainVerifiesAndBreaks(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	for i := range 5 {
		for _, tenant := range []contract.TenantSlot{"slot-1", "slot-2"} {
			if _, err := m.Append(ctx, sample(tenant, map[string]int{"i": i}, nil)); err != nil {
				t.Fatal(err)
			}
		}
	}
	rep, err := Verify(ctx, m, nil)
	if err != nil || rep.Break != nil || rep.Records != 10 || rep.Tenants != 2 {
		t.Fatalf("verify %+v %v", rep, err)
	}
	recs := m.Records("slot-1")
	if recs[0].PrevHash != Genesis || recs[1].PrevHash != recs[0].Hash {
		t.Error("chain not linked")
	}
	// A source whose third row's body was altered.
	src := &tampered{Memory: m, alter: func(r *Row) {
		if r.Tenant == "slot-1" && r.Seq == 3 {
			r.Body = []byte(strings.Replace(string(r.Body), `"i":2`, `"i":9`, 1))
		}
	}}
	rep, _ = Verify(ctx, src, nil)
	if rep.Break == nil || rep.Break.Tenant != "slot-1" || rep.Break.Seq != 3 || !strings.Contains(rep.Break.Error(), recs[2].ID) {
		t.Errorf("altered body: %+v", rep.Break)
	}
	src.alter = func(r *Row) {
		if r.Tenant == "slot-2" && r.Seq == 2 {
			r.Action = "trader.noop"
		}
	}
	if rep, _ = Verify(ctx, src, nil); rep.Break == nil || rep.Break.Seq != 2 || !strings.Contains(rep.Break.Reason, "action") {
		t.Errorf("altered column: %+v", rep.Break)
	}
}

type tampered struct {
	*Memory
	alter func(*Row)
}

func (t *tampered) Scan(ctx context.Context, tenant contract.TenantSlot, fn func(Row) error) error {
	return t.Memory.Scan(ctx, tenant, func(r Row) error {
		t.alter(&r)
		return fn(r)
	})
}

func TestCheckRefusesBadEntries(t *testing.T) {
	e := sample("slot-1", nil, nil)
	e.Outcome.Action = "apply"
	if err := Check(e); contract.KindOf(err) != contract.KindInvalid {
		t.Errorf("bad action: %v", err)
	}
	e = sample("slot-1", nil, &contract.Provenance{Surface: "fax"})
	if err := Check(e); contract.KindOf(err) != contract.KindInvalid {
		t.Errorf("bad provenance: %v", err)
	}
	if _, err := NewMemory().Append(context.Background(), sample("slot-1", func() {}, nil)); err == nil {
		t.Error("unencodable payload accepted")
	}
}
