package shimtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/memory"
	"github.com/caduceus-dev/caduceus/shim/provsync"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// Stores are the stores one scenario runs on.
type Stores struct {
	Rules  shim.Store
	Memory memory.Store
	Audit  audit.Log
}

// TestScenarios runs the seed 003 memory and governance invariants (H07,
// H09, H12, H13, H19) end to end through a shim.Service on stores made by
// open (each call must return empty stores).
func TestScenarios(t *testing.T, open func(t *testing.T) Stores) {
	t.Run("H13_ThreeTurnRetryAndInsights", func(t *testing.T) { testThreeTurns(t, open(t)) })
	t.Run("H13_MemoryPerCallerAndProject", func(t *testing.T) { testMemoryIsolation(t, open(t)) })
	t.Run("H12_H07_GovernedSync", func(t *testing.T) { testGovernedSync(t, open(t)) })
	t.Run("H07_ConcurrentSyncCAS", func(t *testing.T) { testConcurrentSync(t, open(t)) })
	t.Run("H07_SyncWinsBetweenReads", func(t *testing.T) { testSyncBetweenReads(t, open(t)) })
	t.Run("H07_HandshakeClamp", func(t *testing.T) { testHandshake(t, open(t)) })
	t.Run("H09_SyncedContextShimmed", func(t *testing.T) { testSyncedContextShimmed(t, open(t)) })
	t.Run("H19_BuiltinStarters", func(t *testing.T) { testStarters(t, open(t)) })
}

// Scenario callers: A and B are tenants with route+configure keys for
// harness claude-code; Admin is tenant A's admin key; RouteOnly has route
// scope only; Cursor is tenant A through another harness; Conf has
// configure scope only.
var (
	callerA = contract.Caller{Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_aaaaaaaaaaaaaaaa", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
		KeyID: "ka", Scopes: []contract.Scope{contract.ScopeRoute, contract.ScopeConfigure}, Harness: "claude-code"}
	callerA2 = contract.Caller{Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_a2a2a2a2a2a2a2a2", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
		KeyID: "ka2", Scopes: []contract.Scope{contract.ScopeRoute, contract.ScopeConfigure}, Harness: "claude-code"}
	callerB = contract.Caller{Identity: contract.Identity{TenantSlot: "slot-2", Subject: "usr_bbbbbbbbbbbbbbbb", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
		KeyID: "kb", Scopes: []contract.Scope{contract.ScopeRoute, contract.ScopeConfigure}, Harness: "claude-code"}
	callerAdmin = contract.Caller{Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_cccccccccccccccc", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
		KeyID: "kadm", Scopes: []contract.Scope{contract.ScopeRoute, contract.ScopeConfigure, contract.ScopeAdmin}, Harness: "ops"}
	callerCursor = contract.Caller{Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_eeeeeeeeeeeeeeee", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
		KeyID: "kcur", Scopes: []contract.Scope{contract.ScopeRoute}, Harness: "cursor"}
	callerConf = contract.Caller{Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_ffffffffffffffff", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
		KeyID: "kconf", Scopes: []contract.Scope{contract.ScopeConfigure}, Harness: "claude-code"}
)

// rig is a Service with memory and a fake upstream.
type rig struct {
	svc *shim.Service
	mem *memory.Memory
	st  Stores
}

func newRig(t *testing.T, st Stores, gov *shim.Governor) *rig {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Model string `json:"model"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &in)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(wire.DirectJSON(wire.ChatCompletions, wire.Direct{ID: "up", Model: in.Model, Text: "ok"}))
	}))
	t.Cleanup(up.Close)
	r := &rig{st: st}
	r.mem = memory.New(memory.Config{Store: st.Memory, Rules: st.Rules, Logf: t.Logf})
	cfg := shim.Config{Store: st.Rules, Audit: st.Audit, Upstreams: map[string]shim.Upstream{"openai": {BaseURL: up.URL}},
		Observers: []shim.Observer{r.mem}, RulesTTL: 1}
	if gov != nil {
		cfg.Admit = gov.Admit
	}
	r.svc = shim.New(cfg)
	return r
}

type msg struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// chat sends a chat completions request with messages as caller and
// returns its receipt (the newest of the caller's tenant).
func (r *rig) chat(t *testing.T, caller contract.Caller, project string, msgs ...msg) shim.Receipt {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": msgs})
	req := httptest.NewRequestWithContext(contract.WithCaller(t.Context(), caller), http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if project != "" {
		req.Header.Set(shim.HeaderProject, project)
	}
	w := httptest.NewRecorder()
	r.svc.Handler(wire.ChatCompletions).ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Fatalf("chat: status %d: %s", w.Code, w.Body)
	}
	rs, err := r.svc.ListReceipts(t.Context(), caller, 1, "")
	if err != nil || len(rs) != 1 {
		t.Fatalf("receipts: %v %v", rs, err)
	}
	return rs[0]
}

func fired(rc shim.Receipt, id string) bool {
	return slices.ContainsFunc(rc.Fired, func(f shim.Fired) bool { return f.ID == id })
}

func skippedWhy(rc shim.Receipt, id string) string {
	for _, s := range rc.Skipped {
		if s.ID == id {
			return s.Reason
		}
	}
	return ""
}

var (
	provisionSchema = contract.MustSchema("shim.provision.schema.json")
	evidenceSchema  = contract.Def("evidence_ref")
	contextSchema   = contract.MustSchema("shim.context.schema.json")
)

func testThreeTurns(t *testing.T, st Stores) {
	ctx := t.Context()
	r := newRig(t, st, nil)
	must(r.svc.CreateContext(ctx, callerA, "claude-code", []byte(`{"ref":"verb:deploy","kind":"verb","body":"Deploy with make deploy."}`)))
	must(r.svc.CreateProvision(ctx, callerA, "claude-code", []byte(`{"id":"DEPLOY","triggers":{"keyword":{"any":["deploy"]}},"action":"shim","context_refs":["verb:deploy"]}`)))
	before := must(r.svc.ListProvisions(ctx, callerA))

	u1 := msg{"user", "please deploy the api service"}
	rc1 := r.chat(t, callerA, "", u1)
	if !fired(rc1, "DEPLOY") {
		t.Fatalf("turn 1 did not fire DEPLOY: %+v", rc1)
	}
	a1 := msg{"assistant", "Run make deploy."}
	u2 := msg{"user", "deploy failed:\nTraceback (most recent call last):\n  File \"/srv/api/app/config.py\", line 41, in load\n    return env[key]\nKeyError: 'DATABASE_URL'"}
	rc2 := r.chat(t, callerA, "", u1, a1, u2)
	if rc2.ConversationID != rc1.ConversationID {
		t.Fatalf("turns are in different conversations: %s vs %s", rc1.ConversationID, rc2.ConversationID)
	}
	os := must(r.mem.Outcomes(ctx, callerA, 0))
	if len(os) != 2 {
		t.Fatalf("after turn 2: outcomes %+v, want 2", os)
	}
	// Newest first: turn 2's DEPLOY is pending, turn 1's is retry_error.
	if o := os[1]; o.Receipt != rc1.ID || o.Provision != "DEPLOY" || o.Outcome != memory.OutcomeRetryError || o.ErrorSignature != "KeyError: <str>" || o.NextReceipt != rc2.ID {
		t.Fatalf("turn 1 outcome %+v", o)
	}
	if o := os[0]; o.Receipt != rc2.ID || o.Outcome != memory.OutcomePending {
		t.Fatalf("turn 2 outcome %+v", o)
	}
	a2 := msg{"assistant", "Set DATABASE_URL in app/config.py."}
	u3 := msg{"user", "still broken after editing app/config.py and calling load_settings():\nKeyError: 'DB_URL'"}
	rc3 := r.chat(t, callerA, "", u1, a1, u2, a2, u3)
	if fired(rc3, "DEPLOY") {
		t.Fatalf("turn 3 fired DEPLOY: %+v", rc3.Fired)
	}
	os = must(r.mem.Outcomes(ctx, callerA, 0))
	retries := 0
	for _, o := range os {
		if o.Provision == "DEPLOY" && o.Outcome == memory.OutcomeRetryError {
			retries++
		}
	}
	if len(os) != 2 || retries != 2 {
		t.Fatalf("after turn 3: %+v, want 2 retry_error outcomes of DEPLOY", os)
	}

	es := must(r.mem.Entities(ctx, callerA, memory.DefaultProject, 0))
	var sig *memory.Entity
	for i, e := range es {
		if e.Kind == memory.KindErrorSignature && e.Value == "KeyError: <str>" {
			sig = &es[i]
		}
	}
	if sig == nil || sig.Count != 2 {
		t.Fatalf("error signature not remembered twice: %+v", es)
	}
	for _, want := range []shim.EntityRef{{Kind: memory.KindFilePath, Value: "app/config.py"}, {Kind: memory.KindCodeSymbol, Value: "load_settings"}, {Kind: memory.KindFilePath, Value: "/srv/api/app/config.py"}} {
		if !slices.ContainsFunc(es, func(e memory.Entity) bool { return e.Kind == want.Kind && e.Value == want.Value }) {
			t.Fatalf("entity %+v not remembered: %+v", want, es)
		}
	}

	ins := must(r.mem.Insights(ctx, callerA, ""))
	kinds := map[string]memory.Candidate{}
	for _, c := range ins.CandidateProvisions {
		kinds[c.Kind] = c
		b, _ := json.Marshal(c.Provision)
		if err := provisionSchema.ValidateJSON(b); err != nil {
			t.Fatalf("candidate %s does not validate: %v\n%s", c.Provision.ID, err, b)
		}
		if _, err := shim.DecodeProvision(b); err != nil {
			t.Fatalf("candidate %s does not decode: %v", c.Provision.ID, err)
		}
		if c.Provision.Status != shim.StatusCandidate || len(c.EvidenceRefs) == 0 {
			t.Fatalf("candidate %+v", c)
		}
		for _, ev := range c.EvidenceRefs {
			if err := evidenceSchema.Validate(ev); err != nil {
				t.Fatalf("evidence %+v: %v", ev, err)
			}
		}
		for _, ce := range c.Context {
			b, _ := json.Marshal(ce)
			if err := contextSchema.ValidateJSON(b); err != nil {
				t.Fatalf("candidate context %s: %v", ce.Ref, err)
			}
			if !slices.Contains(c.Provision.ContextRefs, ce.Ref) {
				t.Fatalf("candidate context %s is not referenced by %v", ce.Ref, c.Provision.ContextRefs)
			}
		}
	}
	rec, ok := kinds[memory.CandidateRecurringError]
	if !ok || !strings.Contains(rec.Context[0].Body, "app/config.py") || rec.Provision.Triggers.Regex[0].Pattern != `KeyError\s*:` {
		t.Fatalf("no recurring-error candidate naming the fix entity: %+v", ins)
	}
	rr, ok := kinds[memory.CandidateRetryingRule]
	if !ok || rr.Provision.ID != "DEPLOY.candidate" || !slices.Contains(rr.Provision.ContextRefs, "verb:deploy") {
		t.Fatalf("no retrying-rule candidate for DEPLOY: %+v", ins)
	}
	if !slices.ContainsFunc(rr.EvidenceRefs, func(e contract.EvidenceRef) bool { return e.Kind == contract.EvidenceReceipt && e.ID == rc2.ID }) {
		t.Fatalf("retrying-rule evidence lacks turn 2's receipt: %+v", rr.EvidenceRefs)
	}
	// Accepting is an ordinary create; until then nothing changed.
	after := must(r.svc.ListProvisions(ctx, callerA))
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("insights changed the provisions:\n%+v\n%+v", before, after)
	}
	// Another subject of the tenant has no insights from A's memory.
	if o := must(r.mem.Insights(ctx, callerA2, "")); len(o.CandidateProvisions) != 0 {
		t.Fatalf("A2 sees A's insights: %+v", o)
	}
}

func testMemoryIsolation(t *testing.T, st Stores) {
	ctx := t.Context()
	r := newRig(t, st, nil)
	r.chat(t, callerA, "web", msg{"user", "look at src/app.tsx and `renderRoot`"})
	r.chat(t, callerA, "", msg{"user", "open tessera://nouns/service/payments and SC-NY-113"})
	r.chat(t, callerB, "web", msg{"user", "look at other/file.go"})
	web := must(r.mem.Entities(ctx, callerA, "web", 0))
	vals := func(es []memory.Entity) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Kind+"="+e.Value)
		}
		slices.Sort(out)
		return out
	}
	if got := fmt.Sprint(vals(web)); got != "[code_symbol=renderRoot file_path=src/app.tsx]" {
		t.Fatalf("project web of A: %s", got)
	}
	def := must(r.mem.Entities(ctx, callerA, memory.DefaultProject, 0))
	if got := fmt.Sprint(vals(def)); got != "[statute_card_id=SC-NY-113 tessera_uri=tessera://nouns/service/payments]" {
		t.Fatalf("default project of A: %s", got)
	}
	if got := fmt.Sprint(vals(must(r.mem.Entities(ctx, callerB, "", 0)))); got != "[file_path=other/file.go]" {
		t.Fatalf("B sees %s", got)
	}
	if es := must(r.mem.Entities(ctx, callerA2, "", 0)); len(es) != 0 {
		t.Fatalf("another subject of A's tenant sees %+v", es)
	}
	if _, err := r.mem.Entities(ctx, contract.Caller{Identity: callerA.Identity}, "", 0); contract.KindOf(err) != contract.KindDeny {
		t.Fatalf("a caller without scope reads memory: %v", err)
	}
}

// bundleServer serves a bundle at /bundle.json, blobs at /blobs/<hex>,
// and a handshake at /handshake; it keeps the handshake requests.
type bundleServer struct {
	*httptest.Server
	mu         sync.Mutex
	bundle     []byte
	blobs      map[string][]byte
	handshakes []provsync.HandshakeRequest
}

func newBundleServer(t *testing.T) *bundleServer {
	bs := &bundleServer{blobs: map[string][]byte{}}
	bs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bs.mu.Lock()
		defer bs.mu.Unlock()
		switch {
		case r.URL.Path == "/bundle.json" && r.Method == http.MethodGet:
			w.Write(bs.bundle)
		case r.URL.Path == "/handshake" && r.Method == http.MethodPost:
			var hr provsync.HandshakeRequest
			if err := json.NewDecoder(r.Body).Decode(&hr); err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			bs.handshakes = append(bs.handshakes, hr)
			w.Write(bs.bundle)
		case strings.HasPrefix(r.URL.Path, "/blobs/"):
			b, ok := bs.blobs[strings.TrimPrefix(r.URL.Path, "/blobs/")]
			if !ok {
				http.NotFound(w, r)
				return
			}
			w.Write(b)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(bs.Close)
	return bs
}

func (bs *bundleServer) set(v any) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	bs.bundle, _ = json.Marshal(v)
}

// blob stores content under its digest and returns the tessera URI.
func (bs *bundleServer) blob(content string) string {
	sum := sha256.Sum256([]byte(content))
	h := hex.EncodeToString(sum[:])
	bs.mu.Lock()
	bs.blobs[h] = []byte(content)
	bs.mu.Unlock()
	return "tessera://blobs/" + h
}

func gov(status, vis, cohort string, harness ...string) map[string]any {
	g := map[string]any{"status": status, "visibility_scope": vis, "cohort": cohort}
	if len(harness) > 0 {
		g["harness"] = harness
	}
	return g
}

func prov(id string, version int64, g map[string]any, extra ...any) map[string]any {
	p := map[string]any{"id": id, "version": version, "triggers": map[string]any{"keyword": map[string]any{"any": []string{strings.ToLower(id)}}},
		"action": "shim", "context_refs": []string{"detail:guide"}}
	if g != nil {
		p["fabric_governance"] = g
	}
	for i := 0; i+1 < len(extra); i += 2 {
		p[extra[i].(string)] = extra[i+1]
	}
	return p
}

func items(its []provsync.Item) map[string]provsync.Item {
	m := map[string]provsync.Item{}
	for _, it := range its {
		m[it.Kind+"/"+it.ID] = it
	}
	return m
}

func testGovernedSync(t *testing.T, st Stores) {
	ctx := t.Context()
	r := newRig(t, st, nil)
	bs := newBundleServer(t)
	g := &shim.Governor{Cohorts: map[contract.TenantSlot][]string{"slot-1": {"core"}}}
	y := provsync.New(r.svc, provsync.Config{Governor: g, MaxChars: 8000, Ledger: st.Memory})

	// A local provision edited after the source's copy: version 2 locally.
	must(r.svc.CreateProvision(ctx, callerA, "claude-code", []byte(`{"id":"STALE","triggers":{"keyword":{"any":["stale"]}},"action":"shim","context_refs":["detail:guide"]}`)))
	local := must(r.svc.UpdateProvision(ctx, callerA, "claude-code", "STALE", 1, []byte(`{"id":"STALE","priority":5,"triggers":{"keyword":{"any":["stale"]}},"action":"shim","context_refs":["detail:guide"]}`)))

	good := bs.blob("Deploy guide: run make deploy-staging first.")
	tampered := bs.blob("original text")
	// Serve other bytes under the tampered digest.
	bs.blobs[strings.TrimPrefix(tampered, "tessera://blobs/")] = []byte("tampered text")
	ok := gov("verified", "team", "core", "claude-code")
	bs.set(map[string]any{
		"context": []any{
			map[string]any{"ref": "detail:guide", "kind": "detail", "body_uri": good, "version": 1, "fabric_governance": ok},
			map[string]any{"ref": "detail:tampered", "kind": "detail", "body_uri": tampered, "version": 1, "fabric_governance": ok},
			map[string]any{"ref": "detail:nogov", "kind": "detail", "body": "x", "version": 1},
		},
		"provisions": []any{
			prov("GOOD", 3, ok, "max_chars", 50000),
			prov("PUBLIC", 1, gov("verified", "public", "")),
			prov("QUAR", 1, gov("quarantined", "public", "")),
			prov("UNVER", 1, gov("unverified", "public", "")),
			prov("COHORT", 1, gov("verified", "public", "research")),
			prov("TEAM", 1, gov("verified", "team", "research")),
			prov("HARNESS", 1, gov("verified", "public", "", "cursor")),
			prov("OTHERTENANT", 1, gov("verified", "tenant:slot-2", "")),
			prov("STARTER", 1, ok, "system_builtin", true),
			prov("STALE", 1, gov("verified", "public", "")),
			prov("BAD", 1, ok, "action", "explode"),
		},
	})
	rep := must(y.Sync(ctx, callerA, "claude-code", bs.URL+"/bundle.json"))
	taken, refused, conflicts := items(rep.Taken), items(rep.Refused), items(rep.Conflicts)
	for _, id := range []string{"context/detail:guide", "provision/GOOD", "provision/PUBLIC"} {
		if taken[id].Result != provsync.Created {
			t.Errorf("%s not created: %+v", id, rep)
		}
	}
	wantRefused := map[string]string{
		"context/detail:tampered": provsync.ReasonBlobDigest,
		"context/detail:nogov":    shim.ReasonNoGovernance,
		"provision/QUAR":          shim.ReasonQuarantined,
		"provision/UNVER":         shim.ReasonUnverified,
		"provision/COHORT":        shim.ReasonCohort,
		"provision/TEAM":          shim.ReasonVisibility,
		"provision/HARNESS":       shim.ReasonHarness,
		"provision/OTHERTENANT":   shim.ReasonVisibility,
		"provision/STARTER":       provsync.ReasonBuiltin,
		"provision/BAD":           provsync.ReasonInvalid,
	}
	for id, why := range wantRefused {
		if refused[id].Reason != why {
			t.Errorf("%s: refused %q, want %q", id, refused[id].Reason, why)
		}
	}
	if c := conflicts["provision/STALE"]; c.Reason != provsync.ReasonStale || c.Version != 2 {
		t.Errorf("STALE: conflict %+v", c)
	}
	if len(rep.Taken)+len(rep.Refused)+len(rep.Conflicts) != 14 || len(rep.Taken) != 3 || len(rep.Conflicts) != 1 {
		t.Fatalf("report %+v", rep)
	}
	if len(rep.Clamped) != 1 || rep.Clamped[0] != (provsync.Clamp{Kind: "provision", ID: "GOOD", From: 50000, To: 8000}) {
		t.Fatalf("clamps %+v", rep.Clamped)
	}
	if p := must(r.svc.GetProvision(ctx, callerA, "GOOD")); p.MaxChars != 8000 || p.FabricGovernance == nil || p.FabricGovernance.Cohort != "core" {
		t.Fatalf("GOOD stored as %+v", p)
	}
	if p := must(r.svc.GetProvision(ctx, callerA, "STALE")); !reflect.DeepEqual(p, local) {
		t.Fatalf("sync overwrote the newer local STALE: %+v", p)
	}
	for _, id := range []string{"QUAR", "COHORT", "STARTER"} {
		if _, err := r.svc.GetProvision(ctx, callerA, id); contract.KindOf(err) != contract.KindNotFound {
			t.Fatalf("refused %s was stored: %v", id, err)
		}
	}
	if _, err := r.svc.GetContext(ctx, callerA, "detail:tampered"); contract.KindOf(err) != contract.KindNotFound {
		t.Fatalf("tampered blob was stored: %v", err)
	}
	if e := must(r.svc.GetContext(ctx, callerA, "detail:guide")); e.Body != "Deploy guide: run make deploy-staging first." {
		t.Fatalf("guide body %q", e.Body)
	}
	// Tenant B syncing the same bundle: the team/core records do not admit it.
	repB := must(y.Sync(ctx, callerB, "claude-code", bs.URL+"/bundle.json"))
	if it := items(repB.Refused)["provision/GOOD"]; it.Reason != shim.ReasonVisibility {
		t.Fatalf("B took GOOD: %+v", it)
	}
	if it := items(repB.Taken)["provision/OTHERTENANT"]; it.Result != provsync.Created {
		t.Fatalf("B did not take its tenant-scoped record: %+v", repB)
	}
	// Syncing again changes nothing; a newer source version updates by CAS.
	rep2 := must(y.Sync(ctx, callerA, "claude-code", bs.URL+"/bundle.json"))
	for _, it := range rep2.Taken {
		if it.Result != provsync.Unchanged {
			t.Fatalf("second sync rewrote %+v", it)
		}
	}
	bs.set(map[string]any{"provisions": []any{prov("PUBLIC", 2, gov("verified", "public", ""), "priority", 9)}})
	rep3 := must(y.Sync(ctx, callerA, "claude-code", bs.URL+"/bundle.json"))
	if it := items(rep3.Taken)["provision/PUBLIC"]; it.Result != provsync.Updated || it.Version != 2 {
		t.Fatalf("newer source version not taken: %+v", rep3)
	}
	// A local edit after the sync is never overwritten, even by a newer source version.
	edited := must(r.svc.UpdateProvision(ctx, callerA, "claude-code", "PUBLIC", 2, []byte(`{"id":"PUBLIC","priority":42,"triggers":{"keyword":{"any":["public"]}},"action":"shim","context_refs":["detail:guide"]}`)))
	for v := int64(3); v <= 4; v++ {
		bs.set(map[string]any{"provisions": []any{prov("PUBLIC", v, gov("verified", "public", ""), "priority", 11)}})
		rep := must(y.Sync(ctx, callerA, "claude-code", bs.URL+"/bundle.json"))
		if it := items(rep.Conflicts)["provision/PUBLIC"]; it.Reason != provsync.ReasonLocalEdit || it.Version != 3 {
			t.Fatalf("source v%d over a local edit: %+v", v, rep)
		}
	}
	if p := must(r.svc.GetProvision(ctx, callerA, "PUBLIC")); !reflect.DeepEqual(p, edited) {
		t.Fatalf("local edit overwritten: %+v", p)
	}
	// A source going back to an older version than the one synced is stale.
	bs.set(map[string]any{"provisions": []any{prov("GOOD", 2, ok, "priority", 1)}})
	if it := items(must(y.Sync(ctx, callerA, "claude-code", bs.URL+"/bundle.json")).Conflicts)["provision/GOOD"]; it.Reason != provsync.ReasonStale {
		t.Fatalf("older source version of GOOD: %+v", it)
	}
	// Write rules: configure scope and the key's harness attested.
	if _, err := y.Sync(ctx, callerA, "", bs.URL+"/bundle.json"); contract.AsError(err).Code != "harness_required" {
		t.Fatalf("sync without attestation: %v", err)
	}
	if _, err := y.Sync(ctx, callerCursor, "cursor", bs.URL+"/bundle.json"); contract.AsError(err).Code != contract.CodeMissingScope {
		t.Fatalf("sync without configure scope: %v", err)
	}
	if _, err := y.Sync(ctx, callerA, "claude-code", t.TempDir()); contract.AsError(err).Code != "bad_source" {
		t.Fatalf("directory source allowed without AllowDir: %v", err)
	}
	if _, err := y.Sync(ctx, callerA, "claude-code", bs.URL+"/missing.json"); contract.AsError(err).Code != "source_unavailable" {
		t.Fatalf("missing bundle: %v", err)
	}
}

func testHandshake(t *testing.T, st Stores) {
	ctx := t.Context()
	r := newRig(t, st, nil)
	bs := newBundleServer(t)
	pub := gov("verified", "public", "")
	bs.set(map[string]any{
		"provisions": []any{prov("HS-BIG", 1, pub, "max_chars", 5000), prov("HS-SMALL", 1, pub, "max_chars", 300)},
		"context_entries": []any{
			map[string]any{"ref": "detail:guide", "kind": "detail", "body": "guide", "max_chars": 100000, "version": 1, "fabric_governance": pub},
		},
	})
	y := provsync.New(r.svc, provsync.Config{MaxChars: 1000})
	rep := must(y.Sync(ctx, callerA, "claude-code", "handshake+"+bs.URL))
	if len(rep.Taken) != 3 {
		t.Fatalf("handshake report %+v", rep)
	}
	want := []provsync.Clamp{{Kind: "context", ID: "detail:guide", From: 100000, To: 1000}, {Kind: "provision", ID: "HS-BIG", From: 5000, To: 1000}}
	if !reflect.DeepEqual(rep.Clamped, want) {
		t.Fatalf("clamps %+v, want %+v", rep.Clamped, want)
	}
	if p := must(r.svc.GetProvision(ctx, callerA, "HS-BIG")); p.MaxChars != 1000 {
		t.Fatalf("HS-BIG max_chars %d", p.MaxChars)
	}
	if p := must(r.svc.GetProvision(ctx, callerA, "HS-SMALL")); p.MaxChars != 300 {
		t.Fatalf("HS-SMALL max_chars %d", p.MaxChars)
	}
	if e := must(r.svc.GetContext(ctx, callerA, "detail:guide")); e.MaxChars != 1000 {
		t.Fatalf("context max_chars %d", e.MaxChars)
	}
	if len(bs.handshakes) != 1 || bs.handshakes[0] != (provsync.HandshakeRequest{Client: "caduceus", Tenant: "slot-1", Harness: "claude-code", MaxChars: 1000}) {
		t.Fatalf("handshake requests %+v", bs.handshakes)
	}
	// The clamp is in the audit trail with the rest of the report.
	if rep.AuditID == "" {
		t.Fatal("sync not audited")
	}
}

func testSyncedContextShimmed(t *testing.T, st Stores) {
	ctx := t.Context()
	r := newRig(t, st, nil)
	bs := newBundleServer(t)
	body := "Noun: the payments service owns /v2/charges."
	uri := bs.blob(body)
	pub := gov("verified", "public", "")
	bs.set(map[string]any{
		"context": []any{
			map[string]any{"ref": "noun:service/payments", "kind": "noun", "body_uri": uri, "version": 1, "fabric_governance": pub},
			map[string]any{"ref": "verb:charge", "kind": "verb", "body": "POST /v2/charges with an idempotency key.", "version": 1, "fabric_governance": pub},
		},
		"provisions": []any{map[string]any{"id": "PAY", "version": 1, "fabric_governance": pub, "action": "shim",
			"triggers": map[string]any{"keyword": map[string]any{"any": []string{"charge"}}}, "context_refs": []string{"noun:service/payments", "verb:charge"}}},
	})
	y := provsync.New(r.svc, provsync.Config{})
	if rep := must(y.Sync(ctx, callerA, "claude-code", bs.URL+"/bundle.json")); len(rep.Taken) != 3 {
		t.Fatalf("sync %+v", rep)
	}
	rc := r.chat(t, callerA, "", msg{"user", "how do I charge a card?"})
	if !fired(rc, "PAY") || len(rc.Shimmed) != 2 {
		t.Fatalf("receipt %+v", rc)
	}
	got := map[string]shim.Shimmed{}
	for _, s := range rc.Shimmed {
		got[s.Ref] = s
	}
	if s := got["noun:service/payments"]; s.SHA256 != contract.SHA256([]byte(body)) || s.Provision != "PAY" || s.Chars != len(body) {
		t.Fatalf("shimmed noun %+v, want the blob's sha256", s)
	}
	// Caller isolation: tenant B has neither the rule nor the entries.
	rcB := r.chat(t, callerB, "", msg{"user", "how do I charge a card?"})
	if len(rcB.Fired) != 0 || len(rcB.Shimmed) != 0 {
		t.Fatalf("tenant B got tenant A's synced context: %+v", rcB)
	}
}

func testStarters(t *testing.T, st Stores) {
	ctx := t.Context()
	g := &shim.Governor{Cohorts: map[contract.TenantSlot][]string{"slot-1": {"core"}}}
	r := newRig(t, st, g)
	bs := newBundleServer(t)
	starter := gov("verified", "team", "core", "claude-code", "ops")
	bs.set(map[string]any{
		"context": []any{map[string]any{"ref": "detail:guide", "kind": "detail", "body": "Starter guide.", "version": 1, "system_builtin": true, "fabric_governance": starter}},
		"provisions": []any{
			prov("STARTER", 1, starter, "system_builtin", true, "triggers", map[string]any{"keyword": map[string]any{"any": []string{"starter"}}}),
		},
	})
	y := provsync.New(r.svc, provsync.Config{Governor: g})
	// A non-admin key cannot sync into system_builtin.
	if rep := must(y.Sync(ctx, callerA, "claude-code", bs.URL+"/bundle.json")); len(rep.Taken) != 0 || items(rep.Refused)["provision/STARTER"].Reason != provsync.ReasonBuiltin {
		t.Fatalf("non-admin starter sync %+v", rep)
	}
	rep := must(y.Sync(ctx, callerAdmin, "ops", bs.URL+"/bundle.json"))
	if it := items(rep.Taken)["provision/STARTER"]; it.Result != provsync.Created || it.Tenant != r.svc.BuiltinTenant() {
		t.Fatalf("admin starter sync %+v", rep)
	}
	ask := msg{"user", "show me the starter"}
	// A routed caller of a cohort-core tenant through claude-code: fires, with builtin context.
	rc := r.chat(t, callerA, "", ask)
	if !fired(rc, "STARTER") || len(rc.Shimmed) != 1 || rc.Shimmed[0].Ref != "detail:guide" {
		t.Fatalf("starter did not fire for a routed, admitted caller: %+v", rc)
	}
	// Another tenant (not in core): the lens refuses it.
	if rcB := r.chat(t, callerB, "", ask); fired(rcB, "STARTER") || skippedWhy(rcB, "STARTER") != "not_admitted:"+shim.ReasonVisibility {
		t.Fatalf("starter for tenant B: %+v", rcB)
	}
	// Same tenant through another harness: refused by the harness tag.
	if rcC := r.chat(t, callerCursor, "", ask); fired(rcC, "STARTER") || skippedWhy(rcC, "STARTER") != "not_admitted:"+shim.ReasonHarness {
		t.Fatalf("starter for harness cursor: %+v", rcC)
	}
	// A caller without route scope is not routed: the starter does not fire in its dry run.
	body, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": []msg{ask}})
	dr := must(r.svc.DryRun(ctx, callerConf, wire.ChatCompletions, body))
	if slices.ContainsFunc(dr.Fired, func(f shim.Fired) bool { return f.ID == "STARTER" }) {
		t.Fatalf("starter fired for a configure-only caller: %+v", dr)
	}
	// When the stored starter's governance stops passing, it stops firing.
	cur := must(st.Rules.GetProvision(ctx, r.svc.BuiltinTenant(), "STARTER"))
	cur.FabricGovernance.Status = shim.GovQuarantined
	must(st.Rules.UpdateProvision(ctx, r.svc.BuiltinTenant(), cur, cur.Version))
	r2 := newRig(t, st, g) // a fresh process: no cached rules
	if rc := r2.chat(t, callerA, "", ask); fired(rc, "STARTER") || skippedWhy(rc, "STARTER") != "not_admitted:"+shim.ReasonQuarantined {
		t.Fatalf("quarantined starter: %+v", rc)
	}
}

// Two syncs of a newer source version race: exactly one update lands, the
// other finds it unchanged or loses the CAS; nothing is written twice.
func testConcurrentSync(t *testing.T, st Stores) {
	ctx := t.Context()
	r := newRig(t, st, nil)
	bs := newBundleServer(t)
	pub := gov("verified", "public", "")
	bs.set(map[string]any{"provisions": []any{prov("RACE", 1, pub)}})
	y := provsync.New(r.svc, provsync.Config{Ledger: st.Memory})
	must(y.Sync(ctx, callerA, "claude-code", bs.URL+"/bundle.json"))
	bs.set(map[string]any{"provisions": []any{prov("RACE", 2, pub, "priority", 7)}})
	const n = 4
	reps := make([]provsync.Report, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			rep, err := provsync.New(r.svc, provsync.Config{Ledger: st.Memory}).Sync(ctx, callerA, "claude-code", bs.URL+"/bundle.json")
			if err != nil {
				t.Error(err)
			}
			reps[i] = rep
		})
	}
	wg.Wait()
	updated := 0
	for _, rep := range reps {
		for _, it := range rep.Taken {
			switch it.Result {
			case provsync.Updated:
				updated++
			case provsync.Unchanged:
			default:
				t.Fatalf("unexpected %+v", it)
			}
		}
		for _, it := range rep.Conflicts {
			if it.Reason != provsync.ReasonRevisionMismatch {
				t.Fatalf("unexpected conflict %+v", it)
			}
		}
	}
	if updated != 1 {
		t.Fatalf("%d updates landed, want 1: %+v", updated, reps)
	}
	if p := must(r.svc.GetProvision(ctx, callerA, "RACE")); p.Version != 2 || p.Priority != 7 {
		t.Fatalf("RACE is %+v", p)
	}
}

// racingLedger runs during once, inside the first GetSyncMark: between the
// syncer's read of the record and its read of the record's mark.
type racingLedger struct {
	shim.SyncLedger
	once   sync.Once
	during func()
}

func (l *racingLedger) GetSyncMark(ctx context.Context, tenant contract.TenantSlot, kind, id string) (shim.SyncMark, bool, error) {
	l.once.Do(l.during)
	return l.SyncLedger.GetSyncMark(ctx, tenant, kind, id)
}

// testSyncBetweenReads pins the interleaving behind the flake of
// H07_ConcurrentSyncCAS: sync A reads version 1 of a record, sync B then
// updates it to version 2 and marks it, and only then does A read the mark.
// A lost the race exactly as a failed CAS write would: revision_mismatch,
// never "source version 2 is not newer than 2".
func testSyncBetweenReads(t *testing.T, st Stores) {
	ctx := t.Context()
	r := newRig(t, st, nil)
	bs := newBundleServer(t)
	pub := gov("verified", "public", "")
	bs.set(map[string]any{"provisions": []any{prov("RACE", 1, pub)}})
	must(provsync.New(r.svc, provsync.Config{Ledger: st.Memory}).Sync(ctx, callerA, "claude-code", bs.URL+"/bundle.json"))
	bs.set(map[string]any{"provisions": []any{prov("RACE", 2, pub, "priority", 7)}})

	var repB provsync.Report
	racing := &racingLedger{SyncLedger: st.Memory, during: func() {
		repB = must(provsync.New(r.svc, provsync.Config{Ledger: st.Memory}).Sync(ctx, callerA, "claude-code", bs.URL+"/bundle.json"))
	}}
	repA := must(provsync.New(r.svc, provsync.Config{Ledger: racing}).Sync(ctx, callerA, "claude-code", bs.URL+"/bundle.json"))
	if len(repB.Taken) != 1 || repB.Taken[0].Result != provsync.Updated {
		t.Fatalf("sync B: %+v", repB)
	}
	if len(repA.Taken) != 0 || len(repA.Conflicts) != 1 || repA.Conflicts[0].Reason != provsync.ReasonRevisionMismatch {
		t.Fatalf("sync A lost the race and must say revision_mismatch: %+v", repA)
	}
	if p := must(r.svc.GetProvision(ctx, callerA, "RACE")); p.Version != 2 || p.Priority != 7 {
		t.Fatalf("RACE is %+v", p)
	}
}
