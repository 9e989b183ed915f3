package audit

import (
	"crypto/ed25519"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
)

// TestProgressIsReportedEveryTenThousandRecords: Options.Progress is called
// with the count checked at each multiple of 10,000 records, and only then.
func TestProgressIsReportedEveryTenThousandRecords(t *testing.T) {
	ctx := t.Context()
	m := NewMemory()
	for range 20001 {
		if _, err := m.Append(ctx, sample("slot-1", nil, nil)); err != nil {
			t.Fatal(err)
		}
	}
	var calls []int64
	rep, err := VerifyWith(ctx, m, Options{Progress: func(n int64) { calls = append(calls, n) }})
	if err != nil || rep.Break != nil || rep.Records != 20001 {
		t.Fatalf("verify: %+v, %v", rep, err)
	}
	if !slices.Equal(calls, []int64{10000, 20000}) {
		t.Errorf("progress called with %v, want [10000 20000]", calls)
	}
	// Without a Progress function the same chain verifies.
	if rep, err := VerifyWith(ctx, m, Options{}); err != nil || rep.Break != nil {
		t.Errorf("verify without progress: %+v, %v", rep.Break, err)
	}
}

// TestAnEmptyChainHasNoEnd: a tenant named for verification that has no
// records is whole, and no end is reported for it (a checkpoint signs only
// chains that have a last record).
func TestAnEmptyChainHasNoEnd(t *testing.T) {
	ctx := t.Context()
	m := NewMemory()
	if _, err := m.Append(ctx, sample("slot-1", nil, nil)); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(ctx, m, nil, "slot-1", "slot-2")
	if err != nil || rep.Break != nil || rep.Tenants != 2 {
		t.Fatalf("verify: %+v, %v", rep, err)
	}
	if len(rep.Ends) != 1 || rep.Ends[0].Tenant != "slot-1" || rep.Ends[0].Seq != 1 {
		t.Errorf("ends %+v, want only slot-1 at seq 1", rep.Ends)
	}
}

// TestCheckpointHeadsStartAtSeqOne: a checkpoint's head at seq 1 (a chain of
// one record) is accepted; a head at seq 0 or with a tenant that is not a
// tenant slot is refused, naming the bad head.
func TestCheckpointHeadsStartAtSeqOne(t *testing.T) {
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	pub := key.Public().(ed25519.PublicKey)
	for _, c := range []struct {
		head End
		ok   bool
	}{
		{End{Tenant: "slot-1", Seq: 1, Hash: Genesis}, true},
		{End{Tenant: "slot-1", Seq: 0, Hash: Genesis}, false},
		{End{Tenant: "slot-1", Seq: -1, Hash: Genesis}, false},
		{End{Tenant: "Not A Slot", Seq: 1, Hash: Genesis}, false},
	} {
		cp, err := Sign(key, []End{c.head}, time.Unix(1700000000, 0))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(cp)
		got, err := ParseCheckpoint(b, pub)
		switch {
		case c.ok && (err != nil || len(got.Heads) != 1 || got.Heads[0] != c.head):
			t.Errorf("head %+v: %+v, %v; want accepted", c.head, got.Heads, err)
		case !c.ok && (err == nil || !strings.Contains(err.Error(), "bad head "+string(c.head.Tenant))):
			t.Errorf("head %+v: %v; want refused naming the bad head", c.head, err)
		}
	}
}

// TestAPayloadLargerThanTheBodyEstimateSeals: a payload of any size (here
// past the 512 bytes Seal reserves for the rest of the body) is sealed whole
// into the body and verifies.
func TestAPayloadLargerThanTheBodyEstimateSeals(t *testing.T) {
	big := map[string]string{"receipt": strings.Repeat("r", 4096)}
	rec, err := Seal(sample("slot-1", big, nil), "evt_00000001", 1, Genesis)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rec.Body), `"payload":{"receipt":"`+strings.Repeat("r", 4096)+`"}`) {
		t.Errorf("body does not hold the whole payload: %d bytes", len(rec.Body))
	}
	if h, err := Link(Genesis, rec.Body); err != nil || h != rec.Hash || CheckColumns(RowOf(rec)) != "" {
		t.Errorf("sealed record does not verify: %v", err)
	}
}

// TestColumnsOfABodyWhoseOutcomeNeverClosesAreReadToItsEnd: CheckColumns
// reads any stored body without failing; an outcome object that never
// closes (an unterminated string runs to the end) is read to the end of the
// body, where its columns are still found or found to disagree.
func TestColumnsOfABodyWhoseOutcomeNeverClosesAreReadToItsEnd(t *testing.T) {
	row := Row{ID: "evt_1", Tenant: "slot-1", Seq: 1, At: "2026-11-29T20:00:00Z", Action: "trader.apply", Resource: "r", Outcome: string(contract.OutcomeAllow),
		Body: []byte(`{"id":"evt_1","outcome":{"action":"trader.apply","at":"2026-11-29T20:00:00Z","outcome":"allow","resource":"r","x":"` + `,"seq":1,"tenant":"slot-1"}`)}
	if why := CheckColumns(row); why != "" {
		t.Errorf("columns present in the unclosed outcome: %s", why)
	}
	row.Action = "keys.delete"
	if why := CheckColumns(row); !strings.Contains(why, "action") {
		t.Errorf("a tampered action in the unclosed outcome: %q, want a disagreement naming action", why)
	}
}
