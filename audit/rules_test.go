package audit

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
)

// TestCheckRefusesBadSensitivityAndRedaction: a sensitivity or redaction
// outside the schema is refused before sealing (Check and Prepare alike);
// an empty sensitivity is the action's.
func TestCheckRefusesBadSensitivityAndRedaction(t *testing.T) {
	for name, c := range map[string]struct {
		mutate func(*Entry)
		ok     bool
	}{
		"defaults":        {func(*Entry) {}, true},
		"sensitivity":     {func(e *Entry) { e.Sensitivity = contract.SensitivityRestricted }, true},
		"bad sensitivity": {func(e *Entry) { e.Sensitivity = "secret" }, false},
		"redaction": {func(e *Entry) {
			e.Redaction = &contract.Redaction{Level: contract.RedactionPartial, Reason: "text kept as its sha256"}
		}, true},
		"bad redaction": {func(e *Entry) { e.Redaction = &contract.Redaction{Level: "most"} }, false},
		"long redaction why": {func(e *Entry) {
			e.Redaction = &contract.Redaction{Level: contract.RedactionFull, Reason: strings.Repeat("x", 201)}
		}, false},
	} {
		e := sample("slot-1", nil, nil)
		c.mutate(&e)
		err := Check(e)
		if (err == nil) != c.ok || (err != nil && contract.KindOf(err) != contract.KindInvalid) {
			t.Errorf("%s: Check = %v, want ok %v", name, err, c.ok)
		}
		s, perr := Prepare(e, "evt_00000001")
		if (perr == nil) != c.ok || (perr != nil && s.ID != "") {
			t.Errorf("%s: Prepare = %+v, %v, want ok %v", name, s, perr, c.ok)
		}
	}
	rec, err := Seal(sample("slot-1", nil, nil), "evt_00000001", 1, Genesis)
	if err != nil || rec.Sensitivity != SensitivityOf("trader.apply") || rec.Sensitivity == "" {
		t.Errorf("an entry without sensitivity sealed as %q, %v; want the action's", rec.Sensitivity, err)
	}
}

// headless is a source whose head row is replaced (found false: removed).
type headless struct {
	*Memory
	seq   int64
	hash  string
	found bool
}

func (h headless) FindHead(context.Context, contract.TenantSlot) (int64, string, bool, error) {
	return h.seq, h.hash, h.found, nil
}

// TestHeadMustAgreeWithTheChain: the head row is present when there are
// records, at the chain's last seq, with its last hash; each way it can
// disagree is a break naming what happened.
func TestHeadMustAgreeWithTheChain(t *testing.T) {
	ctx := t.Context()
	m := NewMemory()
	for i := range 3 {
		if _, err := m.Append(ctx, sample("slot-1", map[string]int{"i": i}, nil)); err != nil {
			t.Fatal(err)
		}
	}
	recs := m.Records("slot-1")
	last := recs[2].Hash
	for _, c := range []struct {
		name   string
		src    headless
		seq    int64
		reason string // "" = whole
	}{
		{"agrees", headless{m, 3, last, true}, 0, ""},
		{"removed", headless{m, 0, "", false}, 3, "no head row"},
		{"records removed", headless{m, 4, last, true}, 4, "records were removed"},
		{"rewound", headless{m, 2, recs[1].Hash, true}, 2, "rewound"},
		{"other hash", headless{m, 3, recs[1].Hash, true}, 3, "disagrees"},
	} {
		rep, err := Verify(ctx, c.src, nil, "slot-1")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		switch {
		case c.reason == "" && rep.Break != nil:
			t.Errorf("%s: break %v", c.name, rep.Break)
		case c.reason != "" && (rep.Break == nil || rep.Break.Seq != c.seq || !strings.Contains(rep.Break.Reason, c.reason)):
			t.Errorf("%s: break %+v, want seq %d %q", c.name, rep.Break, c.seq, c.reason)
		}
	}
	// An empty chain needs no head row, and its found head must be empty.
	empty := NewMemory()
	for _, c := range []struct {
		src   headless
		whole bool
	}{{headless{empty, 0, "", false}, true}, {headless{empty, 0, Genesis, true}, true}, {headless{empty, 1, Genesis, true}, false}} {
		if rep, err := Verify(ctx, c.src, nil, "slot-1"); err != nil || (rep.Break == nil) != c.whole {
			t.Errorf("empty chain, head %d found %v: %+v, %v; want whole %v", c.src.seq, c.src.found, rep.Break, err, c.whole)
		}
	}
}

// TestLoadSigningKeySources: the environment's key wins over the file; a
// key that does not parse is an error naming where it came from; a created
// key file is private (0600) and holds the seed in base64.
func TestLoadSigningKeySources(t *testing.T) {
	seed := strings.Repeat("ab", 32)
	dir := t.TempDir()
	made, found, err := LoadSigningKey("", dir, true)
	if err != nil || !found {
		t.Fatal(err)
	}
	path := filepath.Join(dir, SigningKeyFile)
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file %v, %v; want mode 0600", st, err)
	}
	b, _ := os.ReadFile(path)
	if raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b))); err != nil || !ed25519.NewKeyFromSeed(raw).Equal(made) {
		t.Errorf("key file %q does not hold the key's seed in base64: %v", b, err)
	}
	fromEnv, found, err := LoadSigningKey(seed, dir, true)
	want, _ := ParseSigningKey(seed)
	if err != nil || !found || !fromEnv.Equal(want) || fromEnv.Equal(made) {
		t.Errorf("the environment's key did not win: %v, %v", found, err)
	}
	if _, _, err := LoadSigningKey("short", dir, true); err == nil || !strings.Contains(err.Error(), EnvSigningKey) {
		t.Errorf("bad environment key: %v, want an error naming %s", err, EnvSigningKey)
	}
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, SigningKeyFile), []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if k, found, err := LoadSigningKey("", bad, true); err == nil || found || k != nil || !strings.Contains(err.Error(), SigningKeyFile) {
		t.Errorf("bad key file: %v, %v; want an error naming the file", found, err)
	}
	if b, _ := os.ReadFile(filepath.Join(bad, SigningKeyFile)); string(b) != "not a key\n" {
		t.Errorf("a bad key file was overwritten: %q", b)
	}
}

// TestWriteCheckpointFileReplacesWhole: a checkpoint file is written whole
// (it parses and verifies), a second write replaces the first, and no
// temporary file is left beside it; a directory that does not exist is an
// error.
func TestWriteCheckpointFileReplacesWhole(t *testing.T) {
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	pub := key.Public().(ed25519.PublicKey)
	dir := t.TempDir()
	path := filepath.Join(dir, "checkpoint.json")
	for i, seq := range []int64{2, 5} {
		cp, err := Sign(key, []End{{Tenant: "slot-1", Seq: seq, Hash: Genesis}}, time.Unix(1700000000+int64(i), 0))
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteCheckpointFile(path, cp); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil || !strings.HasSuffix(string(b), "}\n") {
			t.Fatalf("read %q: %v", b, err)
		}
		got, err := ParseCheckpoint(b, pub)
		if err != nil || len(got.Heads) != 1 || got.Heads[0].Seq != seq {
			t.Fatalf("write %d: %+v, %v", i, got, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files in the directory, want only the checkpoint", len(ents))
	}
	cp, _ := Sign(key, nil, time.Unix(1700000000, 0))
	if err := WriteCheckpointFile(filepath.Join(dir, "nosuch", "checkpoint.json"), cp); err == nil {
		t.Error("a checkpoint was written into a directory that does not exist")
	}
}
