package audit_test

import (
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
)

func testKey(t testing.TB, b byte) ed25519.PrivateKey {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = b
	}
	return ed25519.NewKeyFromSeed(seed)
}

func chainOf(t *testing.T, n int) *audit.Memory {
	t.Helper()
	m := audit.NewMemory()
	for i := range n {
		e := audit.Entry{Outcome: contract.AuditOutcome{
			At: contract.Timestamp(time.Unix(int64(1700000000+i), 0)), Action: "keys.list", Resource: "keys", Outcome: contract.OutcomeAllow,
			Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_" + strings.Repeat("a", 64), Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
		}}
		if _, err := m.Append(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func TestCheckpointSignParseVerify(t *testing.T) {
	key := testKey(t, 7)
	m := chainOf(t, 5)
	rep, err := audit.Verify(t.Context(), m, nil)
	if err != nil || rep.Break != nil || len(rep.Ends) != 1 || rep.Ends[0].Seq != 5 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	cp, err := audit.Sign(key, rep.Ends, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(cp)
	pub := key.Public().(ed25519.PublicKey)
	got, err := audit.ParseCheckpoint(b, pub)
	if err != nil {
		t.Fatal(err)
	}
	rep, err = audit.VerifyWith(t.Context(), m, audit.Options{Checkpoint: &got})
	if err != nil || rep.Break != nil {
		t.Fatalf("verify against its own checkpoint: %+v %v", rep.Break, err)
	}
	// Another key is refused; so is any edit.
	if _, err := audit.ParseCheckpoint(b, testKey(t, 8).Public().(ed25519.PublicKey)); err == nil || !strings.Contains(err.Error(), "trusted key") {
		t.Errorf("foreign key: %v", err)
	}
	edited := strings.Replace(string(b), `"seq":5`, `"seq":4`, 1)
	if _, err := audit.ParseCheckpoint([]byte(edited), pub); err == nil || !strings.Contains(err.Error(), "signature") {
		t.Errorf("edited checkpoint: %v", err)
	}
	// A different history of the same tenant (other records) does not reach it.
	longer := chainOf(t, 8)
	if rep, _ := audit.VerifyWith(t.Context(), longer, audit.Options{Checkpoint: &got}); rep.Break == nil {
		t.Error("a different chain of the same tenant reached the checkpoint")
	} else if rep.Break.Checkpoint == "" {
		t.Errorf("break does not name the checkpoint: %v", rep.Break)
	}
	// A shorter one does not.
	short := chainOf(t, 3)
	rep, _ = audit.VerifyWith(t.Context(), short, audit.Options{Checkpoint: &got})
	if rep.Break == nil || !strings.Contains(rep.Break.Error(), got.Name()) || !strings.Contains(rep.Break.Error(), "slot-1") {
		t.Errorf("truncated chain: %v", rep.Break)
	}
}

func TestParseSigningKey(t *testing.T) {
	if _, err := audit.ParseSigningKey(strings.Repeat("ab", 32)); err != nil {
		t.Error(err)
	}
	if _, err := audit.ParseSigningKey("AAAA"); err == nil {
		t.Error("a short key was accepted")
	}
	dir := t.TempDir()
	k1, found, err := audit.LoadSigningKey("", dir, false)
	if err != nil || found || k1 != nil {
		t.Fatalf("no key yet: %v %v", found, err)
	}
	k1, found, err = audit.LoadSigningKey("", dir, true)
	if err != nil || !found {
		t.Fatal(err)
	}
	k2, _, _ := audit.LoadSigningKey("", dir, false)
	if !k1.Equal(k2) {
		t.Error("the key file does not keep the key")
	}
}

// FuzzParseCheckpoint: outside bytes never panic the parser, and only a
// correctly signed document is accepted.
func FuzzParseCheckpoint(f *testing.F) {
	key := testKey(f, 3)
	cp, _ := audit.Sign(key, []audit.End{{Tenant: "slot-1", Seq: 2, Hash: audit.Genesis}}, time.Unix(1700000000, 0))
	good, _ := json.Marshal(cp)
	f.Add(good)
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{}`))
	pub := key.Public().(ed25519.PublicKey)
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := audit.ParseCheckpoint(b, pub)
		if err != nil {
			return
		}
		msg, err := got.SignedBytes()
		if err != nil {
			t.Fatal(err)
		}
		if got.KeyID != audit.KeyIDOf(pub) || len(msg) == 0 {
			t.Fatalf("accepted %q", b)
		}
	})
}
