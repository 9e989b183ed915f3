package shim_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

func TestDryRunPersistsNothing(t *testing.T) {
	e := newEnv(t, nil)
	e.context(t, "key-a", `{"ref":"verb:deploy","kind":"verb","title":"Deploy guide","body":"`+deployBody+`"}`)
	p := e.provision(t, "key-a", `{"id":"ONCE","once_per_conversation":true,"triggers":{"keyword":{"any":["deploy"]}},"action":"shim","context_refs":["verb:deploy"]}`)
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"deploy now"}],"x_vendor":{"a":1}}`)
	for i := range 2 {
		res, err := e.svc.DryRun(t.Context(), callers["key-a"], wire.ChatCompletions, body)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := wire.Inject(wire.ChatCompletions, body, expectedShim(p.ID, p.Version))
		if res.Persisted || res.Decision != shim.DecisionForward || string(res.Forwarded) != string(want) || len(res.Fired) != 1 {
			t.Fatalf("run %d: %+v", i, res)
		}
	}
	if len(e.receipts(t, "key-a")) != 0 || len(e.audit.Records("slot-1")) != 0 || e.up.calls() != 0 {
		t.Fatal("dry-run persisted a receipt or called the upstream")
	}
	// the ledger was not marked: the real request still gets the shim
	resp, _ := e.post(t, "key-a", "/v1/chat/completions", string(body), nil)
	if resp.StatusCode != 200 || !strings.Contains(string(e.up.last(t).Body), "caduceus-shim") {
		t.Fatal("dry-run marked the once-per-conversation ledger")
	}
	// other tenants' dry-runs do not see A's rules
	res, err := e.svc.DryRun(t.Context(), callers["key-b"], wire.ChatCompletions, body)
	if err != nil || len(res.Fired) != 0 || string(res.Forwarded) != string(body) {
		t.Fatalf("tenant B dry-run: %+v %v", res, err)
	}
	_, err = e.svc.DryRun(t.Context(), callers["key-a"], wire.Messages, []byte(`{"model":"m"}`))
	wantErr(t, err, contract.KindInvalid, shim.CodeInvalidRequest)
	res, err = e.svc.DryRun(t.Context(), callers["key-a"], wire.Messages, []byte(`{"model":"x-contributor","messages":[]}`))
	if err != nil || res.Decision != shim.DecisionRefused || res.Refusal.Code != shim.CodeContributorRefused {
		t.Fatalf("contributor dry-run: %+v %v", res, err)
	}
}

func TestPreviewBuiltinsOnly(t *testing.T) {
	e := newEnv(t, nil)
	e.provision(t, "key-a", `{"id":"TENANT","triggers":{"keyword":{"any":["hello"]}},"action":"respond_directly","response":{"text":"tenant"}}`)
	body := []byte(`{"model":"claude-x","messages":[{"role":"user","content":"hello"}]}`)
	res, err := e.svc.Preview(t.Context(), wire.Messages, body)
	if err != nil || res.Persisted || len(res.Fired) != 0 || res.Decision != shim.DecisionForward {
		t.Fatalf("preview saw a tenant rule: %+v %v", res, err)
	}
	if _, err := e.svc.CreateProvision(t.Context(), callers["key-admin"], "ops",
		[]byte(`{"id":"B","system_builtin":true,"triggers":{"keyword":{"any":["hello"]}},"action":"respond_directly","response":{"text":"builtin"}}`)); err != nil {
		t.Fatal(err)
	}
	res, err = e.svc.Preview(t.Context(), wire.Messages, body)
	if err != nil || res.Decision != shim.DecisionDirect || len(res.Fired) != 1 || !res.Fired[0].Builtin {
		t.Fatalf("preview: %+v %v", res, err)
	}
	var msg struct {
		Content []struct{ Text string }
	}
	if err := json.Unmarshal(res.Response, &msg); err != nil || msg.Content[0].Text != "builtin" {
		t.Fatalf("preview response %s", res.Response)
	}
	out, _ := json.Marshal(res)
	if !strings.Contains(string(out), `"persisted":false`) {
		t.Fatalf("preview JSON %s", out)
	}
	if len(e.receipts(t, "key-a")) != 0 || e.up.calls() != 0 {
		t.Fatal("preview persisted or forwarded")
	}
}

func TestApply(t *testing.T) {
	e := newEnv(t, nil)
	doc := `
context:
  - ref: verb:deploy
    kind: verb
    title: Deploy guide
    body: Run make deploy.
provisions:
  - id: PROV-DEPLOY
    priority: 100
    triggers:
      keyword: {any: [deploy, release]}
      semantic: {examples: [ship this to prod], threshold: 0.8}
    action: shim
    context_refs: [verb:deploy]
  - id: BAD
    triggers: {}
    action: shim
    context_refs: [verb:deploy]
`
	a := callers["key-a"]
	rep, err := e.svc.Apply(t.Context(), a, "claude-code", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Items) != 3 || rep.Failed() != 1 || rep.Items[0].Result != "created" || rep.Items[1].Result != "created" || rep.Items[2].Code != "no_trigger" {
		t.Fatalf("report %+v", rep)
	}
	rep, _ = e.svc.Apply(t.Context(), a, "claude-code", []byte(doc))
	if rep.Items[0].Result != "updated" || rep.Items[0].Version != 2 || rep.Items[1].Version != 2 {
		t.Fatalf("second apply %+v", rep)
	}
	// a stale explicit version conflicts and changes nothing
	rep, _ = e.svc.Apply(t.Context(), a, "claude-code", []byte(`{"id":"PROV-DEPLOY","version":1,"triggers":{"keyword":{"any":["x"]}},"action":"shim","context_refs":["verb:deploy"]}`))
	if rep.Failed() != 1 || rep.Items[0].Code != shim.CodeRevisionMismatch {
		t.Fatalf("stale apply %+v", rep)
	}
	rep, _ = e.svc.Apply(t.Context(), a, "wrong-harness", []byte(doc))
	if rep.Failed() != 3 || rep.Items[0].Code != shim.CodeHarnessMismatch {
		t.Fatalf("unattested apply %+v", rep)
	}
	for _, bad := range []string{`42`, `{"provisions":3}`, `{"other":[]}`, `: : :`} {
		if _, err := e.svc.Apply(t.Context(), a, "claude-code", []byte(bad)); err == nil {
			t.Fatalf("accepted document %q", bad)
		}
	}
}

func TestReceiptSchemaRefusesBadReceipt(t *testing.T) {
	good := shim.Receipt{ID: "rcpt_01ABCDEFGHJKMNPQRSTVWXYZ00", At: "2026-11-29T20:00:00Z", Tenant: "slot-1", Subject: "usr_0123456789abcdef",
		Protocol: wire.Messages, Decision: shim.DecisionForward, Fired: []shim.Fired{}, Skipped: []shim.Skipped{}, Shimmed: []shim.Shimmed{}}
	if err := receiptSchema.Validate(good); err != nil {
		t.Fatal(err)
	}
	bad := good
	bad.Decision = "maybe"
	if err := receiptSchema.Validate(bad); err == nil || !strings.Contains(err.Error(), "decision") {
		t.Fatalf("a bad decision passed the schema: %v", err)
	}
}
