package provsync_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/provsync"
	"github.com/caduceus-dev/caduceus/shim/shimtest"
)

// The CLI's caduceus shim sync --from DIR: every *.json file is a bundle,
// blobs live under blobs/<hex>.
func TestSyncFromDirectory(t *testing.T) {
	e := struct {
		svc   *shim.Service
		audit *audit.Memory
	}{audit: audit.NewMemory()}
	e.svc = shim.New(shim.Config{Store: shimtest.NewMemory(), Audit: e.audit})
	dir := t.TempDir()
	body := "Verb: deploy with make deploy-staging."
	sum := sha256.Sum256([]byte(body))
	digest := hex.EncodeToString(sum[:])
	if err := os.MkdirAll(filepath.Join(dir, "blobs"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("blobs/"+digest, body)
	gov := `"fabric_governance":{"status":"verified","visibility_scope":"public"}`
	write("a.json", `{"context":[{"ref":"verb:deploy","kind":"verb","body_uri":"tessera://blobs/`+digest+`","version":1,`+gov+`}]}`)
	write("b.json", `{"provisions":[{"id":"DEPLOY","version":1,"triggers":{"keyword":{"any":["deploy"]}},"action":"shim","context_refs":["verb:deploy"],`+gov+`}]}`)
	write("notes.txt", `not a bundle`)

	c := contract.Caller{Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_aaaaaaaaaaaaaaaa", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
		KeyID: "ka", Scopes: []contract.Scope{contract.ScopeRoute, contract.ScopeConfigure}, Harness: "claude-code"}
	y := provsync.New(e.svc, provsync.Config{AllowDir: true})
	rep, err := y.Sync(t.Context(), c, c.Harness, dir)
	if err != nil || len(rep.Taken) != 2 || len(rep.Refused) != 0 {
		t.Fatalf("%+v %v", rep, err)
	}
	if ce, err := e.svc.GetContext(t.Context(), c, "verb:deploy"); err != nil || ce.Body != body || ce.SHA256 != "sha256:"+digest {
		t.Fatalf("%+v %v", ce, err)
	}
	// A bad bundle file fails the whole sync, naming the file, and writes nothing more.
	write("c.json", `{"provisions":{"id":"x"}}`)
	_, err = y.Sync(t.Context(), c, c.Harness, dir)
	if ce := contract.AsError(err); err == nil || ce.Kind != contract.KindInvalid || ce.Field != "/provisions" {
		t.Fatalf("bad bundle file: %v", err)
	}
	// The audit trail has each sync.
	n := 0
	for _, r := range e.audit.Records(c.Identity.TenantSlot) {
		if r.Outcome.Action == "shim.sync" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d shim.sync audit records, want 1", n)
	}
}

// TestSyncRefusesContributorModels: a synced provision whose micromodel
// names a contributor-tier model is refused with reason
// contributor_model_refused (seed 003 H03), and nothing is written.
func TestSyncRefusesContributorModels(t *testing.T) {
	svc := shim.New(shim.Config{Store: shimtest.NewMemory(), Audit: audit.NewMemory()})
	dir := t.TempDir()
	doc := `{"provisions":[{"id":"MM","version":1,"triggers":{"micromodel":{"model":"org/x-Contributor-3b","question":"billing?"}},"action":"respond_directly","response":{"text":"no"},"fabric_governance":{"status":"verified","visibility_scope":"public"}}]}`
	if err := os.WriteFile(filepath.Join(dir, "a.json"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	c := contract.Caller{Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_aaaaaaaaaaaaaaaa", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
		KeyID: "ka", Scopes: []contract.Scope{contract.ScopeRoute, contract.ScopeConfigure}, Harness: "claude-code"}
	rep, err := provsync.New(svc, provsync.Config{AllowDir: true}).Sync(t.Context(), c, c.Harness, dir)
	if err != nil || len(rep.Taken) != 0 || len(rep.Refused) != 1 || rep.Refused[0].Reason != shim.CodeContributorRefused {
		t.Fatalf("%+v %v", rep, err)
	}
	if _, err := svc.GetProvision(t.Context(), c, "MM"); contract.KindOf(err) != contract.KindNotFound {
		t.Fatalf("the refused provision was stored: %v", err)
	}
}
